//! The claim stage: take the operation's key, or answer from the record it
//! holds (a result or failure replayed, a call in flight waited for or
//! refused).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use super::checked::Checked;
use super::hold::Site;
use super::task::bounded;
use super::trace::{How, note};
use crate::error::{StoreError, ToolError};
use crate::key::IdemKey;
use crate::seal::{PayloadKind, open};
use crate::store::{Claim, ClaimRequest, Entry, LeaseToken, Refusal};
use crate::tool::OnInFlight;

/// What the claim step ended with.
pub(super) enum Claimed {
    /// The key is ours.
    Acquired(Taken),
    /// A recorded outcome replayed, or why the call cannot run.
    Answered(Result<Value, ToolError>),
}

/// A claim that took the key.
pub(super) struct Taken {
    pub(super) token: LeaseToken,
    /// When the claim was sent: the lease counts from then.
    pub(super) sent: Instant,
    /// It was taken over from a claim whose lease lapsed before it
    /// recorded anything: that attempt's outcome is uncertain.
    pub(super) taken_over: bool,
    /// It used up a person's approval of the operation.
    pub(super) approved: bool,
}

impl Taken {
    /// What `claim`, sent at `sent`, took; the entry it found when it took
    /// nothing.
    fn of(claim: Claim, sent: Instant) -> Result<Taken, Entry> {
        let (token, taken_over, approved) = match claim {
            Claim::Acquired(token) => (token, false, false),
            Claim::TakenOver(token) => (token, true, false),
            Claim::Approved(token) => (token, false, true),
            Claim::Existing(entry) => return Err(entry),
        };
        Ok(Taken {
            token,
            sent,
            taken_over,
            approved,
        })
    }
}

/// Claims `key`, or answers from what it holds: a recorded result or
/// failure is replayed, a running one waits or is refused as in flight.
pub(super) async fn claim_or_replay<O: DeserializeOwned>(
    site: &Site<'_>,
    key: &IdemKey,
    checked: &Checked<'_>,
    about: Option<&str>,
) -> Result<Claimed, ToolError> {
    let Site {
        store,
        settings,
        limit,
        tool: name,
        ..
    } = *site;
    let store_err = |source: StoreError| ToolError::Store {
        tool: name.to_owned(),
        source,
    };
    let wait_until = match settings.on_in_flight {
        OnInFlight::Reject => None,
        OnInFlight::Wait(d) => Some(Instant::now() + d),
    };
    let mut backoff = Duration::from_millis(10);
    // Replayed at once, or after waiting for the first call.
    let mut replayed = How::Replayed;
    let request = ClaimRequest {
        about,
        ..ClaimRequest::new(name, &checked.fingerprint, settings.lease)
            .retention(settings.claim_retention())
    };
    loop {
        let sent = Instant::now();
        let claim = bounded(site.meta, limit, "claim", store.claim(key, request)).await;
        let entry = match claim {
            Ok(claim) => match Taken::of(claim, sent) {
                Ok(taken) => return Ok(Claimed::Acquired(taken)),
                Err(entry) => entry,
            },
            Err(e) => {
                tracing::warn!(tool = name, key = %key, error = %e, "claim failed; the tool did not run");
                match recorded_in_a_full_store(site, key, &e).await {
                    Some(entry) => entry,
                    None => return Err(store_err(e)),
                }
            }
        };
        if let Some(conflict) = conflict(name, key, checked, &entry) {
            return Err(conflict);
        }
        let answer = match entry {
            Entry::Running { .. } => {
                let now = Instant::now();
                match wait_until {
                    Some(deadline) if now < deadline => {
                        tracing::debug!(tool = name, key = %key, "in flight; waiting");
                        replayed = How::Waited;
                        tokio::time::sleep(backoff.min(deadline - now)).await;
                        backoff = (backoff * 2).min(Duration::from_millis(500));
                        continue;
                    }
                    _ => {
                        tracing::info!(tool = name, key = %key, "in flight; duplicate rejected");
                        Err(ToolError::InFlight {
                            tool: name.to_owned(),
                            key: key.to_string(),
                        })
                    }
                }
            }
            settled => {
                note(site.trace, replayed);
                replay_settled::<O>(site, key, settled)
            }
        };
        return Ok(Claimed::Answered(answer));
    }
}

/// A [`ToolError::KeyConflict`] naming the checked fields that differ, when
/// `entry` is of another operation under the same key.
fn conflict(tool: &str, key: &IdemKey, checked: &Checked<'_>, entry: &Entry) -> Option<ToolError> {
    if entry.fingerprint().matches(&checked.fingerprint) {
        return None;
    }
    let fields = checked.differing(entry.fingerprint());
    tracing::warn!(tool, key = %key, fields = ?fields, "key conflict: same key, different arguments");
    Some(ToolError::KeyConflict {
        tool: tool.to_owned(),
        key: key.to_string(),
        fields,
    })
}

/// What a store that refused a claim for being full ([`StoreError::Full`])
/// has recorded under `key`, read instead: a full store writes nothing,
/// but what it holds can be replayed. `None` for any other refusal, or
/// when it holds no outcome.
async fn recorded_in_a_full_store(
    site: &Site<'_>,
    key: &IdemKey,
    refusal: &StoreError,
) -> Option<Entry> {
    if !matches!(refusal, StoreError::Full { .. }) {
        return None;
    }
    let read = bounded(site.meta, site.limit, "get", site.store.get(key)).await;
    match read {
        Ok(Some(entry @ (Entry::Done { .. } | Entry::Failed { .. } | Entry::Unknown { .. }))) => {
            Some(entry)
        }
        _ => None,
    }
}

/// A recorded result or failure, replayed.
fn replay_settled<O: DeserializeOwned>(
    site: &Site<'_>,
    key: &IdemKey,
    entry: Entry,
) -> Result<Value, ToolError> {
    let name = site.tool;
    let store_err = |source: StoreError| ToolError::Store {
        tool: name.to_owned(),
        source,
    };
    match entry {
        Entry::Done { result, .. } => {
            tracing::info!(tool = name, key = %key, "replayed recorded result");
            open(site.result_keys, key, PayloadKind::Result, result)
                .and_then(|result| replay::<O>(key, &result))
                .map_err(store_err)
        }
        Entry::Failed { error, .. } => {
            tracing::info!(tool = name, key = %key, "replayed recorded failure");
            match open(site.result_keys, key, PayloadKind::Error, error) {
                Ok(message) => match Refusal::parse(&message) {
                    Some(refusal) => {
                        note(site.trace, How::Denied);
                        Err(ToolError::Denied {
                            tool: name.to_owned(),
                            key: key.clone(),
                            by: refusal.by,
                            reason: refusal.reason,
                        })
                    }
                    None => Err(ToolError::Failed {
                        tool: name.to_owned(),
                        message,
                        permanent: true,
                    }),
                },
                Err(e) => Err(store_err(e)),
            }
        }
        Entry::Unknown { attempt, age, .. } => {
            tracing::info!(tool = name, key = %key, attempt, "the outcome is unknown; refused until an operator resolves it");
            Err(ToolError::OutcomeUnknown {
                tool: name.to_owned(),
                key: key.to_string(),
                attempt,
                since: std::time::SystemTime::now()
                    .checked_sub(age)
                    .unwrap_or(std::time::UNIX_EPOCH),
            })
        }
        Entry::Awaiting { age, .. } => {
            tracing::info!(tool = name, key = %key, "waits for a person's approval");
            Err(ToolError::ApprovalRequired {
                tool: name.to_owned(),
                key: key.clone(),
                since: std::time::SystemTime::now()
                    .checked_sub(age)
                    .unwrap_or(std::time::UNIX_EPOCH),
                window: site.settings.approval_window,
            })
        }
        // Waited for by the caller; were it handed here, it is in flight.
        // An approval of other arguments under the key is a conflict the
        // caller reported before.
        Entry::Running { .. } | Entry::Approved { .. } => Err(ToolError::InFlight {
            tool: name.to_owned(),
            key: key.to_string(),
        }),
    }
}

/// Validates a recorded result against the tool's result type and returns it.
fn replay<O: DeserializeOwned>(key: &IdemKey, text: &str) -> Result<Value, StoreError> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        tracing::error!(key = %key, error = %e, "recorded result is not JSON");
        StoreError::corrupt(key.as_str(), format!("recorded result is not JSON: {e}"))
    })?;
    if let Err(e) = O::deserialize(&value) {
        // serde's message quotes the stored result: debug only, and not in
        // the error the caller (and the model) sees.
        tracing::error!(key = %key, "recorded result no longer fits the result type");
        tracing::debug!(key = %key, error = %e, "why the recorded result no longer fits");
        return Err(StoreError::corrupt(
            key.as_str(),
            "recorded result no longer fits the tool's result type (details at debug level)",
        ));
    }
    Ok(value)
}
