//! The idempotent wrapper: claim or replay, run once while a heartbeat
//! holds the lease, record the outcome.
//!
//! - `args`: the model's arguments, made typed and exact;
//! - `hold`: the lease from claim to record (heartbeat, lost signal,
//!   retried settling);
//! - `task`: the future combinators both are built from.

mod args;
mod hold;
mod task;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::time::Instant;

use self::args::parse_args;
use self::hold::{Hold, Site, Window};
use self::task::{beside, bounded, catch_panic, panicked};
use crate::canonical::write_typed;
use crate::ctx::{Ctx, WriteCtx};
use crate::error::{StoreError, ToolError};
use crate::key::{Fingerprint, IdemKey};
use crate::store::{Claim, DynIdemStore, Entry, LeaseToken};
use crate::tool::{OnInFlight, ReadTool, WriteTool};

/// What every call of a registry shares.
pub(crate) struct Shared<S> {
    pub(crate) state: Arc<S>,
    pub(crate) store: Arc<dyn DynIdemStore>,
    pub(crate) namespace: Option<Box<str>>,
    pub(crate) store_timeout: Duration,
    pub(crate) defaults: crate::registry::Defaults,
}

/// A write tool's settings with the registry's defaults filled in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolved {
    pub(crate) lease: Duration,
    pub(crate) ttl: Duration,
    pub(crate) max_hold: Duration,
    pub(crate) on_in_flight: OnInFlight,
    pub(crate) scope: crate::key::ScopeKind,
    pub(crate) version: u32,
    pub(crate) key_fields: Option<&'static [&'static str]>,
    pub(crate) max_result_bytes: usize,
}

fn to_json<T: Serialize>(value: &T) -> Result<Value, serde_json::Error> {
    serde_json::to_value(value)
}

/// Runs a read tool: parse, call, serialize. Never touches the store.
pub(crate) async fn call_read<S, T: ReadTool<S>>(
    tool: &T,
    name: &str,
    shared: &Shared<S>,
    run_id: &str,
    args: Value,
) -> Result<Value, ToolError> {
    let args: T::Args = parse_args(name, args, false)?;
    let ctx = Ctx::new(run_id, shared.state.clone());
    let outcome = catch_panic(tool.call(args, &ctx)).await.map_err(|panic| {
        tracing::error!(tool = name, panic = %panic, "the tool panicked");
        panicked(name, &panic)
    })?;
    match outcome {
        Ok(out) => to_json(&out).map_err(|e| ToolError::Failed {
            tool: name.to_owned(),
            message: format!("the result could not be serialized: {e}"),
            permanent: true,
        }),
        Err(e) => Err(ToolError::Failed {
            tool: name.to_owned(),
            message: e.to_string(),
            permanent: false,
        }),
    }
}

/// Parses a write tool's arguments and derives the operation's key and
/// fingerprint from the typed arguments, re-serialized.
pub(crate) fn operation<S, T: WriteTool<S>>(
    name: &str,
    cfg: &Resolved,
    namespace: Option<&str>,
    run_id: &str,
    args: Value,
) -> Result<(T::Args, IdemKey, Fingerprint), ToolError> {
    let args: T::Args = parse_args(name, args, true)?;
    let unserializable = |e: serde_json::Error| ToolError::InvalidArgs {
        tool: name.to_owned(),
        message: format!("the arguments could not be re-serialized to derive the key: {e}"),
    };
    let scope = cfg.scope.with_run(run_id);
    // Keyed on a subset of the arguments (registration checked that they
    // are an object): the key from the subset, the fingerprint from all.
    let subset = match cfg.key_fields {
        Some(fields) => match to_json(&args).map_err(unserializable)? {
            Value::Object(map) => Some((fields, map)),
            _ => None,
        },
        None => None,
    };
    let (key, fingerprint) = match subset {
        Some((fields, map)) => {
            let subset: Map<String, Value> = fields
                .iter()
                .filter_map(|f| map.get(*f).map(|v| ((*f).to_owned(), v.clone())))
                .collect();
            let key = IdemKey::derive(scope, name, cfg.version, &Value::Object(subset));
            (key, Fingerprint::of(&Value::Object(map)))
        }
        // Keyed on every argument: the key's digest fingerprints them too.
        None => {
            let digest =
                IdemKey::digest_with(scope, name, cfg.version, |out| write_typed(out, &args))
                    .map_err(unserializable)?;
            (
                IdemKey::from_digest(&digest),
                Fingerprint::from_bytes(digest),
            )
        }
    };
    let key = match namespace {
        Some(ns) => key.with_namespace(ns),
        None => key,
    };
    Ok((args, key, fingerprint))
}

/// Runs a write tool through the idempotent wrapper: claim or replay, run
/// once beside the heartbeat, record the outcome (the README's "What a
/// write tool guarantees").
pub(crate) async fn call_write<S, T: WriteTool<S>>(
    tool: &T,
    name: &str,
    cfg: &Resolved,
    shared: &Shared<S>,
    run_id: &str,
    args: Value,
) -> Result<Value, ToolError> {
    let (args, key, fingerprint) =
        operation::<S, T>(name, cfg, shared.namespace.as_deref(), run_id, args)?;
    let store = &*shared.store;
    let (token, claimed_at) = match claim_or_replay::<T::Output>(
        store,
        &key,
        &fingerprint,
        cfg,
        shared.store_timeout,
        name,
    )
    .await?
    {
        Claimed::Acquired(token, at) => (token, at),
        Claimed::Answered(answer) => return answer,
    };
    tracing::debug!(tool = name, key = %key, attempt = token.attempt(), "claim acquired");

    // The context owns the key from here; the hold borrows it back.
    let (lost_tx, lost_rx) = tokio::sync::watch::channel(false);
    let ctx = WriteCtx::new(
        Ctx::new(run_id, shared.state.clone()),
        key,
        token.attempt(),
        lost_rx,
    );
    let site = Site {
        store,
        cfg,
        limit: shared.store_timeout,
        tool: name,
    };
    let hold = Hold::new(site, ctx.idem_key(), token, claimed_at, lost_tx);
    let work = async {
        let outcome = catch_panic(tool.call(args, &ctx)).await;
        record(tool, &hold, outcome).await
    };
    beside(work, hold.heartbeat()).await
}

/// What the claim step ended with.
enum Claimed {
    /// The key is ours: the token, and when the claim was sent.
    Acquired(LeaseToken, Instant),
    /// A recorded outcome replayed, or why the call cannot run.
    Answered(Result<Value, ToolError>),
}

/// Claims `key`, or answers from what it holds: a recorded result or
/// failure is replayed, a running one waits or is refused as in flight.
async fn claim_or_replay<O: DeserializeOwned>(
    store: &dyn DynIdemStore,
    key: &IdemKey,
    fingerprint: &Fingerprint,
    cfg: &Resolved,
    limit: Duration,
    name: &str,
) -> Result<Claimed, ToolError> {
    let store_err = |source: StoreError| ToolError::Store {
        tool: name.to_owned(),
        source,
    };
    let wait_until = match cfg.on_in_flight {
        OnInFlight::Reject => None,
        OnInFlight::Wait(d) => Some(Instant::now() + d),
    };
    let mut backoff = Duration::from_millis(10);
    loop {
        let sent = Instant::now();
        let claim = bounded(limit, "claim", store.dyn_claim(key, fingerprint, cfg.lease))
            .await
            .map_err(|e| {
                tracing::warn!(tool = name, key = %key, error = %e, "claim failed; the tool did not run");
                store_err(e)
            })?;
        let entry = match claim {
            Claim::Acquired(token) => return Ok(Claimed::Acquired(token, sent)),
            Claim::Existing(entry) => entry,
        };
        if *entry.fingerprint() != *fingerprint {
            tracing::warn!(tool = name, key = %key, "key conflict: same key, different arguments");
            return Err(ToolError::KeyConflict {
                tool: name.to_owned(),
                key: key.to_string(),
            });
        }
        let answer = match entry {
            Entry::Done { result, .. } => {
                tracing::info!(tool = name, key = %key, "replayed recorded result");
                replay::<O>(key, &result).map_err(store_err)
            }
            Entry::Failed { error, .. } => {
                tracing::info!(tool = name, key = %key, "replayed recorded failure");
                Err(ToolError::Failed {
                    tool: name.to_owned(),
                    message: error,
                    permanent: true,
                })
            }
            Entry::Running { .. } => {
                let now = Instant::now();
                match wait_until {
                    Some(deadline) if now < deadline => {
                        tracing::debug!(tool = name, key = %key, "in flight; waiting");
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
        };
        return Ok(Claimed::Answered(answer));
    }
}

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
async fn record<S, T: WriteTool<S>>(
    tool: &T,
    hold: &Hold<'_>,
    outcome: Result<Result<T::Output, T::Error>, String>,
) -> Result<Value, ToolError> {
    let (name, key) = (hold.tool(), hold.key());
    let failed = |message: String, permanent: bool| ToolError::Failed {
        tool: name.to_owned(),
        message,
        permanent,
    };
    let outcome = outcome.map_err(|panic| {
        tracing::error!(tool = name, key = %key, panic = %panic, "the tool panicked; its claim lapses with its lease");
        panicked(name, &panic)
    })?;
    let out = match outcome {
        Ok(out) => out,
        Err(e) => {
            let message = hold.storable_error(&e.to_string());
            let permanent = tool.is_permanent(&e);
            if permanent {
                record_failure(hold, &message).await;
            } else {
                release(hold, &message).await;
            }
            return Err(failed(message, permanent));
        }
    };
    let value = match to_json(&out) {
        Ok(value) => value,
        Err(e) => {
            // It ran, but nothing can be replayed: record a permanent
            // failure so that duplicates do not run it again.
            let message = hold.storable_error(&format!("the result could not be serialized: {e}"));
            record_failure(hold, &message).await;
            return Err(failed(message, true));
        }
    };
    let text = value.to_string();
    if text.len() > hold.max_result_bytes() {
        let message = format!(
            "the tool ran, but its result ({} bytes) is larger than max_result_bytes ({}), so it was not recorded and cannot be replayed",
            text.len(),
            hold.max_result_bytes()
        );
        tracing::error!(tool = name, key = %key, bytes = text.len(), limit = hold.max_result_bytes(), "result too large to record; duplicates get an error instead of a replay");
        record_failure(hold, &message).await;
        return Ok(value);
    }
    let ttl = hold.ttl();
    match hold
        .settle("complete", Window::MaxHold, || {
            hold.store().dyn_complete(key, hold.token(), &text, ttl)
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
            record_failure(hold, &message).await;
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

/// Records a permanent failure, retried within `max_hold`; logs what
/// could not be done.
async fn record_failure(hold: &Hold<'_>, message: &str) {
    let (name, key, ttl) = (hold.tool(), hold.key(), hold.ttl());
    match hold
        .settle("fail", Window::MaxHold, || {
            hold.store().dyn_fail(key, hold.token(), message, ttl)
        })
        .await
    {
        Ok(()) => {
            tracing::info!(tool = name, key = %key, error = message, "permanent failure recorded");
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
    match hold
        .settle("release", Window::Lease, || {
            hold.store().dyn_release(key, hold.token())
        })
        .await
    {
        Ok(()) => {
            tracing::info!(tool = name, key = %key, attempt = hold.token().attempt(), error = message, "transient failure; key released for a retry");
        }
        Err(StoreError::LeaseLost) => {
            tracing::warn!(tool = name, key = %key, "lease lost before the key could be released");
        }
        Err(err) => {
            tracing::warn!(tool = name, key = %key, error = %err, "key could not be released; it lapses with its lease");
        }
    }
}

/// Validates a recorded result against the tool's result type and returns it.
fn replay<O: DeserializeOwned>(key: &IdemKey, text: &str) -> Result<Value, StoreError> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        tracing::error!(key = %key, error = %e, "recorded result is not JSON");
        StoreError::corrupt(key.as_str(), format!("recorded result is not JSON: {e}"))
    })?;
    if let Err(e) = O::deserialize(&value) {
        tracing::error!(key = %key, error = %e, "recorded result no longer fits the result type");
        return Err(StoreError::corrupt(
            key.as_str(),
            format!("recorded result no longer fits the tool's result type: {e}"),
        ));
    }
    Ok(value)
}
