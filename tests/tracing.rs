//! Observability: the wrapper's tracing events carry the tool and the key.
//! Alone in its own test binary: tracing caches per-callsite interest
//! process-wide, which concurrent tests without a subscriber would race.

mod support;

use std::sync::Arc;
use std::time::Duration;

use idem::testing::{Counter, Fault, FaultyStore, Op};
use idem::{MemoryStore, Registry, WriteOptions};
use serde_json::json;

#[tokio::test]
async fn tracing_reports_replays_with_tool_and_key() {
    let (logs, _guard) = support::Logs::capture(tracing::Level::DEBUG);
    let registry = Registry::builder(())
        .tool(Counter::new(Duration::ZERO, WriteOptions::new()))
        .build()
        .expect("registry");
    registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("first");
    registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replay");
    registry
        .call("r", "counter", json!({"n": 2, "fail": true}))
        .await
        .expect_err("transient");
    let slow = Registry::builder(())
        .tool(Counter::new(
            Duration::from_millis(200),
            WriteOptions::new(),
        ))
        .build()
        .expect("registry");
    let (a, b) = tokio::join!(
        slow.call("r", "counter", json!({"n": 3})),
        slow.call("r", "counter", json!({"n": 3})),
    );
    assert!(a.is_ok() != b.is_ok(), "one runs, one is in flight");
    // The body ran but its result could not be recorded within max_hold
    // (retried until then; 300 ms here): the caller still gets the result,
    // and the failure is logged at error level with the key.
    let store = Arc::new(FaultyStore::new(MemoryStore::new()));
    store.set(Op::Complete, Fault::Unavailable);
    let unrecorded = Registry::builder(())
        .store(store)
        .tool(Counter::new(
            Duration::ZERO,
            WriteOptions::new()
                .lease(Duration::from_millis(100))
                .max_hold(Duration::from_millis(300)),
        ))
        .build()
        .expect("registry");
    let (unrecorded_key, _) = unrecorded
        .identify("r", "counter", json!({"n": 4}))
        .expect("id")
        .expect("write");
    let out = unrecorded
        .call("r", "counter", json!({"n": 4}))
        .await
        .expect("the operation happened: its result comes back");
    assert_eq!(
        (&out["n"], &out["key"]),
        (&json!(4), &json!(unrecorded_key.as_str()))
    );
    let (key, _) = registry
        .identify("r", "counter", json!({"n": 1}))
        .expect("id")
        .expect("write");
    let log = logs.text();
    for event in [
        "claim acquired",
        "result recorded",
        "replayed recorded result",
        "key released",
        "in flight; duplicate rejected",
    ] {
        assert!(log.contains(event), "no {event:?} event in:\n{log}");
    }
    let replay_line = log
        .lines()
        .find(|l| l.contains("replayed"))
        .expect("replay line");
    assert!(
        replay_line.contains("tool=\"counter\"") || replay_line.contains("tool=counter"),
        "{replay_line}"
    );
    assert!(replay_line.contains(key.as_str()), "{replay_line}");
    let unrecorded_line = log
        .lines()
        .find(|l| l.contains("could not be recorded"))
        .unwrap_or_else(|| panic!("no unrecorded-result event in:\n{log}"));
    assert!(unrecorded_line.contains("ERROR"), "{unrecorded_line}");
    assert!(
        unrecorded_line.contains(unrecorded_key.as_str()),
        "{unrecorded_line}"
    );
}
