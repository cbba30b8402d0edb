//! The connection of a [`RedisStore`](super::RedisStore), judged by its
//! answers: one multiplexed connection to a server, or one cluster
//! connection, made when first needed and replaced as soon as its socket
//! breaks, or a command sent over it gets no answer (it timed out, or its
//! caller stopped waiting) while the connection answered nothing else
//! since the command was sent ([`crate::store::answers`]). A connection
//! that went silent (half-open TCP: a failover behind a virtual IP, a NAT
//! that dropped its state) looks open to the client until the kernel gives
//! up on it, minutes later; a connection of a store is never trusted for
//! that long. A loaded one, which goes on answering, is kept.
//!
//! A command to a server waits for its answer up to the store's response
//! timeout, or until its caller stops waiting if that comes no later (the
//! registry's store timeout, [`crate::store::bound`]): one timer a command,
//! not two.
//!
//! Every socket also has TCP keepalive and `TCP_USER_TIMEOUT` set
//! ([`tcp_settings`]), so that the kernel closes a dead one within seconds
//! even while nothing is sent.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::{TcpSettings, socket2::TcpKeepalive};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};

use super::error::connection_lost;
use crate::store::answers::Answers;
use crate::store::bound::caller_limit;
use crate::store::keepalive;

/// One connection, to a server or to a cluster: what a command is sent
/// over. Cheap to clone (a handle to the connection's task).
#[derive(Clone)]
pub(super) enum Conn {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

impl Conn {
    /// This connection as one command is sent over it. A server's is given
    /// `response_timeout` (`None` for a cluster's, whose client applies its
    /// own) unless the caller stops waiting no later ([`caller_limit`]):
    /// then the caller's timer always ends the wait first, and a second
    /// one would be armed for nothing.
    fn for_command(mut self, response_timeout: Option<Duration>) -> Conn {
        if let (Conn::Single(c), Some(timeout)) = (&mut self, response_timeout)
            && caller_limit().is_none_or(|limit| limit > timeout)
        {
            c.set_response_timeout(timeout);
        }
        self
    }
}

/// How a new connection is made.
pub(super) enum Dialer {
    /// A server's: its connection has no response timeout of its own, and
    /// each command is given `response_timeout` when it needs one
    /// ([`Conn::for_command`]).
    Single {
        client: redis::Client,
        config: AsyncConnectionConfig,
        response_timeout: Duration,
    },
    Cluster(ClusterClient),
}

impl Dialer {
    /// The bound on one command's answer, for [`Conn::for_command`]; a
    /// cluster's client applies its own.
    fn response_timeout(&self) -> Option<Duration> {
        match self {
            Dialer::Single {
                response_timeout, ..
            } => Some(*response_timeout),
            Dialer::Cluster(_) => None,
        }
    }

    async fn dial(&self) -> RedisResult<Conn> {
        match self {
            Dialer::Single { client, config, .. } => client
                .get_multiplexed_async_connection_with_config(config)
                .await
                .map(Conn::Single),
            Dialer::Cluster(client) => client.get_async_connection().await.map(Conn::Cluster),
        }
    }
}

/// The store's connection: the one in use, if any, and how to make the
/// next.
pub(super) struct Connections {
    dialer: Dialer,
    /// How often a failed connection attempt is tried again before a
    /// command fails.
    retries: usize,
    /// The connection in use; `None` once retired, until the next command
    /// makes a new one.
    current: Mutex<Option<Lane>>,
    /// One task at a time makes the next connection; the others wait for
    /// it rather than each making their own.
    dialing: tokio::sync::Mutex<()>,
    /// Numbers the connections, so that retiring an old one never
    /// retires its successor.
    made: AtomicU64,
}

impl Connections {
    /// Connections made by `dialer`, none yet.
    pub(super) fn new(dialer: Dialer, retries: usize) -> Connections {
        Connections {
            dialer,
            retries,
            current: Mutex::new(None),
            dialing: tokio::sync::Mutex::new(()),
            made: AtomicU64::new(0),
        }
    }

    /// Whether this is a cluster's connection.
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self.dialer, Dialer::Cluster(_))
    }

    /// Sends what `send` sends over the connection in use (made first if
    /// there is none), as [`InFlight`] judges it: the connection is
    /// retired if its socket broke under the command, or if the command
    /// got no answer (it timed out, or this future was dropped: the
    /// registry's store timeout) while the connection answered nothing
    /// else since it was sent. A command that failed so is sent once more,
    /// over a new connection where its own was retired; one that could not
    /// be made is an error at once (it has had its connection timeout).
    /// Safe for every command the store sends: a claim that took effect
    /// recognises its own token, a settle repeated by its token succeeds,
    /// and the rest only read.
    pub(super) async fn send<T, F, Fut>(&self, send: F) -> RedisResult<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let lane = self.connection().await?;
        match self.send_on(lane, &send).await {
            Err(e) if connection_lost(&e) => {
                tracing::debug!(error = %e, "Redis connection lost; sending once more over a new one");
                let lane = self.connection().await?;
                self.send_on(lane, &send).await
            }
            other => other,
        }
    }

    /// `send` over `lane`, as [`InFlight`] judges it.
    async fn send_on<T, F, Fut>(&self, lane: Lane, send: &F) -> RedisResult<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let Lane {
            number,
            conn,
            answers,
        } = lane;
        let mut flight = InFlight {
            connections: self,
            number,
            sent: answers.mark(),
            answers,
            outcome: Heard::Unanswered,
        };
        let result = send(conn.for_command(self.dialer.response_timeout())).await;
        flight.outcome = match &result {
            Err(e) if e.is_timeout() => Heard::Unanswered,
            Err(e) if connection_lost(e) => Heard::Broken,
            _ => Heard::Answered,
        };
        result
    }

    /// Makes the connection now, if there is none: no command is sent
    /// (an ACL user may be allowed none but the store's own).
    pub(super) async fn open(&self) -> RedisResult<()> {
        self.connection().await.map(|_| ())
    }

    /// The connection in use, or a new one.
    async fn connection(&self) -> RedisResult<Lane> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        // Boxed: connecting is rare and its future large, and every
        // command's future would otherwise carry it.
        Box::pin(self.connect()).await
    }

    /// A new connection, made by one task while the others wait for it.
    async fn connect(&self) -> RedisResult<Lane> {
        let _turn = self.dialing.lock().await;
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let conn = self.dial().await?;
        let lane = Lane {
            number: self.made.fetch_add(1, Ordering::Relaxed),
            conn,
            answers: Arc::default(),
        };
        *self.slot() = Some(lane.clone());
        Ok(lane)
    }

    /// A new connection, tried again after a short pause up to `retries`
    /// times when it failed at once (refused, reset: a server restarting);
    /// one that timed out has had its time.
    async fn dial(&self) -> RedisResult<Conn> {
        let mut pause = Duration::from_millis(10);
        let mut tries = 0;
        loop {
            match self.dialer.dial().await {
                Ok(conn) => return Ok(conn),
                Err(e) if tries < self.retries && connection_lost(&e) && !e.is_timeout() => {
                    tracing::debug!(error = %e, "connecting to Redis failed; trying again");
                    tries += 1;
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn current(&self) -> Option<Lane> {
        self.slot().clone()
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Lane>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Retires connection `number` if it is still the one in use. The
    /// commands in flight on it keep it until they end.
    fn retire(&self, number: u64) {
        let mut slot = self.slot();
        if slot.as_ref().is_some_and(|lane| lane.number == number) {
            *slot = None;
            tracing::info!(
                connection = number,
                "a Redis connection broke or went silent: it is retired, the next command opens a new one"
            );
        }
    }
}

/// A connection and what is known of it: its number (so that retiring an
/// old one never retires its successor) and how many answers it gave.
#[derive(Clone)]
struct Lane {
    number: u64,
    conn: Conn,
    answers: Arc<Answers>,
}

/// How a command sent over a connection ended.
#[derive(Clone, Copy)]
enum Heard {
    /// An answer came (a reply, or an error of the server's own).
    Answered,
    /// The socket broke under it.
    Broken,
    /// It timed out, or its caller stopped waiting (the future was
    /// dropped).
    Unanswered,
}

/// A command in flight on connection `number`, sent when its `answers`
/// stood at `sent`: notes an answer, or retires the connection if its
/// socket broke, or if it went unanswered while the connection answered
/// nothing else since it was sent (a cluster's: whenever it went
/// unanswered).
struct InFlight<'a> {
    connections: &'a Connections,
    number: u64,
    answers: Arc<Answers>,
    sent: u64,
    outcome: Heard,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let answers = &self.answers;
        match self.outcome {
            Heard::Answered => answers.note(),
            Heard::Broken => self.connections.retire(self.number),
            // A cluster's connection answers for every node: one node's
            // silence does not show in the others' answers.
            Heard::Unanswered
                if self.connections.is_cluster() || answers.silent_since(self.sent) =>
            {
                self.connections.retire(self.number);
            }
            Heard::Unanswered => {}
        }
    }
}

/// The TCP settings of every connection: keepalive and
/// `TCP_USER_TIMEOUT` as [`keepalive`] sets them (Nagle's algorithm stays
/// on, as redis-rs leaves it: commands from concurrent calls coalesce).
pub(super) fn tcp_settings() -> TcpSettings {
    let probes = TcpKeepalive::new()
        .with_time(keepalive::IDLE)
        .with_interval(keepalive::INTERVAL);
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
    let probes = probes.with_retries(keepalive::PROBES);
    let settings = TcpSettings::default().set_keepalive(probes);
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
    let settings = settings.set_user_timeout(keepalive::USER_TIMEOUT);
    settings
}
