//! [`MemoryStore`]: the in-process default. Its records are in
//! `record.rs`; here, how they are kept (sharded maps of slots) and the
//! store's operations.

mod record;

use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::time::Instant;

use self::record::{Record, State, keep, ms, secs};
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};
use crate::store::hashing::PassThroughMap;
use crate::store::news::News;
use crate::store::{
    BoxFuture, CLAIM_RETENTION, Claim, ClaimRequest, Entry, IdemStore, LeaseToken, Outcome,
    RecordInfo, ScanFilter, ScanPage,
};

/// An in-process store: sharded hash maps behind short mutex sections.
///
/// Leases and TTLs run on the monotonic clock (`tokio::time::Instant`, so
/// tests with a paused Tokio clock control it). Expired records are swept
/// from a shard as it grows, in amortised constant time per operation, and on
/// [`purge_expired`](IdemStore::purge_expired); memory stays proportional to the
/// records alive, not to every key ever seen. A record takes 125–200 bytes
/// besides its result, depending on the hash tables' load (BENCHMARKS.md):
/// keys are kept as half their digest, times as milliseconds, and the
/// fingerprint only when it is not the key's own digest. Since the keys are
/// not kept, [`inspect`](IdemStore::inspect) reads a record by its key but
/// [`scan`](IdemStore::scan) is [`StoreError::Unsupported`].
///
/// It guarantees once-only execution within one process. Records are lost
/// when the process exits: a crashed agent that resumes in a new process
/// runs its writes again. Use a durable backend for that.
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    /// The zero of the stored times.
    epoch: Instant,
    /// Seeds the namespace hash in [`Slot::of`].
    seed: u64,
    /// Tells the calls of this process waiting on a record
    /// ([`IdemStore::watch`]) of its announced changes.
    news: News,
}

/// A stored key, in 16 bytes: the first half of the digest a key of this
/// crate's form ends with, its first eight bytes mixed with a keyed hash of
/// the namespace; the first half of the SHA-256 of any other key string.
/// Uniformly distributed either way, so its first bytes are its hash. Two
/// live keys share a slot with odds of about n² / 2¹²⁹ (one in 10²¹ for
/// a billion records).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Slot([u8; 16]);

impl Slot {
    /// The key's slot, and the digest it ends with if it has this crate's
    /// form.
    fn of(key: &IdemKey, seed: u64) -> (Slot, Option<[u8; 32]>) {
        let mut slot = [0u8; 16];
        match key.split_digest() {
            Some((namespace, digest)) => {
                slot.copy_from_slice(&digest[..16]);
                // FNV-1a from a per-store random basis: namespaces are few
                // and chosen by the application, not by its callers.
                let mix = namespace
                    .bytes()
                    .fold(seed, |h, b| {
                        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                    })
                    .to_le_bytes();
                for (d, m) in slot.iter_mut().zip(mix) {
                    *d ^= m;
                }
                (Slot(slot), Some(digest))
            }
            None => {
                slot.copy_from_slice(&Sha256::digest(key.as_str().as_bytes())[..16]);
                (Slot(slot), None)
            }
        }
    }

    fn shard(&self) -> usize {
        usize::from(self.0[15]) & (SHARDS - 1)
    }
}

impl Hash for Slot {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(first));
    }
}

#[derive(Default)]
struct Shard {
    records: PassThroughMap<Slot, Record>,
    /// The names of the tools whose records the shard holds; a record keeps
    /// its tool's index. Tools are few, so a lookup is a short walk.
    tools: Vec<Box<str>>,
    /// Mutations since the last sweep.
    writes: usize,
}

/// Shards are a power of two; enough that 2 × cores tasks rarely meet.
const SHARDS: usize = 64;
/// A shard is swept when it has seen this many writes, or half its size.
const MIN_SWEEP_INTERVAL: usize = 256;

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            epoch: Instant::now(),
            seed: RandomState::new().hash_one(0xcbf2_9ce4_8422_2325_u64),
            news: News::new(),
        }
    }

    /// Now, in the store's milliseconds.
    fn now(&self) -> u64 {
        ms(Instant::now().saturating_duration_since(self.epoch))
    }

    fn shard(&self, slot: &Slot) -> MutexGuard<'_, Shard> {
        // A poisoned shard only means a panic elsewhere while holding it; each
        // critical section leaves its record whole, so carry on.
        self.shards[slot.shard()]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many records are held, expired ones not yet swept included.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).records.len())
            .sum()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Test hook: plants a recorded result whose text is `result`, verbatim,
    /// under `key` — a corrupt record, or one written by an older version of
    /// a tool.
    #[cfg(feature = "test-util")]
    pub fn plant_done(
        &self,
        key: &IdemKey,
        fingerprint: &Fingerprint,
        result: &str,
        ttl: Duration,
    ) {
        let now = self.now();
        let (slot, digest) = Slot::of(key, self.seed);
        let mut shard = self.shard(&slot);
        let tool = shard.tool("planted");
        shard.insert(
            slot,
            Record {
                fingerprint: keep(fingerprint, digest),
                expires_at: now.saturating_add(ms(ttl)),
                since: secs(now),
                tool,
                state: State::Done {
                    token: [0; 16],
                    attempt: 0,
                    result: result.into(),
                },
                about: None,
            },
            now,
        );
    }

    /// Applies `f` to the live record under `key`, if it is running with
    /// `token` (or, for a resolution, unknown by `token`). If settling with
    /// `outcome` by `token` already made it what it is (a repeat whose
    /// reply was lost), succeeds without a change; otherwise `LeaseLost`.
    fn with_holder(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        outcome: Option<Outcome<'_>>,
        f: impl FnOnce(&mut Record, u64),
    ) -> Result<(), StoreError> {
        let now = self.now();
        let (slot, _) = Slot::of(key, self.seed);
        let mut shard = self.shard(&slot);
        let Some(record) = shard.live_mut(&slot, now) else {
            return Err(StoreError::LeaseLost);
        };
        let id = token.id().to_le_bytes();
        match &record.state {
            held if held.settleable_by(outcome, &id) => {
                f(record, now);
                shard.wrote(now);
                Ok(())
            }
            held => match outcome {
                Some(outcome) if held.settled_by(outcome, &id, record.about.as_deref()) => Ok(()),
                _ => Err(StoreError::LeaseLost),
            },
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

impl Shard {
    /// The record under `slot` unless it has expired.
    fn live_mut(&mut self, slot: &Slot, now: u64) -> Option<&mut Record> {
        self.records.get_mut(slot).filter(|r| r.expires_at > now)
    }

    /// The index of `name` in the shard's tool names, added if new.
    /// Past `u16::MAX - 1` names (a registry has a few dozen tools) a new
    /// name gets `u16::MAX`, an index with no name: its records name no
    /// tool rather than a wrong one.
    fn tool(&mut self, name: &str) -> u16 {
        if let Some(i) = self.tools.iter().position(|t| **t == *name) {
            return u16::try_from(i).unwrap_or(u16::MAX);
        }
        if self.tools.len() >= usize::from(u16::MAX) {
            return u16::MAX;
        }
        self.tools.push(name.into());
        u16::try_from(self.tools.len() - 1).unwrap_or(u16::MAX)
    }

    fn insert(&mut self, slot: Slot, record: Record, now: u64) {
        self.records.insert(slot, record);
        self.wrote(now);
    }

    fn wrote(&mut self, now: u64) {
        self.writes += 1;
        if self.writes >= MIN_SWEEP_INTERVAL.max(self.records.len() / 2) {
            self.sweep(now);
        }
    }

    fn sweep(&mut self, now: u64) -> usize {
        let before = self.records.len();
        self.records.retain(|_, r| r.expires_at > now);
        self.writes = 0;
        before - self.records.len()
    }
}

/// The record of `request`'s claim with `fingerprint` (as [`keep`] keeps
/// it) of `tool` (its index) at `now`.
fn running(
    request: ClaimRequest<'_>,
    fingerprint: Option<Box<Fingerprint>>,
    tool: u16,
    token: &LeaseToken,
    now: u64,
) -> Record {
    let lease_until = now.saturating_add(ms(request.lease));
    Record {
        fingerprint,
        expires_at: lease_until.saturating_add(ms(request.retention)),
        since: secs(now),
        about: request.about.map(Box::from),
        tool,
        state: State::Running {
            token: token.id().to_le_bytes(),
            attempt: token.attempt(),
            lease_until,
        },
    }
}

impl IdemStore for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn announce<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<(), StoreError>> {
        self.news.announce(key)
    }

    fn watch<'a>(&'a self, key: &'a IdemKey, within: Duration) -> BoxFuture<'a, ()> {
        Box::pin(self.news.watch(key, within))
    }

    fn claim<'a>(
        &'a self,
        key: &'a IdemKey,
        request: ClaimRequest<'a>,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            let now = self.now();
            let (slot, digest) = Slot::of(key, self.seed);
            let mut shard = self.shard(&slot);
            let (attempt, took, approval) = match shard.live_mut(&slot, now) {
                None => (0, Claim::Acquired as fn(LeaseToken) -> Claim, None),
                Some(record) => match record.taken_by(&request, digest, now) {
                    Ok(took) => took,
                    Err(entry) => return Ok(Claim::Existing(entry)),
                },
            };
            let token = LeaseToken::generate(attempt);
            let tool = shard.tool(request.tool);
            let fingerprint = keep(request.fingerprint, digest);
            let mut record = running(request, fingerprint, tool, &token, now);
            if approval.is_some() {
                record.about = approval;
            }
            shard.insert(slot, record, now);
            Ok(took(token))
        })
    }

    fn settle<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        outcome: Outcome<'a>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.with_holder(key, token, Some(outcome), |record, now| {
                let (id, attempt) = (token.id().to_le_bytes(), token.attempt());
                record.state = match outcome {
                    Outcome::Done { result, .. } => State::Done {
                        token: id,
                        attempt,
                        result: result.into(),
                    },
                    Outcome::Failed { error, .. } => State::Failed {
                        token: id,
                        attempt,
                        error: error.into(),
                    },
                    Outcome::Released => State::Released { token: id, attempt },
                    Outcome::Unknown { reason, .. } => State::Unknown {
                        token: id,
                        attempt,
                        reason: reason.into(),
                    },
                    Outcome::Awaiting { request, .. } => State::Awaiting {
                        token: id,
                        attempt,
                        request: request.into(),
                    },
                    Outcome::Approved { about, .. } => {
                        record.about = Some(about.into());
                        State::Approved { token: id, attempt }
                    }
                };
                record.since = secs(now);
                record.expires_at = now.saturating_add(ms(outcome.kept_for()));
            })
        })
    }

    fn renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.with_holder(key, token, None, |record, now| {
                // The claim's retention carries over.
                let retention = match record.state {
                    State::Running { lease_until, .. } => {
                        record.expires_at.saturating_sub(lease_until)
                    }
                    _ => ms(CLAIM_RETENTION),
                };
                let lease_until = now.saturating_add(ms(lease));
                record.expires_at = lease_until.saturating_add(retention);
                record.state = State::Running {
                    token: token.id().to_le_bytes(),
                    attempt: token.attempt(),
                    lease_until,
                };
            })
        })
    }

    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let now = self.now();
            let swept: usize = self
                .shards
                .iter()
                .map(|s| {
                    let mut shard = s.lock().unwrap_or_else(|p| p.into_inner());
                    shard.sweep(now)
                })
                .sum();
            Ok(swept as u64)
        })
    }

    fn count_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let now = self.now();
            let expired: usize = self
                .shards
                .iter()
                .map(|s| {
                    let shard = s.lock().unwrap_or_else(|p| p.into_inner());
                    shard
                        .records
                        .values()
                        .filter(|r| r.expires_at <= now)
                        .count()
                })
                .sum();
            Ok(expired as u64)
        })
    }

    fn inspect<'a>(
        &'a self,
        key: &'a IdemKey,
    ) -> BoxFuture<'a, Result<Option<RecordInfo>, StoreError>> {
        Box::pin(async move {
            let now = self.now();
            let (slot, digest) = Slot::of(key, self.seed);
            let mut shard = self.shard(&slot);
            let Some(record) = shard.live_mut(&slot, now) else {
                return Ok(None);
            };
            let (state, attempt, payload, lease_left, holder) = record.state.view(now);
            let (fingerprint, since, expires_at, tool) = (
                record.fingerprint(digest),
                record.since,
                record.expires_at,
                record.tool,
            );
            let about = record.about.as_deref().map(String::from);
            Ok(Some(RecordInfo {
                key: key.clone(),
                state,
                tool: shard.tools.get(tool as usize).map(|t| t.to_string()),
                attempt,
                fingerprint,
                age: Some(Duration::from_secs(u64::from(
                    secs(now).saturating_sub(since),
                ))),
                lease_left: lease_left.map(Duration::from_millis),
                expires_in: Duration::from_millis(expires_at.saturating_sub(now)),
                holder,
                payload,
                about,
            }))
        })
    }

    fn scan<'a>(
        &'a self,
        _filter: &'a ScanFilter,
        _cursor: &'a str,
        _limit: usize,
    ) -> BoxFuture<'a, Result<ScanPage, StoreError>> {
        Box::pin(async move {
            Err(StoreError::Unsupported {
                backend: "memory",
                op: "scan",
                why: "it keeps a digest of each key, not the key, and nothing outside the process can reach it",
            })
        })
    }

    fn get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        Box::pin(async move {
            let now = self.now();
            let (slot, digest) = Slot::of(key, self.seed);
            let mut shard = self.shard(&slot);
            Ok(shard
                .live_mut(&slot, now)
                .and_then(|record| record.entry(digest, now)))
        })
    }
}
