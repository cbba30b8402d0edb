//! The connection pool of [`PostgresStore`](super::PostgresStore) (bb8):
//! connections with every statement prepared, never handed out once their
//! server end is gone, and what a failed statement means.

use std::sync::Arc;

use bb8::{ManageConnection, RunError};
use tokio_postgres::tls::TlsStream;
use tokio_postgres::{Client, Config, Connection, NoTls, Socket, Statement};

use super::sql::Sql;
use super::url::ConnectionString;
use crate::error::StoreError;

/// A pooled connection with every statement prepared.
pub(super) struct PgConn {
    pub(super) client: Client,
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
    pub(super) sql: Arc<Sql>,
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

impl ManageConnection for PgManager {
    type Connection = PgConn;
    type Error = StoreError;

    async fn connect(&self) -> Result<PgConn, StoreError> {
        let client = connect(&self.config, &self.tls).await.map_err(sql_error)?;
        let prepare = async |sql: &str| client.prepare(sql).await.map_err(sql_error);
        Ok(PgConn {
            claim: prepare(&self.sql.claim).await?,
            read: prepare(&self.sql.read).await?,
            settle: prepare(&self.sql.settle).await?,
            renew: prepare(&self.sql.renew).await?,
            client,
            broken: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Run at every checkout: a connection whose server end is gone (a
    /// terminated backend, a restarted server, an idle timeout) is never
    /// handed to an operation. No round trip: the connection task has
    /// already seen the socket close.
    async fn is_valid(&self, conn: &mut PgConn) -> Result<(), StoreError> {
        if conn.client.is_closed() {
            Err(StoreError::unavailable(
                "the pooled PostgreSQL connection was closed",
            ))
        } else {
            Ok(())
        }
    }

    fn has_broken(&self, conn: &mut PgConn) -> bool {
        conn.client.is_closed() || *conn.broken.get_mut()
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

/// Lost connections, and the server shutting a session down (SQLSTATE
/// class 08, 57P01-57P03: a terminated backend, a restart, a failover)
/// are `Unavailable`; other database errors the backend's own.
pub(super) fn sql_error(e: tokio_postgres::Error) -> StoreError {
    let lost = connection_lost(&e);
    let e = PgError::from(e);
    if lost {
        StoreError::unavailable(e)
    } else {
        StoreError::backend(e)
    }
}

/// A tokio-postgres error that says what the server said, or what went
/// wrong on the way: its own `Display` is only "db error", or "error
/// performing TLS handshake" without the cause.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(super) struct PgError {
    message: String,
    #[source]
    source: tokio_postgres::Error,
}

impl From<tokio_postgres::Error> for PgError {
    fn from(source: tokio_postgres::Error) -> PgError {
        let message = match source.as_db_error() {
            Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
            // "error performing TLS handshake" says little without its
            // cause: the whole chain.
            None => {
                let mut message = source.to_string();
                let mut cause = std::error::Error::source(&source);
                while let Some(e) = cause {
                    message = format!("{message}: {e}");
                    cause = e.source();
                }
                message
            }
        };
        PgError { message, source }
    }
}

/// Whether `e` means the connection broke under the statement, so that it
/// is worth sending once more over another connection.
pub(super) fn connection_lost(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        None => true,
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
    }
}

pub(super) fn pg_error(e: RunError<StoreError>) -> StoreError {
    match e {
        RunError::User(e) => e,
        RunError::TimedOut => {
            StoreError::unavailable("timed out waiting for a PostgreSQL connection")
        }
    }
}
