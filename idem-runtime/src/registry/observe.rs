//! Seeing every decision: one span per call, after OpenTelemetry's GenAI
//! conventions for tool execution, and with feature `metrics` the call's
//! duration and outcome through the `metrics` facade (docs/spec.md,
//! "Seeing every decision"). The library installs no subscriber and no
//! recorder: with none, a span is a disabled handle and a metric a no-op.

use serde_json::Value;

use super::context::CallContext;
use crate::engine::{CallTrace, How};
use crate::error::ToolError;
use crate::key::ScopeKind;

/// The span of one call: `execute_tool {gen_ai.tool.name}` (as
/// `otel.name`, which `tracing-opentelemetry` takes for the span's name),
/// its GenAI attributes, and idem's own, filled in as the call goes.
pub(super) fn call_span(name: &str, context: &CallContext<'_>) -> tracing::Span {
    use tracing::field::Empty;
    let span = tracing::info_span!(
        target: "idem",
        "execute_tool",
        otel.name = Empty,
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.type = "function",
        gen_ai.tool.call.id = context.tool_call_id,
        error.type = Empty,
        idem.outcome = Empty,
        idem.attempt = Empty,
        idem.key = Empty,
        idem.scope = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("execute_tool {name}"));
    }
    span
}

/// Records a write tool's scope on the call's span (`idem.scope`).
pub(super) fn scope(trace: &CallTrace<'_>, scope: Option<ScopeKind>) {
    let scope = match scope {
        Some(ScopeKind::Run) => "run",
        Some(ScopeKind::Global) => "global",
        None => return,
    };
    trace.span().record("idem.scope", scope);
}

/// What a call came to, as `idem.outcome` names it.
pub(crate) fn outcome(result: &Result<Value, ToolError>, how: How) -> &'static str {
    match (result, how) {
        (_, How::RanWithoutClaim) => "ran_without_claim",
        (Ok(_) | Err(ToolError::Failed { .. }), How::Replayed) => "replayed",
        (Ok(_) | Err(ToolError::Failed { .. }), How::Waited) => "waited",
        (Ok(_), How::Verified) => "verified",
        (Ok(_) | Err(ToolError::Failed { .. }), How::RanApproved) => "approved",
        (Err(ToolError::Denied { .. }), _) => "denied",
        (Ok(_), _) => "ran",
        (Err(ToolError::Failed { .. }), _) => "failed",
        (Err(ToolError::InFlight { .. }), _) => "in_flight",
        (Err(ToolError::KeyConflict { .. }), _) => "conflict",
        (Err(ToolError::LeaseLost { .. }), _) => "lease_lost",
        (Err(ToolError::Store { .. }), _) => "store_error",
        (Err(ToolError::OutcomeUnknown { .. }), _) => "unknown",
        (Err(ToolError::ApprovalRequired { .. }), _) => "awaiting_approval",
        // Refused before anything ran: bad arguments, an unknown tool, no
        // run id or tenant.
        (Err(_), _) => "rejected",
    }
}

/// When a call started, for its duration; only read with feature `metrics`.
pub(super) fn start() -> Option<std::time::Instant> {
    cfg!(feature = "metrics").then(std::time::Instant::now)
}

/// Ends a call's observation: its outcome and error on the span, and with
/// feature `metrics` its duration and a count by outcome.
pub(super) fn finish(
    trace: &CallTrace<'_>,
    name: &str,
    result: &Result<Value, ToolError>,
    started: Option<std::time::Instant>,
) {
    let outcome = outcome(result, trace.how());
    let span = trace.span();
    if !span.is_disabled() {
        span.record("idem.outcome", outcome);
        if let Err(e) = result {
            span.record("error.type", e.kind());
            span.record("otel.status_code", "ERROR");
        }
    }
    #[cfg(feature = "metrics")]
    crate::metrics::call(
        trace.metrics(),
        name,
        outcome,
        result.as_ref().err(),
        started,
    );
    #[cfg(not(feature = "metrics"))]
    let _ = (name, started);
}
