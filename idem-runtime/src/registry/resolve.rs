//! An operator's answer for an operation whose outcome is unknown: it
//! happened (with this result), it failed, or it did not happen and may
//! run again. Written with the token that made the record unknown, so of
//! two resolutions at once one wins and the other is told.

use serde_json::Value;

use super::dispatch::Registry;
use crate::engine::bounded;
use crate::error::{ResolveError, StoreError};
use crate::key::IdemKey;
use crate::seal::{PayloadKind, seal};
use crate::store::{Outcome, RecordInfo, RecordState};

/// What an operator found out about an operation whose outcome was
/// unknown ([`Registry::resolve`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Resolution {
    /// It happened, with this result: every duplicate is answered it, and
    /// the body does not run.
    Done(Value),
    /// It failed for good: every duplicate is answered this error, and the
    /// body does not run.
    Failed(String),
    /// It did not happen: the next duplicate runs the body, with the
    /// attempt one higher.
    Rerun,
}

impl Resolution {
    /// `done`, `failed` or `rerun`, for logs.
    fn name(&self) -> &'static str {
        match self {
            Resolution::Done(_) => "done",
            Resolution::Failed(_) => "failed",
            Resolution::Rerun => "rerun",
        }
    }
}

impl<S: Send + Sync + 'static> Registry<S> {
    /// Resolves the operation under `key`, whose outcome is unknown (its
    /// tool refuses to run it again on its own:
    /// [`OnUncertain::Refuse`](crate::OnUncertain::Refuse)), with what an
    /// operator found out. `idem resolve` does the same from a shell.
    ///
    /// Refused, changing nothing, when the record is not unknown
    /// ([`ResolveError::NotUnknown`]) or is gone, and when another
    /// resolution changed it first ([`ResolveError::Raced`]). A result must
    /// fit the tool's result type, as a replay would check. The record is
    /// kept for the tool's TTL (the registry's default for a tool it does
    /// not have), and sealed when the registry encrypts results. Logged at
    /// `info` with the key and the resolution, never the result.
    pub async fn resolve(&self, key: &IdemKey, resolution: Resolution) -> Result<(), ResolveError> {
        let shared = &self.inner.shared;
        let (meta, limit) = (&shared.store_meta, shared.store_timeout);
        let store = &shared.store;
        let record = bounded(meta, limit, "inspect", store.inspect(key))
            .await?
            .ok_or_else(|| ResolveError::NotFound {
                key: key.to_string(),
            })?;
        let holder = unknown_holder(&record)?;
        let tool = record.tool.as_deref().unwrap_or_default();
        let (ttl, max_bytes) = match self.tool(tool).ok().and_then(|t| t.decision_terms()) {
            Some(terms) => (terms.ttl, terms.max_result_bytes),
            None => (shared.defaults.ttl, shared.defaults.max_result_bytes),
        };
        let keys = shared.result_keys.as_deref();
        let payload = match &resolution {
            Resolution::Done(result) => {
                let text = result.to_string();
                self.check_result(tool, result, text.len(), max_bytes)?;
                Some(seal(keys, key, PayloadKind::Result, text))
            }
            Resolution::Failed(error) => Some(seal(keys, key, PayloadKind::Error, error.clone())),
            Resolution::Rerun => None,
        };
        let outcome = match (&resolution, payload.as_deref()) {
            (Resolution::Done(_), Some(result)) => Outcome::Done { result, ttl },
            (Resolution::Failed(_), Some(error)) => Outcome::Failed { error, ttl },
            _ => Outcome::Released,
        };
        match bounded(meta, limit, "resolve", store.settle(key, &holder, outcome)).await {
            Ok(()) => {
                tracing::info!(tool, key = %key, attempt = record.attempt, resolution = resolution.name(), "unknown outcome resolved");
                self.announce(key).await;
                #[cfg(feature = "notify")]
                self.tell(&record, crate::notify::EventKind::OutcomeResolved, |e| {
                    e.with("resolution", resolution.name())
                });
                Ok(())
            }
            Err(StoreError::LeaseLost) => Err(ResolveError::Raced {
                key: key.to_string(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether `result` (`len` bytes as JSON) may be recorded for `tool`.
    fn check_result(
        &self,
        tool: &str,
        result: &Value,
        len: usize,
        max_bytes: usize,
    ) -> Result<(), ResolveError> {
        let invalid = |message: String| ResolveError::InvalidResult {
            tool: tool.to_owned(),
            message,
        };
        if len > max_bytes {
            return Err(invalid(format!(
                "it is {len} bytes, more than the {max_bytes} the tool records"
            )));
        }
        match self.tool(tool) {
            Ok(registered) => registered.fits_output(result).map_err(invalid),
            Err(_) => Ok(()),
        }
    }
}

/// The token that made `record` unknown, or why it cannot be resolved.
fn unknown_holder(record: &RecordInfo) -> Result<crate::store::LeaseToken, ResolveError> {
    if record.state != RecordState::Unknown {
        return Err(ResolveError::NotUnknown {
            key: record.key.to_string(),
            state: record.state,
        });
    }
    record.holder.ok_or_else(|| {
        StoreError::corrupt(record.key.as_str(), "an unknown record without its token").into()
    })
}
