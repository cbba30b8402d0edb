//! The connection of a [`RedisStore`](super::RedisStore), judged by its
//! answers: one multiplexed connection to a server, or one cluster
//! connection, made when first needed and replaced as soon as a command
//! sent over it gets no answer (it timed out, its caller stopped waiting,
//! or the socket broke). A connection that went silent (half-open TCP: a
//! failover behind a virtual IP, a NAT that dropped its state) looks open
//! to the client until the kernel gives up on it, minutes later; a
//! connection of a store is never trusted for that long.
//!
//! Every socket also has TCP keepalive and `TCP_USER_TIMEOUT` set
//! ([`tcp_settings`]), so that the kernel closes a dead one within seconds
//! even while nothing is sent.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::{TcpSettings, socket2::TcpKeepalive};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};

use super::errors::connection_lost;
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

/// How a new connection is made.
pub(super) enum Dialer {
    Single {
        client: redis::Client,
        config: AsyncConnectionConfig,
    },
    Cluster(ClusterClient),
}

impl Dialer {
    async fn dial(&self) -> RedisResult<Conn> {
        match self {
            Dialer::Single { client, config } => client
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
    /// The connection in use and its number; `None` once retired, until
    /// the next command makes a new one.
    current: Mutex<Option<(u64, Conn)>>,
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
    /// there is none). The connection is retired if the command gets no
    /// answer: it failed at the connection level or timed out, or this
    /// future was dropped before it was answered (the registry's store
    /// timeout). A command whose connection failed so is sent once more
    /// over a new connection; one that could not be made is an error at
    /// once (it has had its connection timeout). Safe for every command
    /// the store sends: a claim that took effect recognises its own token,
    /// a settle repeated by its token succeeds, and the rest only read.
    pub(super) async fn send<T, F, Fut>(&self, send: F) -> RedisResult<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let (number, conn) = self.connection().await?;
        match self.send_on(number, conn, &send).await {
            Err(e) if connection_lost(&e) => {
                tracing::debug!(error = %e, "Redis connection lost; sending once more over a new one");
                let (number, conn) = self.connection().await?;
                self.send_on(number, conn, &send).await
            }
            other => other,
        }
    }

    /// `send` over connection `number`, retiring it unless answered.
    async fn send_on<T, F, Fut>(&self, number: u64, conn: Conn, send: &F) -> RedisResult<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let mut pending = Unanswered {
            connections: self,
            number,
            answered: false,
        };
        let result = send(conn).await;
        pending.answered = !matches!(&result, Err(e) if connection_lost(e));
        result
    }

    /// Makes the connection now, if there is none: no command is sent
    /// (an ACL user may be allowed none but the store's own).
    pub(super) async fn open(&self) -> RedisResult<()> {
        self.connection().await.map(|_| ())
    }

    /// The connection in use, or a new one.
    async fn connection(&self) -> RedisResult<(u64, Conn)> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let _turn = self.dialing.lock().await;
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let conn = self.dial().await?;
        let number = self.made.fetch_add(1, Ordering::Relaxed);
        *self.slot() = Some((number, conn.clone()));
        Ok((number, conn))
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

    fn current(&self) -> Option<(u64, Conn)> {
        self.slot().clone()
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(u64, Conn)>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Retires connection `number` if it is still the one in use. The
    /// commands in flight on it keep it until they end.
    fn retire(&self, number: u64) {
        let mut slot = self.slot();
        if slot.as_ref().is_some_and(|(n, _)| *n == number) {
            *slot = None;
            tracing::info!(
                connection = number,
                "a Redis command got no answer: its connection is retired, the next command opens a new one"
            );
        }
    }
}

/// A command in flight: retires its connection unless it was answered.
struct Unanswered<'a> {
    connections: &'a Connections,
    number: u64,
    answered: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.connections.retire(self.number);
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
