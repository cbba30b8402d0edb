//! The store contract: what a store holds under a key ([`Entry`]), what a
//! claim answers ([`Claim`]) and the operations every backend implements
//! ([`IdemStore`]), with the semantics the module documentation of `store`
//! sets out.

use std::future::Future;
use std::time::Duration;

use super::inspect::{RecordInfo, ScanFilter, ScanPage};
use super::token::LeaseToken;
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};

/// How long a running (lapsed) or released record outlives its lease, so
/// that the next claim of the same operation can count the earlier attempt
/// and a worker whose lease lapsed can still record if nobody claimed since.
pub const CLAIM_RETENTION: Duration = Duration::from_secs(3600);

/// The outcome of a compare-and-set on the holder's token that changed
/// `changed` records: one, or the lease is lost.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) fn fenced(changed: u64) -> Result<(), StoreError> {
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost)
    }
}

/// What a store holds under a key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Entry {
    /// Claimed by a worker (its lease may have lapsed).
    Running {
        /// The fingerprint of the arguments the holder runs with.
        fingerprint: Fingerprint,
        /// The holder's attempt number.
        attempt: u32,
    },
    /// A recorded result.
    Done {
        /// The result as JSON text (sealed, when the registry encrypts
        /// results: docs/spec.md, "Sealed payloads").
        result: String,
        /// The fingerprint of the arguments that produced it.
        fingerprint: Fingerprint,
    },
    /// A recorded permanent failure.
    Failed {
        /// The error's text (sealed, when the registry encrypts results).
        error: String,
        /// The fingerprint of the arguments that produced it.
        fingerprint: Fingerprint,
    },
}

impl Entry {
    /// The fingerprint of the arguments this entry belongs to.
    pub fn fingerprint(&self) -> &Fingerprint {
        match self {
            Entry::Running { fingerprint, .. }
            | Entry::Done { fingerprint, .. }
            | Entry::Failed { fingerprint, .. } => fingerprint,
        }
    }
}

/// The answer to [`IdemStore::claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller now holds the key; run the operation.
    Acquired(LeaseToken),
    /// Someone else holds it or it has a recorded outcome.
    Existing(Entry),
}

/// A store of idempotency records.
///
/// See the [module documentation](crate::store) for the semantics each operation
/// must have. Implementations must make every operation one atomic step in
/// the store and judge expiry by the store's clock.
///
/// The registry holds stores as `Arc<dyn DynIdemStore>`; every `IdemStore`
/// is a [`DynIdemStore`](crate::DynIdemStore) through a blanket implementation.
pub trait IdemStore: Send + Sync + 'static {
    /// Claims `key` for a lease of `lease`, or reports what holds it. The
    /// record names `tool`, the tool whose call it is, for operators
    /// ([`inspect`](Self::inspect)); a tool's name never contains `|`
    /// ([`valid_tool_name`](crate::valid_tool_name)).
    fn claim(
        &self,
        key: &IdemKey,
        tool: &str,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// Records `result` (JSON text), kept for `ttl`.
    fn complete(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        result: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Gives the key up without a result, so the next claim runs again.
    fn release(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Records a permanent failure, kept for `ttl` and replayed.
    fn fail(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        error: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Extends the holder's lease to `lease` from now.
    fn renew(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        lease: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What the store holds under `key` (`None` if nothing, or released).
    fn get(&self, key: &IdemKey) -> impl Future<Output = Result<Option<Entry>, StoreError>> + Send;

    /// The kind of store, for traces and metrics: OpenTelemetry's
    /// `db.system.name` where it has one (`"redis"`, `"postgresql"`,
    /// `"sqlite"`), else a short name of the store's own (`"memory"`);
    /// `"custom"` by default.
    fn backend(&self) -> &'static str {
        "custom"
    }

    /// Deletes the expired records now and returns how many. Expired
    /// records are never answered, so this only frees space; stores whose
    /// records expire by themselves (Redis) have nothing to do and return 0,
    /// as does this default.
    fn purge_expired(&self) -> impl Future<Output = Result<u64, StoreError>> + Send {
        async { Ok(0) }
    }

    /// How many records [`purge_expired`](Self::purge_expired) would delete
    /// now (0 by default, and for stores whose records expire by
    /// themselves).
    fn count_expired(&self) -> impl Future<Output = Result<u64, StoreError>> + Send {
        async { Ok(0) }
    }

    /// The record under `key` as an operator sees it, released and lapsed
    /// ones included; `None` if there is none or it has expired. Changes
    /// nothing. [`StoreError::Unsupported`] by default.
    fn inspect(
        &self,
        key: &IdemKey,
    ) -> impl Future<Output = Result<Option<RecordInfo>, StoreError>> + Send {
        let _ = key;
        async { Err(unsupported(self.backend(), "inspect")) }
    }

    /// One page of the live records `filter` admits, starting at `cursor`
    /// (`""` for the first page, then each page's
    /// [`next`](ScanPage::next)), looking at about `limit` records. A
    /// record present for the whole scan is answered at least once (twice
    /// at most when a Redis Cluster reshards under it); records written
    /// during the scan may or may not be. Changes nothing.
    /// [`StoreError::Unsupported`] by default.
    fn scan(
        &self,
        filter: &ScanFilter,
        cursor: &str,
        limit: usize,
    ) -> impl Future<Output = Result<ScanPage, StoreError>> + Send {
        let _ = (filter, cursor, limit);
        async { Err(unsupported(self.backend(), "scan")) }
    }
}

/// The error of an operation a store does not offer.
fn unsupported(backend: &'static str, op: &'static str) -> StoreError {
    StoreError::Unsupported {
        backend,
        op,
        why: "the store does not implement it",
    }
}
