//! A [`MemoryStore`](super::MemoryStore) record: its fields, its state (a
//! settled one keeping the token that settled it), what an operator sees
//! of it, and what a claim or a read makes of it.

use std::time::Duration;

use crate::key::Fingerprint;
use crate::store::{Claim, ClaimRequest, Entry, LeaseToken, Outcome, RecordState};

/// Times are milliseconds since the store's epoch, but for `since`.
pub(super) struct Record {
    /// The arguments' fingerprint; `None` when it is the digest the key
    /// ends with (a tool keyed on all its arguments: the usual case), which
    /// the key gives back.
    pub(super) fingerprint: Option<Box<Fingerprint>>,
    pub(super) expires_at: u64,
    /// When the record entered its state, in seconds since the store's
    /// epoch (an age for operators needs no finer grain; four bytes last
    /// 136 years).
    pub(super) since: u32,
    /// The index of its tool's name in [`Shard::tools`].
    pub(super) tool: u16,
    pub(super) state: State,
    /// What its claim said of the operation.
    pub(super) about: Option<Box<str>>,
}

/// A record's state; a settled one keeps the token that settled it, so
/// that the same settle repeated (a retry whose first reply was lost)
/// succeeds.
pub(super) enum State {
    Running {
        token: [u8; 16],
        lease_until: u64,
        attempt: u32,
    },
    Released {
        token: [u8; 16],
        attempt: u32,
    },
    Done {
        token: [u8; 16],
        attempt: u32,
        result: Box<str>,
    },
    Failed {
        token: [u8; 16],
        attempt: u32,
        error: Box<str>,
    },
    Unknown {
        token: [u8; 16],
        attempt: u32,
        reason: Box<str>,
    },
    Awaiting {
        token: [u8; 16],
        attempt: u32,
        request: Box<str>,
    },
    Approved {
        token: [u8; 16],
        attempt: u32,
    },
}

impl State {
    /// Whether settling with `outcome` by `token` made this state, of a
    /// record saying `about`.
    pub(super) fn settled_by(
        &self,
        outcome: Outcome<'_>,
        token: &[u8; 16],
        about: Option<&str>,
    ) -> bool {
        match (self, outcome) {
            (State::Released { token: t, .. }, Outcome::Released) => t == token,
            (
                State::Done {
                    token: t, result, ..
                },
                Outcome::Done { result: r, .. },
            ) => t == token && **result == *r,
            (
                State::Failed {
                    token: t, error, ..
                },
                Outcome::Failed { error: e, .. },
            ) => t == token && **error == *e,
            (
                State::Unknown {
                    token: t, reason, ..
                },
                Outcome::Unknown { reason: r, .. },
            ) => t == token && **reason == *r,
            (
                State::Awaiting {
                    token: t, request, ..
                },
                Outcome::Awaiting { request: r, .. },
            ) => t == token && **request == *r,
            // An approval repeated: the record's about says whose.
            (State::Approved { token: t, .. }, Outcome::Approved { about: a, .. }) => {
                t == token && about == Some(a)
            }
            _ => false,
        }
    }

    /// What an operator sees of the state at `now`: its name, attempt,
    /// payload, lease left (ms) and the token that holds or made it.
    pub(super) fn view(&self, now: u64) -> View {
        match self {
            State::Running {
                token,
                lease_until,
                attempt,
            } => (
                RecordState::Running,
                *attempt,
                None,
                Some(lease_until.saturating_sub(now)),
                Some(LeaseToken::from_parts(
                    u128::from_le_bytes(*token),
                    *attempt,
                )),
            ),
            State::Released { attempt, .. } => (RecordState::Released, *attempt, None, None, None),
            State::Done {
                attempt, result, ..
            } => (
                RecordState::Done,
                *attempt,
                Some(result.to_string()),
                None,
                None,
            ),
            State::Failed { attempt, error, .. } => (
                RecordState::Failed,
                *attempt,
                Some(error.to_string()),
                None,
                None,
            ),
            State::Unknown {
                token,
                attempt,
                reason,
            } => (
                RecordState::Unknown,
                *attempt,
                Some(reason.to_string()),
                None,
                Some(LeaseToken::from_parts(
                    u128::from_le_bytes(*token),
                    *attempt,
                )),
            ),
            State::Awaiting {
                token,
                attempt,
                request,
            } => (
                RecordState::Awaiting,
                *attempt,
                Some(request.to_string()),
                None,
                Some(LeaseToken::from_parts(
                    u128::from_le_bytes(*token),
                    *attempt,
                )),
            ),
            State::Approved { token, attempt } => (
                RecordState::Approved,
                *attempt,
                None,
                None,
                Some(LeaseToken::from_parts(
                    u128::from_le_bytes(*token),
                    *attempt,
                )),
            ),
        }
    }

    /// The state's name.
    pub(super) fn name(&self) -> RecordState {
        match self {
            State::Running { .. } => RecordState::Running,
            State::Released { .. } => RecordState::Released,
            State::Done { .. } => RecordState::Done,
            State::Failed { .. } => RecordState::Failed,
            State::Unknown { .. } => RecordState::Unknown,
            State::Awaiting { .. } => RecordState::Awaiting,
            State::Approved { .. } => RecordState::Approved,
        }
    }

    /// The token that holds or last settled this state.
    pub(super) fn token(&self) -> &[u8; 16] {
        match self {
            State::Running { token, .. }
            | State::Released { token, .. }
            | State::Done { token, .. }
            | State::Failed { token, .. }
            | State::Unknown { token, .. }
            | State::Awaiting { token, .. }
            | State::Approved { token, .. } => token,
        }
    }

    /// Whether `token` may settle this state with `outcome` (a renewal
    /// when `None`): the holder of a running record, or the token that
    /// made an unknown, awaiting or approved one, deciding it
    /// ([`Outcome::settles`]).
    pub(super) fn settleable_by(&self, outcome: Option<Outcome<'_>>, token: &[u8; 16]) -> bool {
        self.token() == token
            && match outcome {
                None => matches!(self, State::Running { .. }),
                Some(outcome) => outcome.settles(self.name()),
            }
    }
}

/// What an operator sees of a state: its name, attempt, payload, lease
/// left (ms) and the token that holds or made it.
pub(super) type View = (
    RecordState,
    u32,
    Option<String>,
    Option<u64>,
    Option<LeaseToken>,
);

/// Milliseconds since the epoch as the seconds a record's `since` keeps.
pub(super) fn secs(ms: u64) -> u32 {
    u32::try_from(ms / 1000).unwrap_or(u32::MAX)
}

pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What a record keeps of `fingerprint`, for a key ending with `digest`.
pub(super) fn keep(
    fingerprint: &Fingerprint,
    digest: Option<[u8; 32]>,
) -> Option<Box<Fingerprint>> {
    match digest {
        Some(d) if fingerprint.is_just(&d) => None,
        _ => Some(Box::new(fingerprint.clone())),
    }
}

/// How a claim takes a record: its attempt, the answer it makes of the
/// claim's token, and the about an approval wrote, which the new record
/// keeps.
pub(super) type Taken = (u32, fn(LeaseToken) -> Claim, Option<Box<str>>);

impl Record {
    /// What `get` answers of this record at `now` (`None` when released).
    pub(super) fn entry(&self, digest: Option<[u8; 32]>, now: u64) -> Option<Entry> {
        let fingerprint = self.fingerprint(digest);
        let age = Duration::from_secs(u64::from(secs(now).saturating_sub(self.since)));
        Some(match &self.state {
            State::Running { attempt, .. } => Entry::Running {
                fingerprint,
                attempt: *attempt,
            },
            State::Released { .. } => return None,
            State::Done { result, .. } => Entry::Done {
                result: result.to_string(),
                fingerprint,
            },
            State::Failed { error, .. } => Entry::Failed {
                error: error.to_string(),
                fingerprint,
            },
            State::Unknown {
                attempt, reason, ..
            } => Entry::Unknown {
                reason: reason.to_string(),
                fingerprint,
                attempt: *attempt,
                age,
            },
            State::Awaiting { request, .. } => Entry::Awaiting {
                request: request.to_string(),
                fingerprint,
                age,
            },
            State::Approved { .. } => Entry::Approved { fingerprint },
        })
    }

    /// Whether a claim of `request` takes this live record (how, as
    /// [`Taken`]), or what it answers: a lapsed claim is taken over and a
    /// released record taken, each one attempt higher; an approval is
    /// used by a claim of the very arguments approved, at its attempt;
    /// anything else is answered.
    pub(super) fn taken_by(
        &self,
        request: &ClaimRequest<'_>,
        digest: Option<[u8; 32]>,
        now: u64,
    ) -> Result<Taken, Entry> {
        let after = |attempt: &u32| attempt.saturating_add(1);
        match &self.state {
            State::Running {
                attempt,
                lease_until,
                ..
            } if *lease_until <= now => Ok((after(attempt), Claim::TakenOver, None)),
            State::Released { attempt, .. } => Ok((after(attempt), Claim::Acquired, None)),
            State::Approved { attempt, .. } if self.fingerprint(digest) == *request.fingerprint => {
                Ok((*attempt, Claim::Approved, self.about.clone()))
            }
            _ => Err(self
                .entry(digest, now)
                .expect("only a released record has no entry")),
        }
    }

    /// The fingerprint kept by [`keep`], for the key ending with `digest`.
    pub(super) fn fingerprint(&self, digest: Option<[u8; 32]>) -> Fingerprint {
        // `None` is only kept for a key that ends with a digest.
        match &self.fingerprint {
            Some(own) => (**own).clone(),
            None => Fingerprint::from_digest(digest.unwrap_or_default()),
        }
    }
}
