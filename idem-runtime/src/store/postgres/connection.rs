//! The connection pool of [`PostgresStore`](super::PostgresStore) (bb8):
//! connections with every statement prepared, never handed out once their
//! server end is gone or that went silent ([`Silence`]), made plain or
//! over TLS as the URL says.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bb8::ManageConnection;
use tokio_postgres::tls::TlsStream;
use tokio_postgres::{Client, Config, Connection, NoTls, Socket, Statement};

use super::error::sql_error;
use super::sql::Sql;
use super::url::ConnectionString;
use crate::error::StoreError;
use crate::store::answers::{Clock, LastAnswer};
use crate::store::news::Teller;

/// A pooled connection with every statement prepared.
pub(super) struct PgConn {
    pub(super) client: Client,
    /// When it last answered, or was made.
    pub(super) answers: LastAnswer,
    /// An operation found the connection broken: the pool drops it.
    pub(super) broken: std::sync::atomic::AtomicBool,
    pub(super) claim: Statement,
    pub(super) read: Statement,
    pub(super) settle: Statement,
    pub(super) renew: Statement,
}

/// Connects, and prepares the statements on each new connection.
pub(super) struct PgManager {
    pub(super) config: Config,
    pub(super) tls: Tls,
    /// How long opening a connection may take, handshake and statements
    /// included: one frozen mid-handshake gives its pool slot back.
    pub(super) opening: Duration,
    pub(super) sql: Arc<Sql>,
    pub(super) silence: Arc<Silence>,
}

/// Connections are judged by their answers, not by their sockets
/// ([`crate::store::answers`]): a connection that went silent (half-open
/// TCP, after a failover behind a virtual IP or a NAT that dropped its
/// state) looks open until the kernel gives up on it. When a statement
/// goes unanswered (the registry's store timeout dropped it), every
/// connection that has answered nothing since it was sent is retired: the
/// ones idle in the pool are never handed out again, the ones in use are
/// closed when they come back. They share the path that went silent. A
/// connection that went on answering (a pool under load) is kept.
#[derive(Debug)]
pub(super) struct Silence {
    clock: Clock,
    /// Connections silent since then are retired: the send time of the
    /// latest statement that went unanswered (0: none).
    mark: AtomicU64,
}

impl Silence {
    pub(super) fn new() -> Silence {
        Silence {
            clock: Clock::new(),
            mark: AtomicU64::new(0),
        }
    }

    /// Whether `conn` is retired.
    fn retired(&self, conn: &PgConn) -> bool {
        conn.answers.silent_since(self.mark.load(Ordering::Relaxed))
    }
}

/// A statement in flight on `conn`: unless [`answered`](Self::answered),
/// its drop retires the connections silent since it was sent.
pub(super) struct InFlight<'a> {
    silence: &'a Silence,
    conn: &'a PgConn,
    sent: u64,
    answered: bool,
}

impl<'a> InFlight<'a> {
    pub(super) fn new(silence: &'a Silence, conn: &'a PgConn) -> InFlight<'a> {
        InFlight {
            silence,
            conn,
            sent: silence.clock.now(),
            answered: false,
        }
    }

    /// The statement was answered (with rows or an error of its own).
    pub(super) fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.answered {
            self.conn.answers.note(self.silence.clock.now());
        } else if self.conn.answers.silent_since(self.sent) {
            let before = self.silence.mark.fetch_max(self.sent, Ordering::Relaxed);
            if before < self.sent {
                tracing::info!(
                    "a PostgreSQL statement got no answer: the pool's connections silent since it was sent are retired, new ones are opened"
                );
            }
        }
    }
}

/// How connections are made: plaintext, or TLS (feature `postgres-tls`).
#[derive(Clone)]
pub(super) enum Tls {
    Plain,
    #[cfg(feature = "postgres-tls")]
    Rustls(tokio_postgres_rustls::MakeRustlsConnect),
}

impl Tls {
    /// The connector `read`'s `sslmode` asks for, trusting `root_pem`
    /// (else the URL's `sslrootcert`, else the platform's roots).
    pub(super) fn new(read: &ConnectionString, root_pem: Option<&[u8]>) -> Result<Tls, StoreError> {
        #[cfg(feature = "postgres-tls")]
        {
            let connector = super::tls::connector(read.mode, root_pem, read.root_cert.as_deref())?;
            Ok(connector.map_or(Tls::Plain, Tls::Rustls))
        }
        #[cfg(not(feature = "postgres-tls"))]
        {
            use super::url::SslMode;
            let _ = root_pem;
            match read.mode {
                // libpq built without TLS does the same.
                SslMode::Disable | SslMode::Prefer if read.root_cert.is_none() => Ok(Tls::Plain),
                _ => Err(StoreError::backend(
                    "TLS to PostgreSQL (sslmode require, verify-ca, verify-full; sslrootcert) \
                     needs idem's `postgres-tls` feature",
                )),
            }
        }
    }
}

impl PgManager {
    /// A new connection with every statement prepared.
    async fn open(&self) -> Result<PgConn, StoreError> {
        let client = connect(&self.config, &self.tls).await.map_err(sql_error)?;
        let prepare = async |sql: &str| client.prepare(sql).await.map_err(sql_error);
        Ok(PgConn {
            claim: prepare(&self.sql.claim).await?,
            read: prepare(&self.sql.read).await?,
            settle: prepare(&self.sql.settle).await?,
            renew: prepare(&self.sql.renew).await?,
            client,
            answers: LastAnswer::new(self.silence.clock.now()),
            broken: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

impl ManageConnection for PgManager {
    type Connection = PgConn;
    type Error = StoreError;

    /// Opens and prepares a connection within [`PgManager::opening`].
    async fn connect(&self) -> Result<PgConn, StoreError> {
        let opened = tokio::time::timeout(self.opening, self.open()).await;
        opened.unwrap_or_else(|_| {
            Err(StoreError::unavailable(format!(
                "PostgreSQL did not finish opening a connection within {:?}",
                self.opening
            )))
        })
    }

    /// Run at every checkout: a connection whose server end is gone (a
    /// terminated backend, a restarted server, an idle timeout) or that is
    /// retired ([`Silence`]) is never handed to an operation. No round
    /// trip: the connection task has already seen the socket close.
    async fn is_valid(&self, conn: &mut PgConn) -> Result<(), StoreError> {
        if conn.client.is_closed() {
            Err(StoreError::unavailable(
                "the pooled PostgreSQL connection was closed",
            ))
        } else if self.silence.retired(conn) {
            Err(StoreError::unavailable(
                "the pooled PostgreSQL connection was retired",
            ))
        } else {
            Ok(())
        }
    }

    fn has_broken(&self, conn: &mut PgConn) -> bool {
        conn.client.is_closed() || *conn.broken.get_mut() || self.silence.retired(conn)
    }
}

pub(super) async fn connect(config: &Config, tls: &Tls) -> Result<Client, tokio_postgres::Error> {
    match tls {
        Tls::Plain => Ok(spawned(config.connect(NoTls).await?)),
        #[cfg(feature = "postgres-tls")]
        Tls::Rustls(make) => Ok(spawned(config.connect(make.clone()).await?)),
    }
}

/// The client, its connection driven by a task of its own.
fn spawned<T>((client, connection): (Client, Connection<Socket, T>)) -> Client
where
    T: TlsStream + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "PostgreSQL connection closed");
        }
    });
    client
}

/// The channel a store announces changed records on (`NOTIFY`), the key
/// as the payload.
pub(super) const NEWS_CHANNEL: &str = "idem_news";

/// Listens for the store's announcements on a connection of its own,
/// opened within `opening` ([`PgManager::opening`]), telling each key
/// heard to `teller`, until the connection ends (`Ok`) or fails.
pub(super) async fn listen(
    config: Config,
    tls: Tls,
    opening: Duration,
    teller: Teller,
) -> Result<(), String> {
    let silent = |_| {
        format!("PostgreSQL did not finish opening the listening connection within {opening:?}")
    };
    let failed = |e| sql_error(e).to_string();
    match tls {
        Tls::Plain => {
            let opened = tokio::time::timeout(opening, config.connect(NoTls)).await;
            listen_on(opened.map_err(silent)?.map_err(failed)?, &teller)
                .await
                .map_err(failed)
        }
        #[cfg(feature = "postgres-tls")]
        Tls::Rustls(make) => {
            let opened = tokio::time::timeout(opening, config.connect(make)).await;
            listen_on(opened.map_err(silent)?.map_err(failed)?, &teller)
                .await
                .map_err(failed)
        }
    }
}

/// `LISTEN` on `connected`, driving its connection by hand: its
/// notifications come from [`Connection::poll_message`].
async fn listen_on<T>(
    (client, mut connection): (Client, Connection<Socket, T>),
    teller: &Teller,
) -> Result<(), tokio_postgres::Error>
where
    T: TlsStream + Unpin,
{
    use std::task::Poll;
    use tokio_postgres::AsyncMessage;

    let command = format!("LISTEN {NEWS_CHANNEL}");
    let mut subscribing = std::pin::pin!(client.batch_execute(&command));
    let mut subscribed = false;
    std::future::poll_fn(|cx| {
        if !subscribed && let Poll::Ready(answer) = subscribing.as_mut().poll(cx) {
            answer?;
            subscribed = true;
        }
        loop {
            match connection.poll_message(cx) {
                Poll::Ready(Some(Ok(AsyncMessage::Notification(n)))) => teller.tell(n.payload()),
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await
}
