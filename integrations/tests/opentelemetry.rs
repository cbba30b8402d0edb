//! The call spans as OpenTelemetry sees them: exported by
//! `tracing-opentelemetry` into an OpenTelemetry SDK (an in-memory
//! exporter), each call is a span named `execute_tool {tool}` of kind
//! internal with the GenAI attributes and idem's decision, an error is an
//! error status, and each store operation is a client span beneath it.

#[path = "../../tests/support/shop.rs"]
mod shop;

use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|KeyValue { key: k, .. }| k.as_str() == key)
        .map(|kv| &kv.value)
}

fn string(span: &SpanData, key: &str) -> Option<String> {
    attribute(span, key).map(Value::to_string)
}

#[tokio::test]
async fn call_spans_export_as_opentelemetry_genai_spans() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("idem-test"));
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let registry = shop::registry();
    let order = json!({"order_id": "o-1", "amount": 4200});
    registry
        .call("r", "charge_card", order.clone())
        .await
        .expect("ran");
    registry
        .call("r", "charge_card", order)
        .await
        .expect("replayed");
    let bad = json!({"order_id": "o-2", "amount": "lots"});
    registry
        .call("r", "charge_card", bad)
        .await
        .expect_err("rejected");
    provider.force_flush().expect("flush");
    assert_eq!(shop::executions(&registry), 1);

    let spans = exporter.get_finished_spans().expect("spans");
    let calls: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.name == "execute_tool charge_card")
        .collect();
    assert_eq!(
        calls.len(),
        3,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let mut calls = calls;
    calls.sort_by_key(|s| s.start_time);
    let outcomes: Vec<Option<String>> = calls.iter().map(|s| string(s, "idem.outcome")).collect();
    let expected = ["ran", "replayed", "rejected"].map(|o| Some(o.to_owned()));
    assert_eq!(outcomes, expected);
    for call in &calls {
        assert_eq!(call.span_kind, SpanKind::Internal);
        assert_eq!(
            string(call, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
        assert_eq!(
            string(call, "gen_ai.tool.name").as_deref(),
            Some("charge_card")
        );
        assert_eq!(
            string(call, "gen_ai.tool.type").as_deref(),
            Some("function")
        );
    }
    let ran = calls[0];
    assert!(string(ran, "idem.key").is_some_and(|k| k.starts_with("idem:")));
    assert_eq!(ran.status, Status::Unset);
    let rejected = calls[2];
    assert_eq!(
        string(rejected, "error.type").as_deref(),
        Some("invalid_args")
    );
    assert!(
        matches!(rejected.status, Status::Error { .. }),
        "{:?}",
        rejected.status
    );

    // The store operations of the call that ran, beneath it.
    let ops: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.parent_span_id == ran.span_context.span_id())
        .collect();
    let names: Vec<&str> = ops.iter().map(|s| &*s.name).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names.contains(&"claim") && names.contains(&"settle_done"),
        "{names:?}"
    );
    for op in ops {
        assert_eq!(op.span_kind, SpanKind::Client);
        assert_eq!(string(op, "db.system.name").as_deref(), Some("memory"));
        assert_eq!(op.span_context.trace_id(), ran.span_context.trace_id());
    }
}
