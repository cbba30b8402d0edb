//! The registry over the store under test: write tools run once, in
//! sequence and concurrently, through outages and failed recordings.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{StoreError, ToolError};
use crate::key::IdemKey;
use crate::store::IdemStore;
use crate::testing::faults::{Fault, FaultyStore, Op};
use crate::testing::fixtures::Counter;
use crate::testing::harness::Harness;
use crate::testing::helpers::*;
use crate::tool::{OnInFlight, WriteOptions};

/// The same call twice in sequence runs once and returns equal results,
/// whatever the key order and formatting of the arguments.
pub async fn registry_runs_once_in_sequence<H: Harness>(h: &H) {
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = registry(h.store(), &namespace(), &counter);
    let first = registry
        .call("r", "counter", json!({"n": 1, "fail": false}))
        .await
        .expect("first");
    let again = registry
        .call("r", "counter", json!({"fail": false, "n": 1.0}))
        .await
        .expect("again");
    let as_text = registry
        .call("r", "counter", Value::String(r#"{ "n" : 1 }"#.into()))
        .await
        .expect("text");
    assert_eq!(first, again);
    assert_eq!(first, as_text);
    assert_eq!(counter.total(), 1);
    registry
        .call("r", "counter", json!({"n": 2}))
        .await
        .expect("other args");
    registry
        .call("other-run", "counter", json!({"n": 1}))
        .await
        .expect("other run");
    assert_eq!(
        counter.total(),
        3,
        "other arguments and other runs are other operations"
    );
}

/// Two concurrent identical calls: one runs, the other is `InFlight`.
pub async fn registry_concurrent_duplicate_is_in_flight<H: Harness>(h: &H) {
    let counter = Counter::new(Duration::from_millis(300), WriteOptions::new());
    let registry = registry(h.store(), &namespace(), &counter);
    let (a, b) = tokio::join!(
        registry.call("r", "counter", json!({"n": 1})),
        registry.call("r", "counter", json!({"n": 1})),
    );
    let (ok, in_flight) = match (a, b) {
        (Ok(v), Err(e)) | (Err(e), Ok(v)) => (v, e),
        other => panic!("expected one success and one InFlight, got {other:?}"),
    };
    assert!(
        matches!(in_flight, ToolError::InFlight { .. }),
        "got {in_flight:?}"
    );
    assert!(in_flight.is_retryable());
    assert_eq!(counter.total(), 1);
    let replay = registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replay");
    assert_eq!(replay, ok);
}

/// 1,000 concurrent calls over 100 operations: each runs exactly once.
pub async fn registry_stress_runs_each_key_once<H: Harness>(h: &H) {
    let counter = Counter::new(
        Duration::from_millis(2),
        WriteOptions::new().on_in_flight(OnInFlight::Wait(Duration::from_secs(30))),
    );
    // The store timeout is a liveness bound here, not the default second:
    // a thousand claims queue for a pool's connections, and on a loaded
    // machine some wait longer (a CI run saw a PostgreSQL claim time out).
    // The case is about how often each operation runs, not how fast.
    let registry = registry_with(h.store(), &namespace(), &counter, |b| {
        b.store_timeout(Duration::from_secs(30))
    });
    let tasks: Vec<_> = (0..1000u64)
        .map(|i| {
            let registry = registry.clone();
            tokio::spawn(async move {
                let n = i % 100;
                let out = registry.call("r", "counter", json!({ "n": n })).await;
                (n, out)
            })
        })
        .collect();
    let mut results: HashMap<u64, Value> = HashMap::new();
    for t in tasks {
        let (n, out) = t.await.expect("task");
        let out = out.expect("every call returns the result");
        let first = results.entry(n).or_insert_with(|| out.clone());
        assert_eq!(*first, out, "every duplicate sees the first result");
    }
    assert_eq!(
        counter.total(),
        100,
        "executions must equal distinct operations"
    );
    for n in 0..100 {
        assert_eq!(counter.runs(n).len(), 1, "operation {n}");
    }
}

/// `on_in_flight = wait`: the duplicate waits and returns the result.
pub async fn registry_wait_returns_the_first_result<H: Harness>(h: &H) {
    let counter = Counter::new(
        Duration::from_millis(300),
        WriteOptions::new().on_in_flight(OnInFlight::Wait(Duration::from_secs(30))),
    );
    let registry = registry(h.store(), &namespace(), &counter);
    let (a, b) = tokio::join!(
        registry.call("r", "counter", json!({"n": 1})),
        registry.call("r", "counter", json!({"n": 1})),
    );
    assert_eq!(a.expect("first"), b.expect("waiting duplicate"));
    assert_eq!(counter.total(), 1);
}

/// With the store down or hanging, nothing runs and the caller hears so.
pub async fn registry_fails_closed_on_outage<H: Harness>(h: &H) {
    let faulty = Arc::new(FaultyStore::new(h.store()));
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = registry_with(faulty.clone(), &namespace(), &counter, |b| {
        b.store_timeout(Duration::from_millis(200))
    });
    for fault in [Fault::Unavailable, Fault::Hang] {
        faulty.set_all(fault);
        match registry.call("r", "counter", json!({"n": 1})).await {
            Err(e @ ToolError::Store { .. }) => assert!(e.is_retryable()),
            other => panic!("{fault:?}: expected ToolError::Store, got {other:?}"),
        }
    }
    assert_eq!(counter.total(), 0, "no body may run without a claim");
    faulty.set_all(Fault::None);
    registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("after recovery");
    assert_eq!(counter.total(), 1);
}

/// The body ran but its settle (done) fails for longer than `max_hold` (it is
/// retried until then): the caller still gets the result, and a retry
/// after the lease reuses the same key, one attempt higher.
pub async fn registry_returns_result_when_recording_fails<H: Harness>(h: &H) {
    let faulty = Arc::new(FaultyStore::new(h.store()));
    let counter = Counter::new(
        Duration::ZERO,
        WriteOptions::new().lease(SHORT).max_hold(SHORT * 2),
    );
    let registry = registry(faulty.clone(), &namespace(), &counter);
    faulty.set(Op::Complete, Fault::Unavailable);
    let first = registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("the result, though unrecorded");
    faulty.set(Op::Complete, Fault::None);
    past_short().await;
    let second = registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("retry");
    let runs = counter.runs(1);
    assert_eq!(runs.len(), 2);
    assert_eq!(
        runs[0].0, runs[1].0,
        "a retry must reuse the idempotency key"
    );
    assert_eq!((runs[0].1, runs[1].1), (0, 1));
    assert_eq!(first["key"], second["key"]);
    let replay = registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replay");
    assert_eq!(replay, second);
    assert_eq!(counter.total(), 2);
}

/// A worker that cannot renew loses its lease to another worker; its
/// late result does not overwrite the new owner's (`LeaseLost`).
pub async fn registry_fences_a_worker_that_lost_its_lease<H: Harness>(h: &H) {
    let ns = namespace();
    let faulty = Arc::new(FaultyStore::new(h.store()));
    faulty.set(Op::Renew, Fault::Unavailable);
    let slow = Counter::new(SHORT * 8, WriteOptions::new().lease(SHORT));
    let worker_a = registry(faulty.clone(), &ns, &slow);
    let fast = Counter::new(Duration::ZERO, WriteOptions::new().lease(SHORT));
    let worker_b = registry(h.store(), &ns, &fast);

    let a = tokio::spawn(async move { worker_a.call("r", "counter", json!({"n": 1})).await });
    while slow.total() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    past_short().await; // A's lease lapsed: its renewals fail.
    let b = worker_b
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("B takes over");
    match a.await.expect("task") {
        Err(e @ ToolError::LeaseLost { .. }) => assert!(e.is_retryable()),
        other => panic!("A must get LeaseLost, got {other:?}"),
    }
    assert_eq!(b["attempt"], 1);
    assert_eq!(
        slow.runs(1)[0].0,
        fast.runs(1)[0].0,
        "both ran under one key"
    );
    let replay = worker_b
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replay");
    assert_eq!(replay, b, "the new owner's result stands");
    assert_eq!(fast.total(), 1);
}

/// A permanent error whose text holds characters some stores refuse
/// (NUL), or that begins as an encrypted payload would, is recorded, and
/// every caller gets the same text.
pub async fn registry_records_any_error_text<H: Harness>(h: &H) {
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = registry(h.store(), &namespace(), &counter);
    let message = |r: Result<Value, ToolError>| match r {
        Err(ToolError::Failed {
            message,
            permanent: true,
            ..
        }) => message,
        other => panic!("expected a permanent failure, got {other:?}"),
    };
    let texts = [
        "declined: \u{0} ünïcødé \"quoted\" \u{1F4B3}",
        "idem-sealed:v1:k1:AAAA",
        "idem-plain:declined",
    ];
    for (n, text) in texts.into_iter().enumerate() {
        let args = json!({"n": n, "fail_with": text});
        let first = message(registry.call("r", "counter", args.clone()).await);
        let again = message(registry.call("r", "counter", args).await);
        assert_eq!(first, again, "the replayed error is the one first returned");
        let shown = text.replace('\u{0}', "\u{fffd}");
        assert!(first.contains(&shown), "{first:?} does not hold {shown:?}");
    }
    assert_eq!(counter.total(), 3, "a recorded failure is not run again");
}

/// The longest durations a registry accepts (100 years of TTL, `max_hold`
/// and waiting in flight) are ones the store keeps: the result is
/// recorded and replayed, nothing panics.
pub async fn registry_longest_settings_are_kept<H: Harness>(h: &H) {
    let longest = Duration::from_secs(100 * 31_557_600);
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let ns = namespace();
    let configure = |b: crate::RegistryBuilder<()>| {
        b.default_ttl(longest)
            .default_max_hold(longest)
            .default_on_in_flight(OnInFlight::Wait(longest))
    };
    let first = registry_with(h.store(), &ns, &counter, configure)
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("runs");
    let replay = registry_with(h.store(), &ns, &counter, configure)
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replays");
    assert_eq!(first, replay);
    assert_eq!(counter.total(), 1, "recorded, not run again");
}

/// A duplicate that differs from the recorded operation in a checked field
/// is a conflict naming that field, never its value, from what the store
/// kept of the first call: a field with another value, one present now
/// and absent then, several at once; the first result stays recorded.
pub async fn registry_conflict_names_the_differing_fields<H: Harness>(h: &H) {
    let options = WriteOptions::new().key_fields(&["n"]);
    let counter = Counter::new(Duration::ZERO, options);
    let registry = registry(h.store(), &namespace(), &counter);
    let first = registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("first");
    let secret = "a-secret-reason-7f3a";
    let cases = [
        (json!({"n": 1, "fail": true}), vec!["fail"]),
        (json!({"n": 1, "fail_with": secret}), vec!["fail_with"]),
        (json!({"n": 1, "fail": true, "pad": 5}), vec!["fail", "pad"]),
    ];
    for (args, differing) in cases {
        match registry.call("r", "counter", args.clone()).await {
            Err(e @ ToolError::KeyConflict { .. }) => {
                let ToolError::KeyConflict { fields, .. } = &e else {
                    unreachable!()
                };
                assert_eq!(*fields, differing, "{args}");
                let (shown, told) = (e.to_string(), e.model_message());
                for name in &differing {
                    let quoted = format!("`{name}`");
                    assert!(shown.contains(&quoted), "{shown}");
                    assert!(told.contains(&quoted), "{told}");
                }
                assert!(!shown.contains(secret) && !told.contains(secret));
            }
            other => panic!("{args}: expected a conflict, got {other:?}"),
        }
    }
    let replay = registry
        .call("r", "counter", json!({"n": 1, "fail": false}))
        .await
        .expect("the first call's arguments are replayed");
    assert_eq!(replay, first);
    assert_eq!(counter.total(), 1, "no conflict ran");
}

/// A result larger than `max_result_bytes` goes to its caller but never to
/// the store; duplicates get an error saying so, never a second run. An
/// error text that large is cut to fit.
pub async fn registry_result_too_large_is_never_run_again<H: Harness>(h: &H) {
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = registry_with(h.store(), &namespace(), &counter, |b| {
        b.max_result_bytes(4096)
    });
    let big = json!({"n": 1, "pad": 100_000});
    let first = registry
        .call("r", "counter", big.clone())
        .await
        .expect("first");
    assert_eq!(first["padding"].as_str().map(str::len), Some(100_000));
    match registry.call("r", "counter", big).await {
        Err(ToolError::Failed {
            message,
            permanent: true,
            ..
        }) => assert!(
            message.contains("larger than max_result_bytes"),
            "{message}"
        ),
        other => panic!("a duplicate must get the too-large error, got {other:?}"),
    }
    let long_error = json!({"n": 2, "fail_with": "é".repeat(10_000)});
    match registry.call("r", "counter", long_error).await {
        Err(ToolError::Failed { message, .. }) => {
            assert!(message.len() <= 4096, "{} bytes", message.len());
            assert!(message.ends_with("[truncated]"));
        }
        other => panic!("expected the cut error, got {other:?}"),
    }
    assert_eq!(counter.total(), 2);
    // The store still answers for other operations.
    registry
        .call("r", "counter", json!({"n": 3}))
        .await
        .expect("a small result");
}

/// For a backend's own malformed-record tests: `plant(i, key)` writes the
/// `i`th malformed record (of `count`) under `key`; each must make a write
/// call over it a `Corrupt` store error, and a read of it an error, without
/// running anything.
pub async fn malformed_records_are_refused<S, F, Fut>(store: Arc<S>, count: usize, plant: F)
where
    S: IdemStore,
    F: Fn(usize, IdemKey) -> Fut,
    Fut: Future<Output = ()>,
{
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = registry(store.clone(), &namespace(), &counter);
    for i in 0..count {
        let args = json!({ "n": i });
        let key = match registry.identify("r", "counter", args.clone()) {
            Ok(Some((key, _))) => key,
            other => panic!("identify: {other:?}"),
        };
        plant(i, key.clone()).await;
        match registry.call("r", "counter", args).await {
            Err(ToolError::Store {
                source: StoreError::Corrupt { reason, .. },
                ..
            }) => {
                assert!(!reason.is_empty(), "record {i}: a reason");
            }
            other => panic!("record {i}: expected a Corrupt store error, got {other:?}"),
        }
        assert!(
            store.get(&key).await.is_err(),
            "record {i}: reading it is an error too"
        );
    }
    assert_eq!(
        counter.total(),
        0,
        "nothing may run over a malformed record"
    );
}
