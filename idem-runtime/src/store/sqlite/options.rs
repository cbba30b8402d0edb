//! [`SqliteOptions`]: how a [`SqliteStore`](super::SqliteStore) opens its
//! database (the lock wait, the durability of a write).

use std::time::Duration;

/// How [`SqliteStore`](super::SqliteStore) opens its database.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqliteOptions {
    pub(crate) busy_timeout: Duration,
    pub(crate) synchronous_full: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            synchronous_full: false,
        }
    }
}

impl SqliteOptions {
    /// The defaults.
    pub fn new() -> SqliteOptions {
        SqliteOptions::default()
    }

    /// How long a write waits for another process's lock: 5 s.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// `PRAGMA synchronous = FULL`: survive power loss, at the price of an
    /// fsync per operation. The default, `NORMAL` in WAL mode, survives any
    /// crash of the process (the agent crashing is the case idem is for) and
    /// may lose the last operations on a power loss or OS crash. With
    /// `FULL`, every write runs on the store's own thread, so that its
    /// fsync never holds up the async runtime.
    pub fn synchronous_full(mut self, full: bool) -> Self {
        self.synchronous_full = full;
        self
    }
}
