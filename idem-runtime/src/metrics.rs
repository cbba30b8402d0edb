//! The metrics idem emits through the [`metrics`](https://docs.rs/metrics)
//! facade (feature `metrics`). The library installs no recorder: install
//! the exporter of your choice (Prometheus, OpenTelemetry, StatsD) and
//! these appear under the names below (a Prometheus exporter writes the
//! dots as underscores). docs/spec.md, "Seeing every decision".
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `gen_ai.execute_tool.duration` | histogram, seconds | `gen_ai.tool.name`, `gen_ai.tool.type`, `idem.outcome`, `error.type` (on errors) | one tool call, as the registry saw it |
//! | `idem.calls` | counter | `gen_ai.tool.name`, `idem.outcome` | calls by outcome (`ran`, `replayed`, `waited`, `in_flight`, `conflict`, `failed`, `lease_lost`, `store_error`, `ran_without_claim`, `rejected`) |
//! | `idem.store.duration` | histogram, seconds | `db.system.name`, `db.operation.name`, `idem.store.result` (`ok`, `error`) | one store operation (`claim`, `complete`, `release`, `fail`, `renew`) |
//! | `idem.lease.renewals` | counter | `gen_ai.tool.name` | leases renewed while a body ran |
//! | `idem.lease.lost` | counter | `gen_ai.tool.name` | bodies told their lease was lost |
//! | `idem.records.too_large` | counter | `gen_ai.tool.name` | results larger than `max_result_bytes`, recorded as failures |

use std::time::{Duration, Instant};

use metrics::{Label, counter, histogram};

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
}

/// One call: its duration (from `started`) and a count by outcome.
pub(crate) fn call(
    tool: &str,
    outcome: &'static str,
    error: Option<&ToolError>,
    started: Option<Instant>,
) {
    let tool = tool.to_owned();
    if let Some(started) = started {
        let mut labels = vec![
            Label::new("gen_ai.tool.name", tool.clone()),
            Label::from_static_parts("gen_ai.tool.type", "function"),
            Label::from_static_parts("idem.outcome", outcome),
        ];
        if let Some(error) = error {
            labels.push(Label::from_static_parts("error.type", error.kind()));
        }
        histogram!(names::EXECUTE_TOOL_DURATION, labels).record(started.elapsed().as_secs_f64());
    }
    counter!(names::CALLS, "gen_ai.tool.name" => tool, "idem.outcome" => outcome).increment(1);
}

/// One store operation's duration.
pub(crate) fn store_operation(backend: &'static str, op: &'static str, ok: bool, took: Duration) {
    let result = if ok { "ok" } else { "error" };
    histogram!(
        names::STORE_DURATION,
        "db.system.name" => backend,
        "db.operation.name" => op,
        "idem.store.result" => result,
    )
    .record(took.as_secs_f64());
}

/// A lease renewed.
pub(crate) fn lease_renewed(tool: &str) {
    counter!(names::LEASE_RENEWALS, "gen_ai.tool.name" => tool.to_owned()).increment(1);
}

/// A body told its lease is lost.
pub(crate) fn lease_lost(tool: &str) {
    counter!(names::LEASE_LOST, "gen_ai.tool.name" => tool.to_owned()).increment(1);
}

/// A result too large to record.
pub(crate) fn record_too_large(tool: &str) {
    counter!(names::RECORDS_TOO_LARGE, "gen_ai.tool.name" => tool.to_owned()).increment(1);
}
