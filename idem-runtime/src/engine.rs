//! The idempotent wrapper: claim, run once with a heartbeat, record, replay.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::time::Instant;

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
}

/// Turns the model's arguments into `A`, naming the field that does not fit.
///
/// `null`, `""` and a string holding a JSON object (as OpenAI sends
/// arguments) are accepted.
pub(crate) fn parse_args<A: DeserializeOwned>(tool: &str, args: Value) -> Result<A, ToolError> {
    let invalid = |message: String| ToolError::InvalidArgs {
        tool: tool.to_owned(),
        message,
    };
    let args = match args {
        Value::Null => Value::Object(Map::new()),
        Value::String(s) if s.trim().is_empty() => Value::Object(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return Err(invalid(
                    "expected a JSON object of named arguments, got a string".into(),
                ));
            }
        },
        v @ Value::Object(_) => v,
        other => {
            return Err(invalid(format!(
                "expected a JSON object of named arguments, got {}",
                json_kind(&other)
            )));
        }
    };
    let mut args = args;
    integral_floats_to_integers(&mut args);
    // Path tracking allocates for every field: only an error pays for it.
    if let Ok(parsed) = A::deserialize(&args) {
        return Ok(parsed);
    }
    serde_path_to_error::deserialize(&args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            invalid(inner.to_string())
        } else {
            invalid(format!("field `{path}`: {inner}"))
        }
    })
}

/// Models write `1.0` where an integer is meant. An integral float is the
/// same number as the integer, so make it one: integer parameters accept
/// it, and float parameters still get the same value.
fn integral_floats_to_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.007_199_254_740_992e15
            {
                // |f| < 2^53: exact as an i64.
                *n = serde_json::Number::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_to_integers),
        _ => {}
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
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
    let args: T::Args = parse_args(name, args)?;
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

/// Bounds a store operation by the registry's store timeout.
async fn bounded<T>(
    limit: Duration,
    op: &'static str,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let mut fut = pin!(fut);
    // An in-process store answers at once: no timer (or clock read) then.
    if let Some(result) = poll_once(fut.as_mut()).await {
        return result;
    }
    match tokio::time::timeout(limit, fut).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::Timeout { op, after: limit }),
    }
}

/// Runs `fut`, turning a panic in it into `Err` with the panic's message,
/// so that a buggy tool fails its call instead of unwinding through the
/// caller (an MCP server would never answer the request).
async fn catch_panic<F: Future>(fut: F) -> Result<F::Output, String> {
    let mut fut = pin!(fut);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(std::task::Poll::Ready(out)) => std::task::Poll::Ready(Ok(out)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(payload) => std::task::Poll::Ready(Err(payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".to_owned()))),
        }
    })
    .await
}

/// The error of a call whose body panicked.
fn panicked(name: &str, panic: &str) -> ToolError {
    ToolError::Failed {
        tool: name.to_owned(),
        message: format!("the tool panicked ({panic}); whether it took effect is unknown"),
        permanent: false,
    }
}

/// Polls `fut` once: its output if it is ready.
async fn poll_once<F: Future>(mut fut: std::pin::Pin<&mut F>) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match fut.as_mut().poll(cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        })
    })
    .await
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
    let args: T::Args = parse_args(name, args)?;
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

/// Runs a write tool through the idempotent wrapper (CONTRACT.md §5).
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
    let limit = shared.store_timeout;
    let store_err = |source: StoreError| ToolError::Store {
        tool: name.to_owned(),
        source,
    };

    // 1. Claim, or replay what the key holds.
    let wait_until = match cfg.on_in_flight {
        OnInFlight::Reject => None,
        OnInFlight::Wait(d) => Some(Instant::now() + d),
    };
    let mut backoff = Duration::from_millis(10);
    let token = loop {
        let claim = bounded(limit, "claim", store.dyn_claim(&key, &fingerprint, cfg.lease))
            .await
            .map_err(|e| {
                tracing::warn!(tool = name, key = %key, error = %e, "claim failed; the tool did not run");
                store_err(e)
            })?;
        let entry = match claim {
            Claim::Acquired(token) => break token,
            Claim::Existing(entry) => entry,
        };
        if *entry.fingerprint() != fingerprint {
            tracing::warn!(tool = name, key = %key, "key conflict: same key, different arguments");
            return Err(ToolError::KeyConflict {
                tool: name.to_owned(),
                key: key.into_string(),
            });
        }
        match entry {
            Entry::Done { result, .. } => {
                tracing::info!(tool = name, key = %key, "replayed recorded result");
                return replay::<T::Output>(&key, &result).map_err(store_err);
            }
            Entry::Failed { error, .. } => {
                tracing::info!(tool = name, key = %key, "replayed recorded failure");
                return Err(ToolError::Failed {
                    tool: name.to_owned(),
                    message: error,
                    permanent: true,
                });
            }
            Entry::Running { .. } => {
                let now = Instant::now();
                match wait_until {
                    Some(deadline) if now < deadline => {
                        tracing::debug!(tool = name, key = %key, "in flight; waiting");
                        tokio::time::sleep(backoff.min(deadline - now)).await;
                        backoff = (backoff * 2).min(Duration::from_millis(500));
                    }
                    _ => {
                        tracing::info!(tool = name, key = %key, "in flight; duplicate rejected");
                        return Err(ToolError::InFlight {
                            tool: name.to_owned(),
                            key: key.into_string(),
                        });
                    }
                }
            }
        }
    };
    tracing::debug!(tool = name, key = %key, attempt = token.attempt(), "claim acquired");

    // 2. Run the body once, renewing the lease while it runs.
    // The context owns the key from here; the wrapper borrows it back.
    let ctx = WriteCtx::new(Ctx::new(run_id, shared.state.clone()), key, token.attempt());
    let key = ctx.idem_key();
    let outcome = with_heartbeat(
        catch_panic(tool.call(args, &ctx)),
        store,
        key,
        &token,
        cfg,
        limit,
        name,
    )
    .await;
    // A panic is handled as a crash would be: nothing is recorded or
    // released, so the claim lapses with its lease and the next claim counts
    // an attempt; the body may or may not have taken effect.
    let outcome = outcome.map_err(|panic| {
        tracing::error!(tool = name, key = %key, panic = %panic, "the tool panicked; its claim lapses with its lease");
        panicked(name, &panic)
    })?;

    // 3. Record the outcome.
    match outcome {
        Ok(out) => match to_json(&out) {
            Ok(value) => {
                let text = value.to_string();
                match bounded(
                    limit,
                    "complete",
                    store.dyn_complete(key, &token, &text, cfg.ttl),
                )
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
                    Err(e) => {
                        // The operation happened: hand its result back. A retry
                        // after the lease reuses the same key downstream.
                        tracing::error!(tool = name, key = %key, error = %e, "the tool ran but its result could not be recorded");
                        Ok(value)
                    }
                }
            }
            Err(e) => {
                // It ran, but nothing can be replayed: record a permanent
                // failure so that duplicates do not run it again.
                let message = format!("the result could not be serialized: {e}");
                record_failure(store, key, &token, &message, cfg, limit, name).await;
                Err(ToolError::Failed {
                    tool: name.to_owned(),
                    message,
                    permanent: true,
                })
            }
        },
        Err(e) => {
            let message = e.to_string();
            let permanent = tool.is_permanent(&e);
            if permanent {
                record_failure(store, key, &token, &message, cfg, limit, name).await;
            } else {
                match bounded(limit, "release", store.dyn_release(key, &token)).await {
                    Ok(()) => {
                        tracing::info!(tool = name, key = %key, attempt = token.attempt(), error = %message, "transient failure; key released for a retry");
                    }
                    Err(StoreError::LeaseLost) => {
                        tracing::warn!(tool = name, key = %key, "lease lost before the key could be released");
                    }
                    Err(err) => {
                        tracing::warn!(tool = name, key = %key, error = %err, "key could not be released; it lapses with its lease");
                    }
                }
            }
            Err(ToolError::Failed {
                tool: name.to_owned(),
                message,
                permanent,
            })
        }
    }
}

async fn record_failure(
    store: &dyn DynIdemStore,
    key: &IdemKey,
    token: &LeaseToken,
    message: &str,
    cfg: &Resolved,
    limit: Duration,
    name: &str,
) {
    match bounded(limit, "fail", store.dyn_fail(key, token, message, cfg.ttl)).await {
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

/// Drives `body` to completion, renewing the lease every third of it until
/// `max_hold` is reached or the lease is lost.
async fn with_heartbeat<F: Future>(
    body: F,
    store: &dyn DynIdemStore,
    key: &IdemKey,
    token: &LeaseToken,
    cfg: &Resolved,
    limit: Duration,
    name: &str,
) -> F::Output {
    let mut body = pin!(body);
    // A body that finishes at its first poll needs no heartbeat.
    if let Some(out) = poll_once(body.as_mut()).await {
        return out;
    }
    let started = Instant::now();
    let period = cfg.lease / 3;
    loop {
        if let Ok(out) = tokio::time::timeout(period, body.as_mut()).await {
            return out;
        }
        let remaining = cfg.max_hold.saturating_sub(started.elapsed());
        if remaining.is_zero() {
            tracing::warn!(tool = name, key = %key, max_hold = ?cfg.max_hold, "max_hold reached: the lease is no longer renewed and will lapse");
            return body.await;
        }
        match bounded(
            limit,
            "renew",
            store.dyn_renew(key, token, cfg.lease.min(remaining)),
        )
        .await
        {
            Ok(()) => {}
            Err(StoreError::LeaseLost) => {
                tracing::warn!(tool = name, key = %key, "lease lost while running: another worker took the key over");
                return body.await;
            }
            Err(e) => {
                tracing::warn!(tool = name, key = %key, error = %e, "lease renewal failed; will retry");
            }
        }
    }
}
