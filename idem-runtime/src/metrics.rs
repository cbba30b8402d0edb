//! The metrics idem emits through the [`metrics`](https://docs.rs/metrics)
//! facade (feature `metrics`). The library installs no recorder: install
//! the exporter of your choice (Prometheus, OpenTelemetry, StatsD) and
//! these appear under the names below (a Prometheus exporter writes the
//! dots as underscores). docs/spec.md, "Seeing every decision".
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `gen_ai.execute_tool.duration` | histogram, seconds | `gen_ai.tool.name`, `gen_ai.tool.type`, `idem.outcome`, `error.type` (on errors) | one tool call, as the registry saw it |
//! | `idem.calls` | counter | `gen_ai.tool.name`, `idem.outcome` | calls by outcome (`ran`, `replayed`, `waited`, `in_flight`, `conflict`, `failed`, `lease_lost`, `store_error`, `ran_without_claim`, `verified`, `unknown`, `awaiting_approval`, `approved`, `denied`, `rejected`) |
//! | `idem.store.duration` | histogram, seconds | `db.system.name`, `db.operation.name`, `idem.store.result` (`ok`, `error`) | one store operation (`claim`; `settle_done`, `settle_failed`, `settle_released`, `settle_unknown` or `settle_awaiting`, a settle by its outcome; `renew`) |
//! | `idem.lease.renewals` | counter | `gen_ai.tool.name` | leases renewed while a body ran |
//! | `idem.lease.lost` | counter | `gen_ai.tool.name` | bodies told their lease was lost |
//! | `idem.records.too_large` | counter | `gen_ai.tool.name` | results larger than `max_result_bytes`, recorded as failures |
//! | `idem.notify.events` | counter | `idem.event` (`approval.requested`, ..), `idem.delivery` (`delivered`, `dropped`, `given_up`) | webhooks (feature `notify`): sent, dropped from a full queue, given up after their retries |

use std::time::{Duration, Instant};

use metrics::{Key, Label, Level, Metadata};

use crate::error::ToolError;

/// The names, once.
pub mod names {
    /// Histogram of one tool call's duration, in seconds.
    pub const EXECUTE_TOOL_DURATION: &str = "gen_ai.execute_tool.duration";
    /// Counter of calls by tool and outcome.
    pub const CALLS: &str = "idem.calls";
    /// Histogram of one store operation's duration, in seconds.
    pub const STORE_DURATION: &str = "idem.store.duration";
    /// Counter of lease renewals.
    pub const LEASE_RENEWALS: &str = "idem.lease.renewals";
    /// Counter of leases lost while a body ran.
    pub const LEASE_LOST: &str = "idem.lease.lost";
    /// Counter of results too large to record.
    pub const RECORDS_TOO_LARGE: &str = "idem.records.too_large";
    /// Counter of webhooks by event and how their delivery ended.
    pub const NOTIFY_EVENTS: &str = "idem.notify.events";
}

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Every `idem.outcome`.
const OUTCOMES: [&str; 12] = [
    "ran",
    "replayed",
    "waited",
    "in_flight",
    "conflict",
    "failed",
    "lease_lost",
    "store_error",
    "ran_without_claim",
    "verified",
    "unknown",
    "rejected",
];

/// The outcome and error kind pairs a call of a registered tool can end
/// with.
const ENDINGS: [(&str, Option<&str>); 19] = [
    ("ran", None),
    ("replayed", None),
    ("replayed", Some("failed")),
    ("waited", None),
    ("waited", Some("failed")),
    ("in_flight", Some("in_flight")),
    ("conflict", Some("key_conflict")),
    ("failed", Some("failed")),
    ("lease_lost", Some("lease_lost")),
    ("store_error", Some("store")),
    ("ran_without_claim", None),
    ("ran_without_claim", Some("failed")),
    ("verified", None),
    ("unknown", Some("outcome_unknown")),
    ("rejected", Some("invalid_args")),
    ("rejected", Some("invalid_run_id")),
    ("rejected", Some("invalid_operation_key")),
    ("rejected", Some("invalid_tenant")),
    ("rejected", Some("tenant_required")),
];

/// One tool's metric keys, made when the registry is built, so that a
/// call hashes and allocates nothing to record its metrics.
#[derive(Debug)]
pub(crate) struct ToolKeys {
    /// `idem.calls`, by [`OUTCOMES`].
    calls: Vec<Key>,
    /// `gen_ai.execute_tool.duration`, by [`ENDINGS`].
    durations: Vec<Key>,
    renewals: Key,
    lost: Key,
    too_large: Key,
}

impl ToolKeys {
    pub(crate) fn new(tool: &str) -> ToolKeys {
        let named = |name: &'static str| Key::from_parts(name, vec![tool_label(tool)]);
        ToolKeys {
            calls: OUTCOMES.iter().map(|o| calls_key(tool, o)).collect(),
            durations: ENDINGS
                .iter()
                .map(|(o, e)| duration_key(tool, o, *e))
                .collect(),
            renewals: named(names::LEASE_RENEWALS),
            lost: named(names::LEASE_LOST),
            too_large: named(names::RECORDS_TOO_LARGE),
        }
    }
}

fn tool_label(tool: &str) -> Label {
    Label::new("gen_ai.tool.name", tool.to_owned())
}

fn calls_key(tool: &str, outcome: &'static str) -> Key {
    let labels = vec![
        tool_label(tool),
        Label::from_static_parts("idem.outcome", outcome),
    ];
    Key::from_parts(names::CALLS, labels)
}

fn duration_key(tool: &str, outcome: &'static str, error: Option<&'static str>) -> Key {
    let mut labels = vec![
        tool_label(tool),
        Label::from_static_parts("gen_ai.tool.type", "function"),
        Label::from_static_parts("idem.outcome", outcome),
    ];
    if let Some(error) = error {
        labels.push(Label::from_static_parts("error.type", error));
    }
    Key::from_parts(names::EXECUTE_TOOL_DURATION, labels)
}

/// One call: its duration (from `started`) and a count by outcome. `keys`
/// are the tool's (none for a tool that is not registered: its keys are
/// made for the call).
pub(crate) fn call(
    keys: Option<&ToolKeys>,
    tool: &str,
    outcome: &'static str,
    error: Option<&ToolError>,
    started: Option<Instant>,
) {
    let error = error.map(ToolError::kind);
    let calls = keys.and_then(|k| {
        let i = OUTCOMES.iter().position(|o| *o == outcome)?;
        k.calls.get(i)
    });
    let duration = keys.and_then(|k| {
        let i = ENDINGS.iter().position(|e| *e == (outcome, error))?;
        k.durations.get(i)
    });
    metrics::with_recorder(|recorder| {
        if let Some(started) = started {
            let seconds = started.elapsed().as_secs_f64();
            match duration {
                Some(key) => recorder.register_histogram(key, &METADATA).record(seconds),
                None => recorder
                    .register_histogram(&duration_key(tool, outcome, error), &METADATA)
                    .record(seconds),
            }
        }
        match calls {
            Some(key) => recorder.register_counter(key, &METADATA).increment(1),
            None => recorder
                .register_counter(&calls_key(tool, outcome), &METADATA)
                .increment(1),
        }
    });
}

/// A store's metric keys: `idem.store.duration` by operation and result,
/// made when the registry is built.
#[derive(Debug)]
pub(crate) struct StoreKeys {
    /// By [`STORE_OPERATIONS`], then ok / error.
    durations: Vec<[Key; 2]>,
}

/// The store operations a call makes.
const STORE_OPERATIONS: [&str; 7] = [
    "claim",
    "settle_done",
    "settle_released",
    "settle_failed",
    "settle_unknown",
    "settle_awaiting",
    "renew",
];

impl StoreKeys {
    pub(crate) fn new(backend: &'static str) -> StoreKeys {
        let key = |op: &'static str, result: &'static str| {
            let labels = vec![
                Label::from_static_parts("db.system.name", backend),
                Label::from_static_parts("db.operation.name", op),
                Label::from_static_parts("idem.store.result", result),
            ];
            Key::from_parts(names::STORE_DURATION, labels)
        };
        StoreKeys {
            durations: STORE_OPERATIONS
                .iter()
                .map(|op| [key(op, "ok"), key(op, "error")])
                .collect(),
        }
    }

    /// One store operation's duration.
    pub(crate) fn operation(&self, op: &'static str, ok: bool, took: Duration) {
        let Some(i) = STORE_OPERATIONS.iter().position(|o| *o == op) else {
            return;
        };
        let key = &self.durations[i][usize::from(!ok)];
        metrics::with_recorder(|recorder| {
            recorder
                .register_histogram(key, &METADATA)
                .record(took.as_secs_f64());
        });
    }
}

/// A lease renewed.
pub(crate) fn lease_renewed(keys: &ToolKeys) {
    metrics::with_recorder(|r| r.register_counter(&keys.renewals, &METADATA).increment(1));
}

/// A body told its lease is lost.
pub(crate) fn lease_lost(keys: &ToolKeys) {
    metrics::with_recorder(|r| r.register_counter(&keys.lost, &METADATA).increment(1));
}

/// A result too large to record.
pub(crate) fn record_too_large(keys: &ToolKeys) {
    metrics::with_recorder(|r| r.register_counter(&keys.too_large, &METADATA).increment(1));
}

/// A webhook of event `event` that was `delivery` (`delivered`,
/// `dropped`, `given_up`).
#[cfg(feature = "notify")]
pub(crate) fn notified(event: &'static str, delivery: &'static str) {
    let labels = vec![
        Label::from_static_parts("idem.event", event),
        Label::from_static_parts("idem.delivery", delivery),
    ];
    let key = Key::from_parts(names::NOTIFY_EVENTS, labels);
    metrics::with_recorder(|r| r.register_counter(&key, &METADATA).increment(1));
}
