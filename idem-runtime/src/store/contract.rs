//! The store contract: what a store holds under a key ([`Entry`]), what a
//! claim answers ([`Claim`]), how a claim ends ([`Outcome`]) and the one
//! object-safe trait every backend, wrapper and erased store implements
//! ([`IdemStore`]), with the semantics the module documentation of `store`
//! sets out.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::inspect::{RecordInfo, RecordState, ScanFilter, ScanPage};
use super::token::LeaseToken;
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};

/// How long a released record is kept, and a running (lapsed) one outlives
/// its lease unless its claim asks longer ([`ClaimRequest::retention`]), so
/// that the next claim of the same operation can count the earlier attempt
/// (and is told it was taken over) and a worker whose lease lapsed can
/// still record if nobody claimed since.
pub const CLAIM_RETENTION: Duration = Duration::from_secs(3600);

/// How long an unknown record is kept: until an operator resolves it. A
/// tool that may not run an uncertain operation again never does so
/// because the record of it aged out; every store writes this as the
/// record's expiry (a century), so that no backend needs a record without
/// one.
pub const UNKNOWN_RETENTION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

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
    /// An outcome nobody knows, kept until an operator resolves it.
    Unknown {
        /// Why it is unknown: the registry writes an
        /// [`UnknownNote`](super::UnknownNote) (sealed, when it encrypts
        /// results).
        reason: String,
        /// The fingerprint of the arguments of the operation.
        fingerprint: Fingerprint,
        /// The attempt whose outcome is unknown.
        attempt: u32,
        /// How long ago it became unknown, by the store's clock.
        age: Duration,
    },
    /// A person's approval was asked for the operation, and nothing ran:
    /// kept until it is given or refused, or its TTL passes.
    Awaiting {
        /// What was asked (the registry writes an approval request; sealed
        /// when it encrypts results).
        request: String,
        /// The fingerprint of the arguments of the operation.
        fingerprint: Fingerprint,
        /// How long ago it was asked, by the store's clock.
        age: Duration,
    },
    /// Approved for the arguments of `fingerprint`, not yet run: the next
    /// claim with the same fingerprint takes it ([`Claim::Approved`]); a
    /// claim with another finds it here.
    Approved {
        /// The fingerprint of the arguments that were approved.
        fingerprint: Fingerprint,
    },
}

impl Entry {
    /// The fingerprint of the arguments this entry belongs to.
    pub fn fingerprint(&self) -> &Fingerprint {
        match self {
            Entry::Running { fingerprint, .. }
            | Entry::Done { fingerprint, .. }
            | Entry::Failed { fingerprint, .. }
            | Entry::Unknown { fingerprint, .. }
            | Entry::Awaiting { fingerprint, .. }
            | Entry::Approved { fingerprint } => fingerprint,
        }
    }
}

/// What [`IdemStore::claim`] asks for: the tool whose call it is, the
/// fingerprint of its arguments, the lease, how long the claim is
/// remembered if it lapses, and what the record tells an operator of the
/// operation.
///
/// ```
/// use std::time::Duration;
/// use idem_runtime::Fingerprint;
/// use idem_runtime::store::{CLAIM_RETENTION, ClaimRequest};
///
/// let fingerprint = Fingerprint::from_bytes(&[7; 32]).unwrap();
/// let day = Duration::from_secs(24 * 3600);
/// let request = ClaimRequest::new("charge_card", &fingerprint, Duration::from_secs(30))
///     .retention(day)
///     .about(r#"{"arguments":{"amount":5}}"#);
/// assert_eq!(request.about, Some(r#"{"arguments":{"amount":5}}"#));
/// assert_eq!(request.retention, day);
/// assert_eq!(
///     ClaimRequest::new("charge_card", &fingerprint, day).retention,
///     CLAIM_RETENTION
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimRequest<'a> {
    /// The tool whose call it is, kept for operators
    /// ([`IdemStore::inspect`]); never contains `|`
    /// ([`valid_tool_name`](crate::valid_tool_name)).
    pub tool: &'a str,
    /// The fingerprint of the arguments the holder runs with.
    pub fingerprint: &'a Fingerprint,
    /// How long the claim holds without a renewal.
    pub lease: Duration,
    /// How long the record of the claim outlives its lease if it lapses
    /// (its worker crashed, hung, or lost the store): within it, the next
    /// claim is [`Claim::TakenOver`] and the tool's policy for an
    /// uncertain outcome applies; after it, the record is gone and the next
    /// claim is a first one. [`CLAIM_RETENTION`] unless asked; the registry
    /// asks the tool's result TTL (never less) for a tool that may not run
    /// an uncertain operation again (`refuse`, `verify`), so a lapsed claim
    /// is remembered as long as its result would have been. A renewal
    /// keeps it. A Redis store writing a record format before 4
    /// (`RedisOptions::record_format`, during a rolling upgrade) cannot
    /// keep it and uses [`CLAIM_RETENTION`].
    pub retention: Duration,
    /// What the operation is, for the person who looks at its record: the
    /// registry writes an [`About`](super::About) (sealed when it encrypts
    /// results); a store keeps any text, for the record's whole life, and
    /// answers it in [`RecordInfo::about`]. `None`: the record says
    /// nothing.
    pub about: Option<&'a str>,
}

impl<'a> ClaimRequest<'a> {
    /// A claim of `tool`'s call with `fingerprint` for `lease`, remembered
    /// for [`CLAIM_RETENTION`] if it lapses, about which the record says
    /// nothing.
    pub const fn new(tool: &'a str, fingerprint: &'a Fingerprint, lease: Duration) -> Self {
        ClaimRequest {
            tool,
            fingerprint,
            lease,
            retention: CLAIM_RETENTION,
            about: None,
        }
    }

    /// The record of the claim, if it lapses, is kept `retention` after
    /// its lease ([`ClaimRequest::retention`](Self#structfield.retention)).
    pub const fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// The record says `about` of the operation.
    pub const fn about(mut self, about: &'a str) -> Self {
        self.about = Some(about);
        self
    }
}

/// The answer to [`IdemStore::claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller now holds the key; run the operation.
    Acquired(LeaseToken),
    /// The caller now holds the key, taken over from an earlier claim
    /// whose lease lapsed before it settled: that attempt may or may not
    /// have taken effect. The tool's policy for an uncertain outcome
    /// decides what the new holder does (run again, verify, or settle the
    /// record as [`Outcome::Unknown`]).
    TakenOver(LeaseToken),
    /// The caller now holds the key, and used up the approval it held
    /// ([`Outcome::Approved`]) for these very arguments: the one run that
    /// approval allows. The running record keeps the about the approval
    /// wrote (who approved, and when), whatever the claim's said.
    Approved(LeaseToken),
    /// Someone else holds it or it has a recorded outcome.
    Existing(Entry),
}

/// A boxed, `Send` future: what every [`IdemStore`] operation answers, so
/// that the trait is object-safe and the registry holds any store as an
/// `Arc<dyn IdemStore>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// `Box::pin($fut)`, with the future written straight into its
/// allocation: `Box::pin` builds it on the stack and copies all of it into
/// the box, and a future is the size of its largest state (kilobytes for a
/// call's) though it starts in its smallest. A macro, because a function
/// taking the future by value copies it on the way in. For the futures on
/// every call's path.
macro_rules! boxed {
    ($fut:expr $(,)?) => {{
        let fut = ::std::boxed::Box::write(::std::boxed::Box::new_uninit(), $fut);
        ::std::boxed::Box::into_pin(fut)
    }};
}
pub(crate) use boxed;

/// How [`IdemStore::settle`] ends a claim: with a result, with a permanent
/// failure, by giving the key up so that the next claim runs again, or
/// with an outcome nobody knows.
///
/// The same call resolves an unknown record: settled with the token that
/// made it unknown ([`RecordInfo::holder`]), it becomes done, failed or
/// released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// A result (JSON text, sealed when the registry encrypts results),
    /// kept for `ttl` and replayed to every duplicate.
    Done {
        /// The result.
        result: &'a str,
        /// How long the store keeps it.
        ttl: Duration,
    },
    /// A permanent failure (its text, sealed when the registry encrypts
    /// results), kept for `ttl` and replayed.
    Failed {
        /// The error's text.
        error: &'a str,
        /// How long the store keeps it.
        ttl: Duration,
    },
    /// No result: the key is claimable at once, and the record is kept for
    /// [`CLAIM_RETENTION`] so that the next claim counts the attempt.
    Released,
    /// Nobody knows whether the operation took effect, and it may not run
    /// again on its own: kept until it is resolved
    /// ([`UNKNOWN_RETENTION`]), every claim answers [`Entry::Unknown`].
    Unknown {
        /// Why: the registry writes an [`UnknownNote`](super::UnknownNote)
        /// (sealed, when it encrypts results); a store keeps any text.
        reason: &'a str,
    },
    /// Nothing ran: a person's approval is asked for the operation. Kept
    /// for `ttl` (or until it is approved or refused), every claim answers
    /// [`Entry::Awaiting`]; settled with the same token into
    /// [`Approved`](Self::Approved), [`Failed`](Self::Failed) (refused)
    /// or [`Released`](Self::Released).
    Awaiting {
        /// What is asked; a store keeps any text.
        request: &'a str,
        /// How long the request waits.
        ttl: Duration,
    },
    /// A person approved the awaiting operation: settled with the token
    /// that made it awaiting, the record's about is replaced by `about`
    /// (which says who approved, and when) and it is kept for `window`;
    /// the next claim with the operation's fingerprint takes it
    /// ([`Claim::Approved`]), once.
    Approved {
        /// The record's new about.
        about: &'a str,
        /// How long the approval may wait to be used.
        window: Duration,
    },
}

impl<'a> Outcome<'a> {
    /// The state the record is left in.
    pub fn state(&self) -> RecordState {
        match self {
            Outcome::Done { .. } => RecordState::Done,
            Outcome::Failed { .. } => RecordState::Failed,
            Outcome::Released => RecordState::Released,
            Outcome::Unknown { .. } => RecordState::Unknown,
            Outcome::Awaiting { .. } => RecordState::Awaiting,
            Outcome::Approved { .. } => RecordState::Approved,
        }
    }

    /// The result, error, reason or request text it records; `None` when
    /// released or approved.
    pub fn payload(&self) -> Option<&'a str> {
        match *self {
            Outcome::Done { result, .. } => Some(result),
            Outcome::Failed { error, .. } => Some(error),
            Outcome::Unknown { reason, .. } => Some(reason),
            Outcome::Awaiting { request, .. } => Some(request),
            Outcome::Released | Outcome::Approved { .. } => None,
        }
    }

    /// The about it writes over the record's: only an approval has one.
    pub fn about(&self) -> Option<&'a str> {
        match *self {
            Outcome::Approved { about, .. } => Some(about),
            _ => None,
        }
    }

    /// How long the store keeps the record it leaves: the TTL,
    /// [`CLAIM_RETENTION`] when released, [`UNKNOWN_RETENTION`] (until it
    /// is resolved) when unknown, the approval's window when approved.
    pub fn kept_for(&self) -> Duration {
        match *self {
            Outcome::Done { ttl, .. }
            | Outcome::Failed { ttl, .. }
            | Outcome::Awaiting { ttl, .. } => ttl,
            Outcome::Released => CLAIM_RETENTION,
            Outcome::Unknown { .. } => UNKNOWN_RETENTION,
            Outcome::Approved { window, .. } => window,
        }
    }

    /// Whether this outcome may settle a record in `state` held with the
    /// settling token: any outcome a running record; an unknown record
    /// (an operator's resolution) into done, failed or released; an
    /// awaiting one (a person's decision) into approved, failed (refused)
    /// or released; an approved one, not yet used, into awaiting again (a
    /// revocation). Every backend decides by this table.
    pub fn settles(&self, state: RecordState) -> bool {
        use RecordState as S;
        match (state, self.state()) {
            (S::Running, _) => true,
            (S::Unknown, to) => matches!(to, S::Done | S::Failed | S::Released),
            (S::Awaiting, to) => matches!(to, S::Approved | S::Failed | S::Released),
            (S::Approved, to) => to == S::Awaiting,
            _ => false,
        }
    }
}

/// A store of idempotency records.
///
/// See the [module documentation](crate::store) for the semantics each operation
/// must have. Implementations must make every operation one atomic step in
/// the store and judge expiry by the store's clock.
///
/// The trait is object-safe: the registry holds a store as
/// `Arc<dyn IdemStore>`, and an `Arc` of a store is a store. An
/// implementation returns each operation's future boxed:
///
/// ```
/// use std::time::Duration;
/// use idem_runtime::store::{BoxFuture, Claim, ClaimRequest, Entry, LeaseToken, Outcome};
/// use idem_runtime::{IdemKey, IdemStore, MemoryStore, StoreError};
///
/// /// A store that counts the claims it forwards.
/// #[derive(Default)]
/// struct Counting {
///     inner: MemoryStore,
///     claims: std::sync::atomic::AtomicU64,
/// }
///
/// impl IdemStore for Counting {
///     fn claim<'a>(
///         &'a self,
///         key: &'a IdemKey,
///         request: ClaimRequest<'a>,
///     ) -> BoxFuture<'a, Result<Claim, StoreError>> {
///         self.claims.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
///         self.inner.claim(key, request)
///     }
///
///     fn settle<'a>(
///         &'a self,
///         key: &'a IdemKey,
///         token: &'a LeaseToken,
///         outcome: Outcome<'a>,
///     ) -> BoxFuture<'a, Result<(), StoreError>> {
///         self.inner.settle(key, token, outcome)
///     }
///
///     fn renew<'a>(
///         &'a self,
///         key: &'a IdemKey,
///         token: &'a LeaseToken,
///         lease: Duration,
///     ) -> BoxFuture<'a, Result<(), StoreError>> {
///         self.inner.renew(key, token, lease)
///     }
///
///     fn get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
///         Box::pin(async move {
///             // An operation of its own is an async block.
///             self.inner.get(key).await
///         })
///     }
/// }
/// ```
pub trait IdemStore: Send + Sync + 'static {
    /// Claims `key` for the request's lease, or reports what holds it. The
    /// record keeps the request's tool and `about` for operators
    /// ([`inspect`](Self::inspect)).
    fn claim<'a>(
        &'a self,
        key: &'a IdemKey,
        request: ClaimRequest<'a>,
    ) -> BoxFuture<'a, Result<Claim, StoreError>>;

    /// Ends the holder's claim with `outcome`: records a result or a
    /// permanent failure, kept for its TTL, an unknown outcome, kept until
    /// it is resolved, or
    /// releases the key so that the next claim runs again. An unknown
    /// record is settled (resolved) the same way with the token that made
    /// it unknown, into any other outcome.
    fn settle<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        outcome: Outcome<'a>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Extends the holder's lease to `lease` from now.
    fn renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// What the store holds under `key` (`None` if nothing, or released).
    fn get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>>;

    /// Tells the calls waiting on `key` ([`watch`](Self::watch)), in this
    /// process and, where the store carries it, in others, that its record
    /// changed. Whoever decides an operation (approves, refuses, revokes or
    /// resolves it, releases its claim) announces it once the decision is
    /// written: the registry's decisions and the `idem` command do. A hint
    /// that saves waiting calls time; never needed for correctness, since
    /// they also look at the record now and then. Nothing by default.
    fn announce<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = key;
        Box::pin(async { Ok(()) })
    }

    /// Returns once `key` is [announced](Self::announce) or after
    /// `within`, whichever comes first, and may return sooner: the caller
    /// reads the record again either way. Sleeps `within` by default.
    fn watch<'a>(&'a self, key: &'a IdemKey, within: Duration) -> BoxFuture<'a, ()> {
        let _ = key;
        Box::pin(tokio::time::sleep(within))
    }

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
    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async { Ok(0) })
    }

    /// How many records [`purge_expired`](Self::purge_expired) would delete
    /// now (0 by default, and for stores whose records expire by
    /// themselves).
    fn count_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async { Ok(0) })
    }

    /// The record under `key` as an operator sees it, released and lapsed
    /// ones included; `None` if there is none or it has expired. Changes
    /// nothing. [`StoreError::Unsupported`] by default.
    fn inspect<'a>(
        &'a self,
        key: &'a IdemKey,
    ) -> BoxFuture<'a, Result<Option<RecordInfo>, StoreError>> {
        let _ = key;
        let backend = self.backend();
        Box::pin(async move { Err(unsupported(backend, "inspect")) })
    }

    /// One page of the live records `filter` admits, starting at `cursor`
    /// (`""` for the first page, then each page's
    /// [`next`](ScanPage::next)), looking at about `limit` records. A
    /// record present for the whole scan is answered at least once (twice
    /// at most when a Redis Cluster reshards under it); records written
    /// during the scan may or may not be. Changes nothing.
    /// [`StoreError::Unsupported`] by default.
    fn scan<'a>(
        &'a self,
        filter: &'a ScanFilter,
        cursor: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<ScanPage, StoreError>> {
        let _ = (filter, cursor, limit);
        let backend = self.backend();
        Box::pin(async move { Err(unsupported(backend, "scan")) })
    }
}

/// A shared store (`Arc<MemoryStore>`, to inspect what the registry
/// wrote) and an erased one (`Arc<dyn IdemStore>`) are stores: every
/// operation goes through the pointer.
impl<T: IdemStore + ?Sized> IdemStore for Arc<T> {
    fn claim<'a>(
        &'a self,
        key: &'a IdemKey,
        request: ClaimRequest<'a>,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        (**self).claim(key, request)
    }

    fn settle<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        outcome: Outcome<'a>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        (**self).settle(key, token, outcome)
    }

    fn renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        (**self).renew(key, token, lease)
    }

    fn get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        (**self).get(key)
    }

    fn announce<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<(), StoreError>> {
        (**self).announce(key)
    }

    fn watch<'a>(&'a self, key: &'a IdemKey, within: Duration) -> BoxFuture<'a, ()> {
        (**self).watch(key, within)
    }

    fn backend(&self) -> &'static str {
        (**self).backend()
    }

    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        (**self).purge_expired()
    }

    fn count_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        (**self).count_expired()
    }

    fn inspect<'a>(
        &'a self,
        key: &'a IdemKey,
    ) -> BoxFuture<'a, Result<Option<RecordInfo>, StoreError>> {
        (**self).inspect(key)
    }

    fn scan<'a>(
        &'a self,
        filter: &'a ScanFilter,
        cursor: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<ScanPage, StoreError>> {
        (**self).scan(filter, cursor, limit)
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
