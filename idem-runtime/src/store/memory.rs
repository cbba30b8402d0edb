//! [`MemoryStore`]: the in-process default.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::{CLAIM_RETENTION, Claim, Entry, IdemStore, LeaseToken};
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};

/// An in-process store: sharded hash maps behind short mutex sections.
///
/// Leases and TTLs run on the monotonic clock (`tokio::time::Instant`, so
/// tests with a paused Tokio clock control it). Expired records are swept
/// from a shard as it grows, in amortised constant time per operation, and on
/// [`purge_expired`](Self::purge_expired); memory stays proportional to the
/// records alive, not to every key ever seen.
///
/// It guarantees once-only execution within one process. Records are lost
/// when the process exits: a crashed agent that resumes in a new process
/// runs its writes again. Use a durable backend for that.
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
}

#[derive(Default)]
struct Shard {
    records: HashMap<Box<str>, Record>,
    /// Mutations since the last sweep.
    writes: usize,
}

struct Record {
    fingerprint: Fingerprint,
    expires_at: Instant,
    state: State,
}

enum State {
    Running {
        token: u128,
        attempt: u32,
        lease_until: Instant,
    },
    Released {
        attempt: u32,
    },
    Done(Box<str>),
    Failed(Box<str>),
}

/// Shards are a power of two; enough that 2 × cores tasks rarely meet.
const SHARDS: usize = 64;
/// A shard is swept when it has seen this many writes, or half its size.
const MIN_SWEEP_INTERVAL: usize = 1024;

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
        }
    }

    fn shard(&self, key: &str) -> MutexGuard<'_, Shard> {
        let i = self.hasher.hash_one(key) as usize & (SHARDS - 1);
        // A poisoned shard only means a panic elsewhere while holding it; each
        // critical section leaves its record whole, so carry on.
        self.shards[i]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Removes every expired record now; returns how many.
    pub fn purge_expired(&self) -> usize {
        let now = Instant::now();
        self.shards
            .iter()
            .map(|s| {
                let mut shard = s.lock().unwrap_or_else(|p| p.into_inner());
                shard.sweep(now)
            })
            .sum()
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
        let now = Instant::now();
        self.shard(key.as_str()).insert(
            key.as_str(),
            Record {
                fingerprint: *fingerprint,
                expires_at: now + ttl,
                state: State::Done(result.into()),
            },
            now,
        );
    }

    /// Applies `f` to the live record under `key`, if it is running with
    /// `token`; otherwise `LeaseLost`.
    fn with_holder(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        f: impl FnOnce(&mut Record, Instant),
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut shard = self.shard(key.as_str());
        let Some(record) = shard.live_mut(key.as_str(), now) else {
            return Err(StoreError::LeaseLost);
        };
        match record.state {
            State::Running { token: t, .. } if t == token.id() => {
                f(record, now);
                shard.wrote(now);
                Ok(())
            }
            _ => Err(StoreError::LeaseLost),
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
    /// The record under `key` unless it has expired.
    fn live_mut(&mut self, key: &str, now: Instant) -> Option<&mut Record> {
        self.records.get_mut(key).filter(|r| r.expires_at > now)
    }

    fn insert(&mut self, key: &str, record: Record, now: Instant) {
        match self.records.get_mut(key) {
            Some(slot) => *slot = record,
            None => {
                self.records.insert(key.into(), record);
            }
        }
        self.wrote(now);
    }

    fn wrote(&mut self, now: Instant) {
        self.writes += 1;
        if self.writes >= MIN_SWEEP_INTERVAL.max(self.records.len() / 2) {
            self.sweep(now);
        }
    }

    fn sweep(&mut self, now: Instant) -> usize {
        let before = self.records.len();
        self.records.retain(|_, r| r.expires_at > now);
        self.writes = 0;
        before - self.records.len()
    }
}

fn running(fingerprint: Fingerprint, token: &LeaseToken, lease: Duration, now: Instant) -> Record {
    let lease_until = now + lease;
    Record {
        fingerprint,
        expires_at: lease_until + CLAIM_RETENTION,
        state: State::Running {
            token: token.id(),
            attempt: token.attempt(),
            lease_until,
        },
    }
}

impl IdemStore for MemoryStore {
    async fn claim(
        &self,
        key: &IdemKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let now = Instant::now();
        let mut shard = self.shard(key.as_str());
        let attempt = match shard.live_mut(key.as_str(), now) {
            None => 0,
            Some(record) => match &record.state {
                State::Running {
                    attempt,
                    lease_until,
                    ..
                } if *lease_until > now => {
                    return Ok(Claim::Existing(Entry::Running {
                        fingerprint: record.fingerprint,
                        attempt: *attempt,
                    }));
                }
                State::Running { attempt, .. } | State::Released { attempt } => {
                    attempt.saturating_add(1)
                }
                State::Done(result) => {
                    return Ok(Claim::Existing(Entry::Done {
                        result: result.to_string(),
                        fingerprint: record.fingerprint,
                    }));
                }
                State::Failed(error) => {
                    return Ok(Claim::Existing(Entry::Failed {
                        error: error.to_string(),
                        fingerprint: record.fingerprint,
                    }));
                }
            },
        };
        let token = LeaseToken::generate(attempt);
        shard.insert(key.as_str(), running(*fingerprint, &token, lease, now), now);
        Ok(Claim::Acquired(token))
    }

    async fn complete(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        result: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.with_holder(key, token, |record, now| {
            record.state = State::Done(result.into());
            record.expires_at = now + ttl;
        })
    }

    async fn release(&self, key: &IdemKey, token: &LeaseToken) -> Result<(), StoreError> {
        self.with_holder(key, token, |record, now| {
            record.state = State::Released {
                attempt: token.attempt(),
            };
            record.expires_at = now + CLAIM_RETENTION;
        })
    }

    async fn fail(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        error: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.with_holder(key, token, |record, now| {
            record.state = State::Failed(error.into());
            record.expires_at = now + ttl;
        })
    }

    async fn renew(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        self.with_holder(key, token, |record, now| {
            *record = running(record.fingerprint, token, lease, now);
        })
    }

    async fn get(&self, key: &IdemKey) -> Result<Option<Entry>, StoreError> {
        let now = Instant::now();
        let mut shard = self.shard(key.as_str());
        Ok(shard.live_mut(key.as_str(), now).and_then(|record| {
            let fingerprint = record.fingerprint;
            match &record.state {
                State::Running { attempt, .. } => Some(Entry::Running {
                    fingerprint,
                    attempt: *attempt,
                }),
                State::Released { .. } => None,
                State::Done(result) => Some(Entry::Done {
                    result: result.to_string(),
                    fingerprint,
                }),
                State::Failed(error) => Some(Entry::Failed {
                    error: error.to_string(),
                    fingerprint,
                }),
            }
        }))
    }
}
