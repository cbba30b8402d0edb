//! How a networked store tells a connection that went silent from one that
//! is only busy: each connection notes when it last answered, and an
//! operation that goes unanswered (it timed out, or the registry's store
//! timeout gave up on it) retires the connections that have not answered
//! anything since it was sent. A silent connection (half-open TCP, after a
//! failover behind a virtual IP or a NAT that dropped its state) answers
//! nothing and is retired at once; a loaded one goes on answering other
//! operations and is kept, so a slow statement under load does not make a
//! whole pool reconnect.
//!
//! A pool (PostgreSQL) compares one connection's answers with a mark taken
//! on another's, so it notes them on one [`Clock`]; a store that compares
//! a connection only with itself (Redis's one connection) counts them,
//! without reading a clock on every command.

use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "postgres")]
use std::time::Instant;

/// A store's clock for [`LastAnswer`]s: microseconds since it started.
#[cfg(feature = "postgres")]
#[derive(Debug)]
pub(crate) struct Clock(Instant);

#[cfg(feature = "postgres")]
impl Clock {
    pub(crate) fn new() -> Clock {
        Clock(Instant::now())
    }

    /// Now, on this clock.
    pub(crate) fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

/// When a connection last answered (or was made, before its first
/// answer), on its store's [`Clock`].
#[cfg(feature = "postgres")]
#[derive(Debug)]
pub(crate) struct LastAnswer(AtomicU64);

#[cfg(feature = "postgres")]
impl LastAnswer {
    /// A connection made at `at`.
    pub(crate) fn new(at: u64) -> LastAnswer {
        LastAnswer(AtomicU64::new(at))
    }

    /// The connection answered at `at`.
    pub(crate) fn note(&self, at: u64) {
        self.0.fetch_max(at, Ordering::Relaxed);
    }

    /// Whether it has answered nothing since `mark` (nor been made since).
    pub(crate) fn silent_since(&self, mark: u64) -> bool {
        self.0.load(Ordering::Relaxed) < mark
    }
}

/// How many answers a connection has given: a command that saw the count
/// at its sending knows whether any came since.
#[cfg(feature = "redis")]
#[derive(Debug, Default)]
pub(crate) struct Answers(AtomicU64);

#[cfg(feature = "redis")]
impl Answers {
    /// The mark of a command sent now.
    pub(crate) fn mark(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// The connection answered.
    pub(crate) fn note(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether it has answered nothing since `mark`.
    pub(crate) fn silent_since(&self, mark: u64) -> bool {
        self.0.load(Ordering::Relaxed) == mark
    }
}
