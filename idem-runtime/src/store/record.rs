//! The record every durable backend keeps, decoded in one place: the state
//! names, the fingerprint and attempt as stored, and what a live record
//! means to a claim or a read. The byte layout of each backend is in
//! `docs/spec.md` ("Record formats"); golden records of every format ever
//! written are decoded by `tests/records.rs`.
//!
//! Redis records are one line of text, parsed by the Lua scripts on the
//! server; [`running_line`] writes the one a first claim sets without a
//! script, and [`State::parse`] reads the state tags the scripts answer.

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::error::StoreError;
use crate::key::Fingerprint;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::store::contract::Entry;
#[cfg(feature = "redis")]
use crate::store::token::LeaseToken;

/// The version of the Redis record line this code writes (its first
/// field). Records of every version listed in `docs/spec.md` are read.
#[cfg(feature = "redis")]
pub(crate) const LINE_VERSION: u32 = 1;

/// Where a record is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Claimed by a worker until its lease lapses.
    Running,
    /// Given up after a transient failure; claimable at once.
    Released,
    /// A recorded result.
    Done,
    /// A recorded permanent failure.
    Failed,
}

impl State {
    /// The state's name as every backend stores it.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Released => "released",
            State::Done => "done",
            State::Failed => "failed",
        }
    }

    /// The state stored as `name`, if it is one.
    pub(crate) fn parse(name: &str) -> Option<State> {
        [State::Running, State::Released, State::Done, State::Failed]
            .into_iter()
            .find(|state| state.as_str() == name)
    }
}

/// A record's fields as a SQL backend reads them from its row.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) struct Row {
    pub(crate) state: String,
    pub(crate) fingerprint: Vec<u8>,
    pub(crate) attempt: i64,
    pub(crate) payload: Option<String>,
    /// Whether a running record's lease is still live; `None` when the row
    /// has no lease.
    pub(crate) lease_live: Option<bool>,
}

/// What a live (unexpired) record means.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
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
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
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
        })
    }

    /// The attempt number a new claim of this record takes, or `None`
    /// while it is held or settled.
    pub(crate) fn next_attempt(&self) -> Option<u32> {
        match self {
            Live::Running {
                attempt,
                lease_live: false,
                ..
            }
            | Live::Released { attempt } => Some(attempt.saturating_add(1)),
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
        }
    }
}

/// A fingerprint stored as its 32 bytes.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn fingerprint(key: &str, bytes: &[u8]) -> Result<Fingerprint, StoreError> {
    <[u8; 32]>::try_from(bytes)
        .map(Fingerprint::from_bytes)
        .map_err(|_| StoreError::corrupt(key, "the fingerprint is not 32 bytes"))
}

/// An attempt number stored as an integer.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn attempt(key: &str, stored: impl TryInto<u32>) -> Result<u32, StoreError> {
    stored
        .try_into()
        .map_err(|_| StoreError::corrupt(key, "bad attempt"))
}

/// The Redis record of a first claim:
/// `<version>|running|<fingerprint hex>|0|<token hex>|`.
#[cfg(feature = "redis")]
pub(crate) fn running_line(fingerprint: &Fingerprint, token: &LeaseToken) -> String {
    format!(
        "{LINE_VERSION}|{}|{}|{}|{}|",
        State::Running.as_str(),
        fingerprint.to_hex(),
        token.attempt(),
        token.id_hex()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_reads_back_as_itself() {
        for state in [State::Running, State::Released, State::Done, State::Failed] {
            assert_eq!(State::parse(state.as_str()), Some(state));
        }
        assert_eq!(State::parse("Running"), None);
        assert_eq!(State::parse(""), None);
    }
}
