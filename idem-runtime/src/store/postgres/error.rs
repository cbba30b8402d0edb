//! What a failed PostgreSQL statement or connection means for
//! [`PostgresStore`](super::PostgresStore): unavailable (worth another
//! connection) or the backend's own error, with a message that says why.

use bb8::RunError;

use crate::error::StoreError;

/// Lost connections, and the server shutting a session down (SQLSTATE
/// class 08, 57P01-57P03: a terminated backend, a restart, a failover)
/// are `Unavailable`; a server out of disk or memory (53100 `disk_full`,
/// 53200 `out_of_memory`) `Full`; other database errors the backend's own.
pub(super) fn sql_error(e: tokio_postgres::Error) -> StoreError {
    let lost = connection_lost(&e);
    let full = e
        .as_db_error()
        .is_some_and(|db| matches!(db.code().code(), "53100" | "53200"));
    let e = PgError::from(e);
    if lost {
        StoreError::unavailable(e)
    } else if full {
        StoreError::full(e)
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
