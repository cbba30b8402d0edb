//! The settle stage: what the body did, settled in the store as its
//! outcome (retried while the hold allows) and answered to the caller.

use serde_json::Value;

use super::hold::Hold;
use super::task::panicked;
use crate::error::{StoreError, ToolError};
use crate::seal::PayloadKind;
use crate::store::{Outcome, UnknownNote};
use crate::tool::WriteTool;

/// Records what the body did and answers the caller.
///
/// - A result is recorded and returned. One larger than `max_result_bytes`
///   is returned but recorded as a permanent failure saying so, as is one
///   the store refuses: duplicates get that error, never a second run.
/// - A permanent error is recorded and replayed; a transient one releases
///   the key for a retry.
/// - A panic is handled as a crash would be: nothing is recorded or
///   released, so the claim lapses with its lease and the next claim counts
///   an attempt; the body may or may not have taken effect.
pub(super) async fn settle<S, T: WriteTool<S>>(
    tool: &T,
    hold: &Hold<'_>,
    outcome: Result<Result<T::Output, T::Error>, String>,
) -> Result<Value, ToolError> {
    let (name, key) = (hold.tool(), hold.key());
    let outcome = outcome.map_err(|panic| {
        // The panic's text may quote the arguments: debug only.
        tracing::error!(tool = name, key = %key, "the tool panicked; its claim lapses with its lease");
        tracing::debug!(tool = name, key = %key, panic = %panic, "the tool's panic");
        panicked(name, &panic)
    })?;
    let out = match outcome {
        Ok(out) => out,
        Err(e) => return Err(settle_failed(hold, &e.to_string(), tool.is_permanent(&e)).await),
    };
    match serde_json::to_value(&out) {
        Ok(value) => settle_done(hold, value).await,
        Err(e) => {
            // It ran, but nothing can be replayed: record a permanent
            // failure so that duplicates do not run it again.
            let message = hold.storable_error(&format!("the result could not be serialized: {e}"));
            settle_failed_or_log(hold, &message).await;
            Err(failed(hold, message, true))
        }
    }
}

fn failed(hold: &Hold<'_>, message: String, permanent: bool) -> ToolError {
    ToolError::Failed {
        tool: hold.tool().to_owned(),
        message,
        permanent,
    }
}

/// The body failed: a permanent error is recorded, a transient one
/// releases the key for a retry.
pub(super) async fn settle_failed(hold: &Hold<'_>, error: &str, permanent: bool) -> ToolError {
    let message = hold.storable_error(error);
    if permanent {
        settle_failed_or_log(hold, &message).await;
    } else {
        release(hold, &message).await;
    }
    failed(hold, message, permanent)
}

/// The body succeeded: its result is recorded (or, too large or refused by
/// the store, a failure saying it ran) and returned.
pub(super) async fn settle_done(hold: &Hold<'_>, value: Value) -> Result<Value, ToolError> {
    let (name, key) = (hold.tool(), hold.key());
    // Straight into a buffer, where `Display` goes through a formatter a
    // token at a time; a `Value` always serializes (its keys are strings).
    let text = serde_json::to_string(&value).unwrap_or_else(|_| value.to_string());
    if text.len() > hold.max_result_bytes() {
        let message = format!(
            "the tool ran, but its result ({} bytes) is larger than max_result_bytes ({}), so it was not recorded and cannot be replayed",
            text.len(),
            hold.max_result_bytes()
        );
        tracing::error!(tool = name, key = %key, bytes = text.len(), limit = hold.max_result_bytes(), "result too large to record; duplicates get an error instead of a replay");
        #[cfg(feature = "metrics")]
        if let Some(keys) = hold.metrics() {
            crate::metrics::record_too_large(keys);
        }
        settle_failed_or_log(hold, &message).await;
        return Ok(value);
    }
    let ttl = hold.ttl();
    let payload = hold.sealed(PayloadKind::Result, text);
    match hold
        .settle(Outcome::Done {
            result: &payload,
            ttl,
        })
        .await
    {
        Ok(()) => {
            tracing::debug!(tool = name, key = %key, "result recorded");
            Ok(value)
        }
        Err(StoreError::LeaseLost) => {
            tracing::warn!(tool = name, key = %key, "lease lost: the tool ran but another worker took the key over; result not recorded");
            Err(ToolError::LeaseLost {
                tool: name.to_owned(),
                key: key.to_string(),
            })
        }
        Err(e) if !e.is_retryable() => {
            // The store refuses this result: record that it ran, so that
            // duplicates do not run it again.
            tracing::error!(tool = name, key = %key, error = %e, "the store refused the result; recording that the tool ran instead");
            let message = hold.storable_error(&format!(
                "the tool ran, but the store refused its result ({e}), so it cannot be replayed"
            ));
            settle_failed_or_log(hold, &message).await;
            Ok(value)
        }
        Err(e) => {
            // The operation happened: hand its result back. A retry after
            // the lease reuses the same key downstream.
            tracing::error!(tool = name, key = %key, error = %e, "the tool ran but its result could not be recorded before max_hold; a retry after the lease runs it again with the same key");
            Ok(value)
        }
    }
}

/// Records that the operation's outcome is unknown (`reason` says why, for
/// a call of `tenant`), retried within `max_hold`, and answers the caller:
/// every duplicate is refused the same way until an operator resolves the
/// record. Logs with the key, never the arguments.
pub(super) async fn settle_unknown(
    hold: &Hold<'_>,
    tenant: Option<&str>,
    reason: &str,
) -> ToolError {
    let (name, key) = (hold.tool(), hold.key());
    let note = UnknownNote::new(tenant, reason).with_output_schema(hold.output_schema().cloned());
    let note = note.to_payload();
    let payload = hold.sealed(PayloadKind::Error, note);
    let attempt = hold.token().attempt();
    match hold.settle(Outcome::Unknown { reason: &payload }).await {
        Ok(()) => {
            tracing::warn!(tool = name, key = %key, attempt, "the outcome is unknown: the tool will not run it again; resolve it with `idem resolve` or Registry::resolve");
            #[cfg(feature = "notify")]
            hold.tell(crate::notify::EventKind::OutcomeUnknown, |event| {
                event.with("attempt", attempt).with("reason", reason)
            });
            // The reason may quote the tool's error: debug only.
            tracing::debug!(tool = name, key = %key, reason, "why the outcome is unknown");
        }
        Err(StoreError::LeaseLost) => {
            tracing::warn!(tool = name, key = %key, attempt, "lease lost before the unknown outcome was recorded; the worker that took the key over decides");
        }
        Err(e) => {
            tracing::error!(tool = name, key = %key, attempt, error = %e, "the unknown outcome could not be recorded; the claim lapses, and the next duplicate finds the outcome uncertain again");
        }
    }
    ToolError::OutcomeUnknown {
        tool: name.to_owned(),
        key: key.to_string(),
        attempt,
        since: std::time::SystemTime::now(),
    }
}

/// Records a permanent failure, retried within `max_hold`; logs what
/// could not be done.
async fn settle_failed_or_log(hold: &Hold<'_>, message: &str) {
    let (name, key, ttl) = (hold.tool(), hold.key(), hold.ttl());
    let payload = hold.sealed(PayloadKind::Error, message.to_owned());
    match hold
        .settle(Outcome::Failed {
            error: &payload,
            ttl,
        })
        .await
    {
        Ok(()) => {
            tracing::info!(tool = name, key = %key, "permanent failure recorded");
            tracing::debug!(tool = name, key = %key, error = message, "the recorded failure");
        }
        Err(StoreError::LeaseLost) => {
            tracing::warn!(tool = name, key = %key, "lease lost: the failure was not recorded");
        }
        Err(e) => {
            tracing::error!(tool = name, key = %key, error = %e, "permanent failure could not be recorded");
        }
    }
}

/// Gives the key up after a transient failure, retried while the lease
/// holds (its lapse releases the key anyway).
async fn release(hold: &Hold<'_>, message: &str) {
    let (name, key) = (hold.tool(), hold.key());
    match hold.settle(Outcome::Released).await {
        Ok(()) => {
            tracing::info!(tool = name, key = %key, attempt = hold.token().attempt(), "transient failure; key released for a retry");
            tracing::debug!(tool = name, key = %key, error = message, "the transient failure");
        }
        Err(StoreError::LeaseLost) => {
            tracing::warn!(tool = name, key = %key, "lease lost before the key could be released");
        }
        Err(err) => {
            tracing::warn!(tool = name, key = %key, error = %err, "key could not be released; it lapses with its lease");
        }
    }
}
