//! The store contract and its backends.
//!
//! A store keeps one record per [`IdemKey`]. A record is, in turn:
//!
//! - **running**: claimed by a worker holding a [`LeaseToken`] until its lease
//!   lapses (renewable);
//! - **released**: given up after a transient failure; claimable at once;
//! - **done** / **failed**: a recorded result or permanent error, replayed to
//!   every duplicate until the result TTL expires.
//!
//! Every operation is one atomic step in the store, and every time is judged
//! by the store's own clock.
//!
//! # Semantics every backend implements
//!
//! | operation | absent or expired | running, lease live | running, lease lapsed | released | done / failed |
//! |---|---|---|---|---|---|
//! | `claim` | `Acquired`, attempt 0 | `Existing(Running)` | `Acquired`, attempt + 1 | `Acquired`, attempt + 1 | `Existing(Done / Failed)` |
//! | `complete`, `fail`, `renew`, `release` with the holder's token | `LeaseLost` | applied | applied (nobody claimed since) | `LeaseLost` | `LeaseLost` |
//!
//! Those four with a token that is not the current holder's is
//! refused with [`StoreError::LeaseLost`] and changes nothing. A running or
//! released record is kept for [`CLAIM_RETENTION`] after its lease ends so
//! that the next claim can count the attempt; a done or failed record for
//! its TTL.
//!
//! # Operations sent twice
//!
//! A connection can drop after the store applied an operation and before
//! its reply arrived. So that the operation can be sent again:
//!
//! - a settled record keeps the token that settled it, and `complete`,
//!   `fail` or `release` repeated with the same token and the same payload
//!   on the record it settled succeeds and changes nothing;
//! - a backend that resends a `claim` itself uses the same token both
//!   times, and a claim that finds a running record holding its own token
//!   is `Acquired` with that record's attempt.
//!
//! Backends resend an operation once when its connection dropped
//! (`RedisStore`, `PostgresStore`), and the registry retries settling
//! operations that fail with a retryable error.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};

pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "sqlite")]
pub mod sqlite;

/// How long a running (lapsed) or released record outlives its lease, so
/// that the next claim of the same operation can count the earlier attempt
/// and a worker whose lease lapsed can still record if nobody claimed since.
pub const CLAIM_RETENTION: Duration = Duration::from_secs(3600);

/// The outcome of a compare-and-set on the holder's token that changed
/// `changed` records: one, or the lease is lost.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn fenced(changed: u64) -> Result<(), StoreError> {
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost)
    }
}

/// The fencing token of one claim, and which attempt of the operation it is.
///
/// Tokens are 128-bit values unique across processes (a random per-process
/// seed plus a counter). Every state change after the claim is
/// compare-and-set on the token.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken {
    id: u128,
    attempt: u32,
}

impl LeaseToken {
    /// A fresh, unique token for attempt number `attempt` (0 for the first).
    pub fn generate(attempt: u32) -> LeaseToken {
        static SEED: OnceLock<u128> = OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let seed = *SEED.get_or_init(|| {
            let mut bytes = [0u8; 16];
            if getrandom::fill(&mut bytes).is_err() {
                // No OS randomness: fall back to time, pid and an address.
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                let local = 0u8;
                let addr = &local as *const u8 as usize as u128;
                return nanos ^ (u128::from(std::process::id()) << 96) ^ (addr << 32);
            }
            u128::from_le_bytes(bytes)
        });
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        LeaseToken {
            id: seed.wrapping_add(u128::from(n)),
            attempt,
        }
    }

    /// Rebuilds a token from its stored parts.
    pub fn from_parts(id: u128, attempt: u32) -> LeaseToken {
        LeaseToken { id, attempt }
    }

    /// The token's unique id.
    pub fn id(&self) -> u128 {
        self.id
    }

    /// The id as 32 lowercase hex digits, as backends store it.
    pub fn id_hex(&self) -> String {
        format!("{:032x}", self.id)
    }

    /// Parses [`id_hex`](Self::id_hex)'s form.
    pub fn parse_id_hex(hex: &str) -> Option<u128> {
        if hex.len() != 32 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        u128::from_str_radix(hex, 16).ok()
    }

    /// How many earlier claims of this operation ended without a recorded
    /// result (released after a transient failure, or lapsed).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

impl std::fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LeaseToken({:032x}, attempt {})", self.id, self.attempt)
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
        /// The result as JSON text.
        result: String,
        /// The fingerprint of the arguments that produced it.
        fingerprint: Fingerprint,
    },
    /// A recorded permanent failure.
    Failed {
        /// The error's text.
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
/// See the [module documentation](self) for the semantics each operation
/// must have. Implementations must make every operation one atomic step in
/// the store and judge expiry by the store's clock.
///
/// The registry holds stores as `Arc<dyn DynIdemStore>`; every `IdemStore`
/// is a [`DynIdemStore`] through a blanket implementation.
pub trait IdemStore: Send + Sync + 'static {
    /// Claims `key` for a lease of `lease`, or reports what holds it.
    fn claim(
        &self,
        key: &IdemKey,
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

    /// Deletes the expired records now and returns how many. Expired
    /// records are never answered, so this only frees space; stores whose
    /// records expire by themselves (Redis) have nothing to do and return 0,
    /// as does this default.
    fn purge_expired(&self) -> impl Future<Output = Result<u64, StoreError>> + Send {
        async { Ok(0) }
    }
}

/// A boxed, `Send` future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The object-safe twin of [`IdemStore`], implemented for every
/// `IdemStore`; what `Arc<dyn DynIdemStore>` erases to.
#[allow(missing_docs)]
pub trait DynIdemStore: Send + Sync + 'static {
    fn dyn_claim<'a>(
        &'a self,
        key: &'a IdemKey,
        fingerprint: &'a Fingerprint,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Claim, StoreError>>;
    fn dyn_complete<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        result: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn dyn_release<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn dyn_fail<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        error: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn dyn_renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    fn dyn_get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>>;
    fn dyn_purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>>;
}

impl<T: IdemStore> DynIdemStore for T {
    fn dyn_claim<'a>(
        &'a self,
        key: &'a IdemKey,
        fingerprint: &'a Fingerprint,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(self.claim(key, fingerprint, lease))
    }
    fn dyn_complete<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        result: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.complete(key, token, result, ttl))
    }
    fn dyn_release<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.release(key, token))
    }
    fn dyn_fail<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        error: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.fail(key, token, error, ttl))
    }
    fn dyn_renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.renew(key, token, lease))
    }
    fn dyn_get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        Box::pin(self.get(key))
    }
    fn dyn_purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.purge_expired())
    }
}

/// A shared store is a store: keep an `Arc` to inspect what the registry
/// wrote.
impl<T: IdemStore> IdemStore for Arc<T> {
    fn claim(
        &self,
        key: &IdemKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        (**self).claim(key, fingerprint, lease)
    }
    fn complete(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        result: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).complete(key, token, result, ttl)
    }
    fn release(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).release(key, token)
    }
    fn fail(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        error: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).fail(key, token, error, ttl)
    }
    fn renew(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        lease: Duration,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).renew(key, token, lease)
    }
    fn get(&self, key: &IdemKey) -> impl Future<Output = Result<Option<Entry>, StoreError>> + Send {
        (**self).get(key)
    }
    fn purge_expired(&self) -> impl Future<Output = Result<u64, StoreError>> + Send {
        (**self).purge_expired()
    }
}

/// An erased store is a store, so generic code (the conformance suite, say)
/// runs against `Arc<dyn DynIdemStore>` too.
impl IdemStore for Arc<dyn DynIdemStore> {
    async fn claim(
        &self,
        key: &IdemKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        (**self).dyn_claim(key, fingerprint, lease).await
    }
    async fn complete(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        result: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        (**self).dyn_complete(key, token, result, ttl).await
    }
    async fn release(&self, key: &IdemKey, token: &LeaseToken) -> Result<(), StoreError> {
        (**self).dyn_release(key, token).await
    }
    async fn fail(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        error: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        (**self).dyn_fail(key, token, error, ttl).await
    }
    async fn renew(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        (**self).dyn_renew(key, token, lease).await
    }
    async fn get(&self, key: &IdemKey) -> Result<Option<Entry>, StoreError> {
        (**self).dyn_get(key).await
    }
    async fn purge_expired(&self) -> Result<u64, StoreError> {
        (**self).dyn_purge_expired().await
    }
}
