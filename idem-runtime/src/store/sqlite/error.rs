//! What a failed SQLite statement or connection means for
//! [`SqliteStore`](super::SqliteStore): busy, full, unavailable (worth
//! another try) or the backend's own error, with a message that says why.

use std::path::Path;

use crate::error::StoreError;

/// A lock held by another connection is `Busy`, a full disk or database
/// (`SQLITE_FULL`) `Full`, I/O failures `Unavailable`; the rest the
/// backend's own.
pub(super) fn sql_error(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::*;
    match e.sqlite_error_code() {
        Some(DatabaseBusy | DatabaseLocked) => StoreError::busy(e),
        Some(DiskFull) => StoreError::full(e),
        Some(SystemIoFailure | CannotOpen) => StoreError::unavailable(e),
        _ => StoreError::backend(e),
    }
}

/// The connection's thread is gone (it panicked, or the store is dropped).
pub(super) fn thread_stopped() -> StoreError {
    StoreError::unavailable("the SQLite thread has stopped")
}

/// The database at `path` cannot be opened.
pub(super) fn cannot_open(path: &Path, e: rusqlite::Error) -> StoreError {
    StoreError::backend(format!(
        "cannot open SQLite database {}: {e}",
        path.display()
    ))
}

/// The database was written by a newer idem, at schema `newer`.
pub(super) fn newer_schema(newer: i64, known: i64) -> StoreError {
    StoreError::backend(format!(
        "the SQLite database has idem schema version {newer}, newer than this idem understands ({known}); upgrade idem"
    ))
}
