//! Seeing every decision (docs/spec.md): every call is one `execute_tool`
//! span with OpenTelemetry's GenAI attributes and idem's own, store
//! operations are its child spans, and the metrics count every outcome.
//! Spans are captured by a `tracing` layer, metrics by a debugging
//! recorder, both for this thread only; the faults (a store that does not
//! answer, a lease lost) are made for real, by a proxy in front of Redis.
//! Alone in its own test binary: tracing caches per-callsite interest
//! process-wide, which tests without a subscriber would race.
#![cfg(all(feature = "metrics", feature = "redis", feature = "test-util"))]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem::metrics::names;
use idem::prelude::*;
use idem::testing::Proxy;
use idem::{RedisOptions, RedisStore};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use serde_json::json;
use tracing::span::{Attributes, Id, Record};
use tracing::{Subscriber, field};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

// --- Capturing spans and metrics --------------------------------------------

/// A span as the layer saw it: name, parent, fields as text.
#[derive(Debug, Clone)]
struct Seen {
    id: u64,
    name: &'static str,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
    closed: bool,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Seen>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl field::Visit for Fields<'_> {
    fn record_str(&mut self, field: &field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = attrs.parent().cloned().or_else(|| {
            attrs
                .is_contextual()
                .then(|| ctx.current_span().id().cloned())?
        });
        self.0.lock().expect("lock").push(Seen {
            id: id.into_u64(),
            name: attrs.metadata().name(),
            parent: parent.map(|p| p.into_u64()),
            fields,
            closed: false,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        self.with_open(id, |seen| values.record(&mut Fields(&mut seen.fields)));
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        self.with_open(&id, |seen| seen.closed = true);
    }
}

impl Spans {
    /// Calls `f` on the open span `id` (ids are reused once spans close).
    fn with_open(&self, id: &Id, f: impl FnOnce(&mut Seen)) {
        let mut spans = self.0.lock().expect("lock");
        let open = spans
            .iter_mut()
            .rev()
            .find(|s| s.id == id.into_u64() && !s.closed);
        if let Some(seen) = open {
            f(seen);
        }
    }

    /// Captures this thread's spans while the guard lives.
    fn capture() -> (Spans, tracing::subscriber::DefaultGuard) {
        let spans = Spans::default();
        let subscriber = tracing_subscriber::registry().with(spans.clone());
        (spans, tracing::subscriber::set_default(subscriber))
    }

    /// The `execute_tool` spans, oldest first, taken out.
    fn calls(&self) -> Vec<Seen> {
        let spans = self.0.lock().expect("lock");
        spans
            .iter()
            .filter(|s| s.name == "execute_tool")
            .cloned()
            .collect()
    }

    /// The store spans under call span `parent`.
    fn store_ops(&self, parent: &Seen) -> Vec<Seen> {
        let spans = self.0.lock().expect("lock");
        let start = spans
            .iter()
            .position(|s| s.id == parent.id && s.fields == parent.fields);
        spans[start.unwrap_or(0)..]
            .iter()
            .filter(|s| s.name == "idem.store" && s.parent == Some(parent.id))
            .cloned()
            .collect()
    }

    fn clear(&self) {
        self.0.lock().expect("lock").clear();
    }
}

/// The metrics recorded so far (taking them resets the recorder's).
struct Metrics(Vec<(metrics::Key, DebugValue)>);

impl Metrics {
    fn take(snapshotter: &Snapshotter) -> Metrics {
        let all = snapshotter.snapshot().into_vec();
        Metrics(
            all.into_iter()
                .map(|(key, _, _, value)| (key.key().clone(), value))
                .collect(),
        )
    }

    /// The value of counter `name` with these labels, summed over the others.
    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.matching(name, labels)
            .map(|value| match value {
                DebugValue::Counter(n) => *n,
                other => panic!("{name} is not a counter: {other:?}"),
            })
            .sum()
    }

    /// How many calls of `tool` came to `outcome`.
    fn calls(&self, tool: &str, outcome: &str) -> u64 {
        self.counter(
            names::CALLS,
            &[("gen_ai.tool.name", tool), ("idem.outcome", outcome)],
        )
    }

    /// How many values histogram `name` got with these labels.
    fn observations(&self, name: &str, labels: &[(&str, &str)]) -> usize {
        self.matching(name, labels)
            .map(|value| match value {
                DebugValue::Histogram(values) => values.len(),
                other => panic!("{name} is not a histogram: {other:?}"),
            })
            .sum()
    }

    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a DebugValue> + 'a {
        self.0
            .iter()
            .filter(move |(key, _)| key.name() == name && has_labels(key, labels))
            .map(|(_, value)| value)
    }
}

fn has_labels(key: &metrics::Key, wanted: &[(&str, &str)]) -> bool {
    wanted
        .iter()
        .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
}

/// What every call span carries, and its outcome.
fn assert_call(span: &Seen, tool: &str, outcome: &str) {
    let f = |name| span.field(name);
    assert_eq!(
        f("otel.name"),
        Some(&*format!("execute_tool {tool}")),
        "{span:?}"
    );
    assert_eq!(f("gen_ai.operation.name"), Some("execute_tool"), "{span:?}");
    assert_eq!(f("gen_ai.tool.name"), Some(tool), "{span:?}");
    assert_eq!(f("gen_ai.tool.type"), Some("function"), "{span:?}");
    assert_eq!(f("idem.outcome"), Some(outcome), "{span:?}");
}

// --- Tools --------------------------------------------------------------------

/// Pay an order; an amount of 0 is declined.
#[write_tool(key = [order], max_result_bytes = 1024)]
async fn pay(order: String, amount: u64, ctx: &WriteCtx) -> Result<String, String> {
    let _ = ctx;
    match amount {
        0 => Err("declined".into()),
        // Too large to record.
        1 => Ok("x".repeat(2000)),
        n => Ok(format!("paid {n} for {order}")),
    }
}

/// Ship, slowly; a duplicate is told it is in flight.
#[write_tool]
async fn ship(n: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(n)
}

/// Ship, slowly; a duplicate waits for the result.
#[write_tool(on_in_flight = "wait(10s)")]
async fn ship_waiting(n: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(n)
}

/// Look an order up.
#[read_tool]
async fn look(order: String) -> Result<String, String> {
    Ok(order)
}

#[tokio::test]
async fn every_outcome_of_a_healthy_store_is_a_span_and_a_count() {
    let (spans, _tracing) = Spans::capture();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let registry = Registry::builder(())
        .tool(pay)
        .tool(ship)
        .tool(ship_waiting)
        .tool(look)
        .build()
        .expect("registry");
    let call = |tool: &'static str, args: serde_json::Value| registry.call("r", tool, args);

    call("pay", json!({"order": "o-1", "amount": 100}))
        .await
        .expect("ran");
    call("pay", json!({"order": "o-1", "amount": 100}))
        .await
        .expect("replayed");
    call("pay", json!({"order": "o-1", "amount": 200}))
        .await
        .expect_err("conflict");
    call("pay", json!({"order": "o-2", "amount": 0}))
        .await
        .expect_err("failed");
    call("pay", json!({"order": "o-3", "amount": "lots"}))
        .await
        .expect_err("rejected");
    call("pay", json!({"order": "o-4", "amount": 1}))
        .await
        .expect("too large");
    let (a, b) = tokio::join!(call("ship", json!({"n": 1})), call("ship", json!({"n": 1})));
    assert!(a.is_ok() != b.is_ok(), "one ran, one was in flight");
    let (a, b) = tokio::join!(
        call("ship_waiting", json!({"n": 1})),
        call("ship_waiting", json!({"n": 1}))
    );
    assert_eq!(a.expect("ran"), b.expect("waited"));
    call("look", json!({"order": "o-1"})).await.expect("read");
    let tool_call = json!({"id": "call_7", "type": "function",
                           "function": {"name": "look", "arguments": "{\"order\": \"o-9\"}"}});
    registry
        .reply(Provider::OpenAiChat, "r", &tool_call)
        .await
        .expect("a tool call");

    let calls = spans.calls();
    let outcomes: Vec<&str> = calls
        .iter()
        .filter_map(|s| s.field("idem.outcome"))
        .collect();
    assert_eq!(
        outcomes,
        [
            "ran",
            "replayed",
            "conflict",
            "failed",
            "rejected",
            "ran",
            "ran",
            "in_flight",
            "ran",
            "waited",
            "ran",
            "ran"
        ]
    );
    let tools = ["pay"; 6]
        .into_iter()
        .chain(["ship"; 2])
        .chain(["ship_waiting"; 2]);
    for (span, tool) in calls.iter().zip(tools.chain(["look"; 2])) {
        assert_call(span, tool, span.field("idem.outcome").unwrap_or_default());
    }

    // A write that ran: its key, scope and attempt, and its store
    // operations as child spans.
    let ran = &calls[0];
    assert!(
        ran.field("idem.key")
            .is_some_and(|k| k.starts_with("idem:")),
        "{ran:?}"
    );
    assert_eq!(ran.field("idem.scope"), Some("run"));
    assert_eq!(ran.field("idem.attempt"), Some("0"));
    assert_eq!(ran.field("error.type"), None);
    let ops: Vec<String> = spans
        .store_ops(ran)
        .iter()
        .filter_map(|s| s.field("db.operation.name").map(str::to_owned))
        .collect();
    assert_eq!(ops, ["claim", "settle_done"]);
    assert!(
        spans
            .store_ops(ran)
            .iter()
            .all(|s| s.field("db.system.name") == Some("memory"))
    );
    // Errors say their kind.
    assert_eq!(calls[2].field("error.type"), Some("key_conflict"));
    assert_eq!(calls[3].field("error.type"), Some("failed"));
    assert_eq!(calls[4].field("error.type"), Some("invalid_args"));
    assert_eq!(calls[4].field("otel.status_code"), Some("ERROR"));
    // A read tool: no key, no scope, no store; the provider's call id.
    assert_eq!(calls[10].field("idem.key"), None);
    assert_eq!(calls[10].field("idem.scope"), None);
    assert!(spans.store_ops(&calls[10]).is_empty());
    assert_eq!(calls[11].field("gen_ai.tool.call.id"), Some("call_7"));

    // The metrics count the same.
    let metrics = Metrics::take(&snapshotter);
    assert_eq!(metrics.calls("pay", "ran"), 2);
    assert_eq!(metrics.calls("pay", "replayed"), 1);
    assert_eq!(metrics.calls("pay", "conflict"), 1);
    assert_eq!(metrics.calls("pay", "failed"), 1);
    assert_eq!(metrics.calls("pay", "rejected"), 1);
    assert_eq!(metrics.calls("ship", "in_flight"), 1);
    assert_eq!(metrics.calls("ship_waiting", "waited"), 1);
    assert_eq!(metrics.calls("look", "ran"), 2);
    let duration =
        |labels: &[(&str, &str)]| metrics.observations(names::EXECUTE_TOOL_DURATION, labels);
    assert_eq!(duration(&[("gen_ai.tool.name", "pay")]), 6);
    assert_eq!(
        duration(&[("gen_ai.tool.name", "pay"), ("error.type", "key_conflict")]),
        1
    );
    let store = |op| {
        metrics.observations(
            names::STORE_DURATION,
            &[("db.system.name", "memory"), ("db.operation.name", op)],
        )
    };
    assert!(store("claim") >= 8, "{}", store("claim"));
    // The declined payment is transient (released), the result too large
    // recorded as a failure.
    assert_eq!((store("settle_released"), store("settle_failed")), (1, 1));
    let too_large = metrics.counter(names::RECORDS_TOO_LARGE, &[("gen_ai.tool.name", "pay")]);
    assert_eq!(too_large, 1);
    spans.clear();
}

/// Refund an order, once a person approves.
#[write_tool(approval = "required")]
async fn refund_approved(order: String, ctx: &WriteCtx) -> Result<String, String> {
    let _ = ctx;
    Ok(format!("refunded {order}"))
}

/// An operation waiting for a person, the run an approval allows and the
/// replays of a refusal are spans and counts of their own:
/// `awaiting_approval`, `approved`, `denied`; the settle that asks is a
/// store operation, `settle_awaiting`.
#[tokio::test]
async fn approval_outcomes_are_spans_and_counts() {
    let (spans, _tracing) = Spans::capture();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let registry = Registry::builder(())
        .tool(refund_approved)
        .build()
        .expect("registry");
    let call = |order: &str| registry.call("r", "refund_approved", json!({ "order": order }));
    let key = |asked: Result<serde_json::Value, ToolError>| match asked {
        Err(ToolError::ApprovalRequired { key, .. }) => key,
        other => panic!("the call asks for approval, got {other:?}"),
    };
    let approved = key(call("o-1").await);
    registry.approve(&approved, "ana").await.expect("approved");
    call("o-1").await.expect("runs once approved");
    call("o-1").await.expect("replayed");
    let refused = key(call("o-2").await);
    registry
        .deny(&refused, "bob", "not this one")
        .await
        .expect("refused");
    call("o-2").await.expect_err("the refusal");

    let calls = spans.calls();
    let outcomes: Vec<&str> = calls
        .iter()
        .filter_map(|s| s.field("idem.outcome"))
        .collect();
    assert_eq!(
        outcomes,
        [
            "awaiting_approval",
            "approved",
            "replayed",
            "awaiting_approval",
            "denied"
        ]
    );
    assert_eq!(calls[0].field("error.type"), Some("approval_required"));
    let ops: Vec<String> = spans
        .store_ops(&calls[0])
        .iter()
        .filter_map(|s| s.field("db.operation.name").map(str::to_owned))
        .collect();
    assert_eq!(ops, ["claim", "settle_awaiting"]);
    let metrics = Metrics::take(&snapshotter);
    assert_eq!(metrics.calls("refund_approved", "awaiting_approval"), 2);
    assert_eq!(metrics.calls("refund_approved", "approved"), 1);
    assert_eq!(metrics.calls("refund_approved", "denied"), 1);
    let asked = metrics.observations(
        names::STORE_DURATION,
        &[
            ("db.system.name", "memory"),
            ("db.operation.name", "settle_awaiting"),
        ],
    );
    assert_eq!(asked, 2, "each request for approval is a store operation");
    spans.clear();
}

// --- Faults, for real ---------------------------------------------------------

/// Post a message: better sent twice than not at all.
#[write_tool(on_store_error = "run")]
async fn post(text: String, ctx: &WriteCtx) -> Result<bool, String> {
    let _ = text;
    Ok(ctx.is_claimed())
}

/// Refund: never without a claim.
#[write_tool]
async fn refund(order: String, ctx: &WriteCtx) -> Result<String, String> {
    let _ = ctx;
    Ok(order)
}

/// Set when `export`'s first body starts.
static EXPORT_STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Export: until the lease is lost, or for a second.
#[write_tool(lease = "600ms", max_hold = "20s")]
async fn export(n: u64, ctx: &WriteCtx) -> Result<u64, String> {
    EXPORT_STARTED.store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::select! {
        () = ctx.lease_lost() => {}
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
    }
    Ok(n)
}

/// A registry of the fault tools on `store`.
fn fault_registry(store: RedisStore, ns: &str) -> Registry<()> {
    Registry::builder(())
        .store(store)
        .namespace(ns)
        .store_timeout(Duration::from_millis(200))
        .tool(post)
        .tool(refund)
        .tool(export)
        .build()
        .expect("registry")
}

#[tokio::test]
async fn a_store_away_and_a_lease_lost_are_spans_and_counts() {
    let Some(direct) = support::shared_redis().await else {
        return;
    };
    let (spans, _tracing) = Spans::capture();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let server = support::url_server(&support::redis_url()).expect("a Redis address");
    let proxy = Proxy::start(server).await.expect("a proxy");
    // A new connection that cannot be made is reported within the second
    // claim's bound (twice the registry's 200 ms), so that a `run` tool
    // knows the store is unreachable.
    let options = RedisOptions::new()
        .response_timeout(Duration::from_secs(120))
        .connection_timeout(Duration::from_millis(300));
    let via = support::url_via(&support::redis_url(), proxy.addr());
    let proxied = RedisStore::connect_with(&via, options)
        .await
        .expect("connect via the proxy");
    let ns = format!("obs-{}-{}", std::process::id(), support::free_port());
    let worker_a = fault_registry(proxied, &ns);
    let worker_b = fault_registry(direct, &ns);

    // The store does not answer: a `run` tool runs without a claim, any
    // other is refused.
    proxy.black_hole();
    let unclaimed = worker_a.call("r", "post", json!({"text": "hi"})).await;
    assert_eq!(unclaimed.expect("ran without a claim"), json!(false));
    worker_a
        .call("r", "refund", json!({"order": "o-1"}))
        .await
        .expect_err("store error");
    proxy.forward();

    // A's store stops answering while its body runs; once its lease has
    // lapsed, B takes the operation over, and A is told it lost it.
    let a = {
        let worker_a = worker_a.clone();
        tokio::spawn(async move { worker_a.call("r", "export", json!({"n": 1})).await })
    };
    while !EXPORT_STARTED.load(std::sync::atomic::Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.black_hole();
    let taken_over = loop {
        match worker_b.call("r", "export", json!({"n": 1})).await {
            Err(ToolError::InFlight { .. }) => tokio::time::sleep(Duration::from_millis(50)).await,
            other => break other,
        }
    };
    assert_eq!(taken_over.expect("B ran it"), json!(1));
    proxy.forward();
    match a.await.expect("task") {
        Err(ToolError::LeaseLost { .. }) => {}
        other => panic!("A must get LeaseLost, got {other:?}"),
    }

    let calls = spans.calls();
    assert_call(&calls[0], "post", "ran_without_claim");
    assert_eq!(calls[0].field("idem.attempt"), None);
    assert_call(&calls[1], "refund", "store_error");
    assert_eq!(calls[1].field("error.type"), Some("store"));
    let store_ops = spans.store_ops(&calls[1]);
    assert_eq!(store_ops.len(), 1, "{store_ops:?}");
    assert_eq!(store_ops[0].field("db.system.name"), Some("redis"));
    assert_eq!(store_ops[0].field("db.operation.name"), Some("claim"));
    let exports: Vec<&str> = calls[2..]
        .iter()
        .filter_map(|s| s.field("idem.outcome"))
        .collect();
    // A's call began first; B was told it was in flight until it ran.
    assert_eq!(exports.first(), Some(&"lease_lost"), "{exports:?}");
    assert_eq!(exports.last(), Some(&"ran"), "{exports:?}");
    assert!(
        exports[1..exports.len() - 1]
            .iter()
            .all(|o| *o == "in_flight"),
        "{exports:?}"
    );

    let metrics = Metrics::take(&snapshotter);
    assert_eq!(metrics.calls("post", "ran_without_claim"), 1);
    assert_eq!(metrics.calls("refund", "store_error"), 1);
    assert_eq!(metrics.calls("export", "lease_lost"), 1);
    assert_eq!(metrics.calls("export", "ran"), 1);
    let lost = metrics.counter(names::LEASE_LOST, &[("gen_ai.tool.name", "export")]);
    assert_eq!(lost, 1);
    let failed_ops = metrics.observations(
        names::STORE_DURATION,
        &[("db.system.name", "redis"), ("idem.store.result", "error")],
    );
    assert!(failed_ops >= 2, "the black-holed claims: {failed_ops}");
}
