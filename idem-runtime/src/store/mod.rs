//! The store contract and its backends.
//!
//! A store keeps one record per [`IdemKey`](crate::IdemKey). A record is, in turn:
//!
//! - **running**: claimed by a worker holding a [`LeaseToken`] until its lease
//!   lapses (renewable);
//! - **released**: given up after a transient failure; claimable at once;
//! - **done** / **failed**: a recorded result or permanent error, replayed to
//!   every duplicate until the result TTL expires;
//! - **unknown**: nobody knows whether the operation took effect, and its
//!   tool may not run it again on its own (its policy for an uncertain
//!   outcome); answered to every claim until an operator resolves it,
//!   however long that takes;
//! - **awaiting**: a person's approval is asked for the operation, and
//!   nothing ran; answered to every claim until a person decides;
//! - **approved**: approved for the arguments of its fingerprint; the next
//!   claim of those very arguments takes it ([`Claim::Approved`]), once.
//!
//! Every operation is one atomic step in the store, and every time is judged
//! by the store's own clock.
//!
//! # Semantics every backend implements
//!
//! | operation | absent or expired | running, lease live | running, lease lapsed | released | done / failed | unknown | awaiting | approved |
//! |---|---|---|---|---|---|---|---|---|
//! | `claim` | `Acquired`, attempt 0 | `Existing(Running)` | `TakenOver`, attempt + 1 | `Acquired`, attempt + 1 | `Existing(Done / Failed)` | `Existing(Unknown)` | `Existing(Awaiting)` | the fingerprint approved: `Approved`, the same attempt, the approval's about kept; another: `Existing(Approved)` |
//! | `settle` (any [`Outcome`]), `renew` with the holder's token | `LeaseLost` | applied | applied (nobody claimed since) | `LeaseLost` | `LeaseLost` | `settle` to done, failed or released with the token that made it unknown: applied (resolved); else `LeaseLost` | `settle` to approved, failed or released with the token that asked: applied (decided); else `LeaseLost` | `settle` to awaiting with the token that asked: applied (revoked); else `LeaseLost` |
//!
//! [`Outcome::settles`] is that table's `settle` row.
//!
//! Either with a token that is not the current holder's is
//! refused with [`StoreError::LeaseLost`](crate::StoreError::LeaseLost) and changes nothing. A running
//! record is kept for its claim's retention after its lease ends
//! ([`ClaimRequest::retention`]: [`CLAIM_RETENTION`] unless asked longer),
//! and a released one for [`CLAIM_RETENTION`], so that the next claim can
//! count the attempt; a done or failed record for its TTL; an unknown
//! record until it is resolved ([`UNKNOWN_RETENTION`]).
//!
//! # Operations sent twice
//!
//! A connection can drop after the store applied an operation and before
//! its reply arrived. So that the operation can be sent again:
//!
//! - a settled record keeps the token that settled it, and a `settle`
//!   repeated with the same token and the same outcome on the record it
//!   settled succeeds and changes nothing;
//! - a backend that resends a `claim` itself uses the same token both
//!   times, and a claim that finds a running record holding its own token
//!   is `Acquired` with that record's attempt.
//!
//! Backends resend an operation once when its connection dropped
//! (`RedisStore`, `PostgresStore`), and the registry retries settling
//! operations that fail with a retryable error.
//!
//! # For operators
//!
//! A claim names its tool, and every record keeps it and when it entered
//! its state. [`IdemStore::inspect`] reads one record as a [`RecordInfo`]
//! (released and lapsed ones too), [`IdemStore::scan`] pages through the
//! records of a namespace ([`ScanFilter`], [`ScanPage`]), and
//! [`IdemStore::count_expired`] counts what a purge would delete; none of
//! them changes anything. An operator ends a stuck claim with
//! [`IdemStore::settle`] ([`Outcome::Released`]) and the holder's token `inspect` shows, which
//! fences the worker still holding it, and resolves an unknown record the
//! same way, with the token that made it unknown: of two operators
//! resolving one record at once, one wins and the other is told
//! `LeaseLost`. The `idem` command-line tool is built on these.

#[cfg(any(feature = "postgres", feature = "redis"))]
mod answers;
pub(crate) mod bound;
pub(crate) mod contract;
mod hashing;
mod inspect;
#[cfg(any(feature = "postgres", feature = "redis"))]
mod keepalive;
pub(crate) mod memory;
mod news;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod record;
#[cfg(feature = "redis")]
pub(crate) mod redis;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;
mod token;

pub(crate) use self::contract::IdemStore;
pub use self::contract::{
    BoxFuture, CLAIM_RETENTION, Claim, ClaimRequest, Entry, Outcome, UNKNOWN_RETENTION,
};
pub use self::inspect::{
    About, ApprovalAsked, ApprovalRequest, Approved, RecordInfo, RecordState, Refusal, Revoked,
    ScanFilter, ScanPage, UnknownNote, UnknownState,
};
pub use self::token::LeaseToken;
