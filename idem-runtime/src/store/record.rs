//! The record the SQL backends (SQLite, PostgreSQL) keep, decoded in one
//! place: the state names, the fingerprint and attempt as stored, and what
//! a live row means to a claim or a read. The byte layout of each backend
//! is in `docs/spec.md` ("Record formats"); golden records of every format
//! ever written are decoded by `tests/records.rs`. Redis keeps its records
//! as lines of text, in `redis/record.rs`.

use std::time::Duration;

use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};
use crate::store::contract::Entry;
use crate::store::inspect::{RecordInfo, ScanPage};
use crate::store::token::LeaseToken;

/// Where a record is in its life; the public [`RecordState`], by its
/// short name here.
pub(crate) use crate::store::inspect::RecordState as State;

/// A record's fields as a SQL backend reads them from its row.
pub(crate) struct Row {
    pub(crate) state: String,
    pub(crate) fingerprint: Vec<u8>,
    pub(crate) attempt: i64,
    pub(crate) payload: Option<String>,
    /// Whether a running record's lease is still live; `None` when the row
    /// has no lease.
    pub(crate) lease_live: Option<bool>,
    /// Since the record entered its state, by the store's clock; `None`
    /// in a row of schema 1.
    pub(crate) age_ms: Option<i64>,
}

/// What a live (unexpired) record means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Live {
    Running {
        fingerprint: Fingerprint,
        attempt: u32,
        lease_live: bool,
    },
    Released {
        attempt: u32,
    },
    Done {
        fingerprint: Fingerprint,
        result: String,
    },
    Failed {
        fingerprint: Fingerprint,
        error: String,
    },
    Unknown {
        fingerprint: Fingerprint,
        attempt: u32,
        reason: String,
        age: Duration,
    },
    Awaiting {
        fingerprint: Fingerprint,
        request: String,
        age: Duration,
    },
    Approved {
        fingerprint: Fingerprint,
        attempt: u32,
    },
}

/// How a claim takes a live record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Took {
    /// A released record: a claim like a first one.
    Released,
    /// A lapsed claim, whose outcome nobody knows.
    TakenOver,
    /// An approval of the claim's very arguments, used up.
    Approved,
}

impl Live {
    /// Decodes a row of the record under `key`; a row no version of idem
    /// wrote is [`StoreError::Corrupt`], saying what is wrong.
    pub(crate) fn decode(key: &str, row: Row) -> Result<Live, StoreError> {
        let corrupt = |why: String| StoreError::corrupt(key, why);
        let state = State::parse(&row.state)
            .ok_or_else(|| corrupt(format!("unknown state {:?}", row.state)))?;
        let fingerprint = fingerprint(key, &row.fingerprint)?;
        let attempt = attempt(key, row.attempt)?;
        // The payload (a result of up to `max_result_bytes`) moves, never copied.
        let missing = |what: &str| corrupt(format!("{} without {what}", state.as_str()));
        Ok(match state {
            State::Running => Live::Running {
                fingerprint,
                attempt,
                lease_live: row
                    .lease_live
                    .ok_or_else(|| corrupt("running without a lease".into()))?,
            },
            State::Released => Live::Released { attempt },
            State::Done => Live::Done {
                fingerprint,
                result: row.payload.ok_or_else(|| missing("a result"))?,
            },
            State::Failed => Live::Failed {
                fingerprint,
                error: row.payload.ok_or_else(|| missing("an error"))?,
            },
            State::Unknown => Live::Unknown {
                fingerprint,
                attempt,
                reason: row.payload.ok_or_else(|| missing("a reason"))?,
                age: row.age_ms.map(positive_ms).unwrap_or_default(),
            },
            State::Awaiting => Live::Awaiting {
                fingerprint,
                request: row.payload.ok_or_else(|| missing("a request"))?,
                age: row.age_ms.map(positive_ms).unwrap_or_default(),
            },
            State::Approved => Live::Approved {
                fingerprint,
                attempt,
            },
        })
    }

    /// Whether a claim with `fingerprint` takes this record, at which
    /// attempt and how (`None` while it is held or settled): a lapsed
    /// claim or a released record one attempt higher, an approval of the
    /// very same arguments at its own.
    pub(crate) fn taken_by(&self, fingerprint: &Fingerprint) -> Option<(u32, Took)> {
        match self {
            Live::Running {
                attempt,
                lease_live: false,
                ..
            } => Some((attempt.saturating_add(1), Took::TakenOver)),
            Live::Released { attempt } => Some((attempt.saturating_add(1), Took::Released)),
            Live::Approved {
                fingerprint: approved,
                attempt,
            } if approved == fingerprint => Some((*attempt, Took::Approved)),
            _ => None,
        }
    }

    /// The entry a caller sees; `None` for a released record.
    pub(crate) fn into_entry(self) -> Option<Entry> {
        match self {
            Live::Running {
                fingerprint,
                attempt,
                ..
            } => Some(Entry::Running {
                fingerprint,
                attempt,
            }),
            Live::Released { .. } => None,
            Live::Done {
                fingerprint,
                result,
            } => Some(Entry::Done {
                result,
                fingerprint,
            }),
            Live::Failed { fingerprint, error } => Some(Entry::Failed { error, fingerprint }),
            Live::Unknown {
                fingerprint,
                attempt,
                reason,
                age,
            } => Some(Entry::Unknown {
                reason,
                fingerprint,
                attempt,
                age,
            }),
            Live::Awaiting {
                fingerprint,
                request,
                age,
            } => Some(Entry::Awaiting {
                request,
                fingerprint,
                age,
            }),
            Live::Approved { fingerprint, .. } => Some(Entry::Approved { fingerprint }),
        }
    }
}

/// A fingerprint stored as its bytes ([`Fingerprint::to_bytes`]).
fn fingerprint(key: &str, bytes: &[u8]) -> Result<Fingerprint, StoreError> {
    Fingerprint::from_bytes(bytes).ok_or_else(|| {
        StoreError::corrupt(
            key,
            "the fingerprint is not 32 bytes followed by whole field tags of 8",
        )
    })
}

/// What a SQL backend reads of a record for an operator: its row, with
/// its times as milliseconds from now by the store's clock.
pub(crate) struct InfoRow {
    pub(crate) key: String,
    pub(crate) state: String,
    pub(crate) tool: Option<String>,
    pub(crate) fingerprint: Vec<u8>,
    pub(crate) attempt: i64,
    pub(crate) token: Option<Vec<u8>>,
    /// Since the record entered its state; `None` in a row of schema 1.
    pub(crate) age_ms: Option<i64>,
    /// Until a running record's lease lapses (negative once it has).
    pub(crate) lease_ms: Option<i64>,
    pub(crate) expires_ms: i64,
    pub(crate) payload: Option<String>,
    /// What the record says of its operation (schema 3).
    pub(crate) about: Option<String>,
}

impl InfoRow {
    /// The record as [`RecordInfo`]; a row no version of idem wrote is
    /// [`StoreError::Corrupt`].
    pub(crate) fn decode(self) -> Result<RecordInfo, StoreError> {
        let key = self.key;
        let corrupt = |why: String| StoreError::corrupt(&key, why);
        let state = State::parse(&self.state)
            .ok_or_else(|| corrupt(format!("unknown state {:?}", self.state)))?;
        let attempt = attempt(&key, self.attempt)?;
        let holder = match (state, self.token) {
            (State::Running | State::Unknown | State::Awaiting | State::Approved, Some(token)) => {
                Some(LeaseToken::from_parts(
                    u128::from_be_bytes(
                        <[u8; 16]>::try_from(token.as_slice())
                            .map_err(|_| corrupt("the token is not 16 bytes".into()))?,
                    ),
                    attempt,
                ))
            }
            (State::Running | State::Unknown, None) => {
                return Err(corrupt(format!("{state} without a token")));
            }
            _ => None,
        };
        if state == State::Running && self.lease_ms.is_none() {
            return Err(corrupt("running without a lease".into()));
        }
        Ok(RecordInfo {
            fingerprint: fingerprint(&key, &self.fingerprint)?,
            state,
            tool: self.tool,
            attempt,
            age: self.age_ms.map(positive_ms),
            lease_left: self
                .lease_ms
                .filter(|_| state == State::Running)
                .map(positive_ms),
            expires_in: positive_ms(self.expires_ms),
            holder,
            payload: self.payload,
            about: self.about,
            key: IdemKey::from_raw(key),
        })
    }
}

/// A page of a scan along the primary key (`key > cursor ORDER BY key
/// LIMIT limit`) decoded from its `rows`: the next page starts after the
/// last key when this one is full; a page less than full ends the scan.
pub(crate) fn keyset_page(rows: Vec<InfoRow>, limit: i64) -> Result<ScanPage, StoreError> {
    let full = i64::try_from(rows.len()).is_ok_and(|n| n >= limit);
    let next = rows.last().filter(|_| full).map(|row| row.key.clone());
    let records = rows
        .into_iter()
        .map(InfoRow::decode)
        .collect::<Result<_, _>>()?;
    Ok(ScanPage::new(records, next))
}

/// A span of milliseconds, zero if negative.
fn positive_ms(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// An attempt number stored as an integer.
pub(crate) fn attempt(key: &str, stored: impl TryInto<u32>) -> Result<u32, StoreError> {
    stored
        .try_into()
        .map_err(|_| StoreError::corrupt(key, "bad attempt"))
}
