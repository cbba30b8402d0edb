//! The conformance cases; each takes the harness and panics on a
//! violation. Store-level cases first, then the registry over the store,
//! then faults made for real on the network between store and server.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::faults::{Fault, FaultyStore, Op};
use super::fixtures::Counter;
use super::harness::Harness;
use super::helpers::*;
use super::proxy::Proxy;
use crate::error::{StoreError, ToolError};
use crate::key::{Fingerprint, IdemKey};
use crate::store::{Claim, Entry, IdemStore, LeaseToken};
use crate::tool::{OnInFlight, WriteOptions};

/// Claim, complete, and every later claim replays the result.
pub async fn claim_complete_replay<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "a");
    assert_eq!(
        store.get(&k).await.ok(),
        Some(None),
        "a fresh key holds nothing"
    );
    let token = acquired(store.claim(&k, &f, LONG).await);
    assert_eq!(token.attempt(), 0);
    assert_eq!(
        store.get(&k).await.ok(),
        Some(Some(Entry::Running {
            fingerprint: f,
            attempt: 0
        }))
    );
    store
        .complete(&k, &token, r#"{"ok":true}"#, LONG)
        .await
        .expect("complete");
    let done = Entry::Done {
        result: r#"{"ok":true}"#.into(),
        fingerprint: f,
    };
    assert_eq!(existing(store.claim(&k, &f, LONG).await), done);
    assert_eq!(existing(store.claim(&k, &f, LONG).await), done);
    assert_eq!(store.get(&k).await.ok(), Some(Some(done)));
    lease_lost(
        store.complete(&k, &token, "1", LONG).await,
        "complete after complete",
    );
    lease_lost(store.release(&k, &token).await, "release after complete");
}

/// Many tasks claim one key at once: exactly one acquires.
pub async fn concurrent_claims_acquire_once<H: Harness>(h: &H) {
    let store = h.store();
    let ns = namespace();
    for round in 0..5 {
        let k = key(&ns, &format!("race-{round}"));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (store, k) = (store.clone(), k.clone());
                tokio::spawn(async move { store.claim(&k, &fp(1), LONG).await })
            })
            .collect();
        let mut acquired = 0;
        for t in tasks {
            match t.await.expect("task") {
                Ok(Claim::Acquired(_)) => acquired += 1,
                Ok(Claim::Existing(Entry::Running { .. })) => {}
                other => panic!("unexpected claim result {other:?}"),
            }
        }
        assert_eq!(acquired, 1, "round {round}: exactly one claim must acquire");
    }
}

/// A lapsed lease lets the next claim in, one attempt higher.
pub async fn lapsed_lease_lets_a_new_claim_in<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "lapse");
    let first = acquired(store.claim(&k, &f, SHORT).await);
    assert!(matches!(
        existing(store.claim(&k, &f, SHORT).await),
        Entry::Running { .. }
    ));
    past_short().await;
    let second = acquired(store.claim(&k, &f, LONG).await);
    assert_eq!((first.attempt(), second.attempt()), (0, 1));
    assert_ne!(first, second);
}

/// Renewing keeps other claims out past the original lease.
pub async fn renew_keeps_the_lease<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "renew");
    let lease = Duration::from_millis(1000);
    let token = acquired(store.claim(&k, &f, lease).await);
    for _ in 0..8 {
        tokio::time::sleep(lease / 5).await;
        store
            .renew(&k, &token, lease)
            .await
            .expect("renew by the holder");
    }
    // 1.5 leases have passed since the claim; the renewals kept it.
    assert!(matches!(
        existing(store.claim(&k, &f, lease).await),
        Entry::Running { attempt: 0, .. }
    ));
    store
        .complete(&k, &token, "1", LONG)
        .await
        .expect("the holder records");
}

/// A worker whose lease lapsed and was taken over can change nothing.
pub async fn stale_token_is_fenced<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "fence");
    let stale = acquired(store.claim(&k, &f, SHORT).await);
    past_short().await;
    let owner = acquired(store.claim(&k, &f, LONG).await);
    lease_lost(
        store.complete(&k, &stale, r#""stale""#, LONG).await,
        "stale complete",
    );
    lease_lost(store.fail(&k, &stale, "stale", LONG).await, "stale fail");
    lease_lost(store.renew(&k, &stale, LONG).await, "stale renew");
    lease_lost(store.release(&k, &stale).await, "stale release");
    assert_eq!(
        store.get(&k).await.ok(),
        Some(Some(Entry::Running {
            fingerprint: f,
            attempt: 1
        })),
        "the stale worker changed the owner's record"
    );
    store
        .complete(&k, &owner, r#""owner""#, LONG)
        .await
        .expect("owner completes");
    lease_lost(
        store.complete(&k, &stale, r#""stale""#, LONG).await,
        "stale complete after owner",
    );
    assert_eq!(
        existing(store.claim(&k, &f, LONG).await),
        Entry::Done {
            result: r#""owner""#.into(),
            fingerprint: f
        }
    );
}

/// A lapsed lease nobody claimed since may still be renewed and recorded.
pub async fn lapsed_but_unclaimed_may_still_record<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "late");
    let token = acquired(store.claim(&k, &f, SHORT).await);
    past_short().await;
    store
        .renew(&k, &token, LONG)
        .await
        .expect("re-claim by renewing");
    assert!(matches!(
        existing(store.claim(&k, &f, LONG).await),
        Entry::Running { .. }
    ));
    store
        .complete(&k, &token, "7", LONG)
        .await
        .expect("late complete");
    assert_eq!(
        existing(store.claim(&k, &f, LONG).await),
        Entry::Done {
            result: "7".into(),
            fingerprint: f
        }
    );
    let k2 = key(&ns, "late-2");
    let token = acquired(store.claim(&k2, &f, SHORT).await);
    past_short().await;
    store
        .complete(&k2, &token, "8", LONG)
        .await
        .expect("late complete without renewal");
}

/// Release frees the key at once; the next claim counts the attempt.
pub async fn release_counts_the_attempt<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "release");
    let t0 = acquired(store.claim(&k, &f, LONG).await);
    store.release(&k, &t0).await.expect("release");
    assert_eq!(
        store.get(&k).await.ok(),
        Some(None),
        "a released key holds no entry"
    );
    lease_lost(
        store.complete(&k, &t0, "1", LONG).await,
        "complete after release",
    );
    let t1 = acquired(store.claim(&k, &f, LONG).await);
    store.release(&k, &t1).await.expect("release");
    let t2 = acquired(store.claim(&k, &f, LONG).await);
    assert_eq!((t0.attempt(), t1.attempt(), t2.attempt()), (0, 1, 2));
    store.complete(&k, &t2, "2", LONG).await.expect("complete");
}

/// A permanent failure is recorded and replayed.
pub async fn permanent_failure_is_replayed<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "fail");
    let token = acquired(store.claim(&k, &f, LONG).await);
    store
        .fail(&k, &token, "card declined: \"insufficient funds\"", LONG)
        .await
        .expect("fail");
    let failed = Entry::Failed {
        error: "card declined: \"insufficient funds\"".into(),
        fingerprint: f,
    };
    assert_eq!(existing(store.claim(&k, &f, LONG).await), failed);
    assert_eq!(store.get(&k).await.ok(), Some(Some(failed)));
}

/// A recorded result is forgotten after its TTL.
pub async fn result_ttl_expires<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "ttl");
    let token = acquired(store.claim(&k, &f, LONG).await);
    store
        .complete(&k, &token, "1", SHORT)
        .await
        .expect("complete");
    assert!(matches!(
        existing(store.claim(&k, &f, LONG).await),
        Entry::Done { .. }
    ));
    past_short().await;
    assert_eq!(store.get(&k).await.ok(), Some(None));
    assert_eq!(acquired(store.claim(&k, &f, LONG).await).attempt(), 0);
}

/// Purging frees expired records and leaves live ones alone.
pub async fn purge_removes_only_expired_records<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let (live, dead) = (key(&ns, "live"), key(&ns, "dead"));
    let t = acquired(store.claim(&live, &f, LONG).await);
    store
        .complete(&live, &t, "1", LONG)
        .await
        .expect("complete");
    let t = acquired(store.claim(&dead, &f, LONG).await);
    store
        .complete(&dead, &t, "2", SHORT)
        .await
        .expect("complete");
    past_short().await;
    store.purge_expired().await.expect("purge");
    assert_eq!(store.get(&dead).await.ok(), Some(None));
    assert_eq!(
        store.get(&live).await.ok(),
        Some(Some(Entry::Done {
            result: "1".into(),
            fingerprint: f
        })),
        "purging must not touch a live record"
    );
    assert_eq!(
        store.purge_expired().await.ok(),
        Some(0),
        "nothing left to purge"
    );
}

/// Token operations on a key nobody claimed are refused.
pub async fn absent_key_refuses_token_ops<H: Harness>(h: &H) {
    let store = h.store();
    let k = key(&namespace(), "absent");
    let token = LeaseToken::generate(0);
    lease_lost(store.complete(&k, &token, "1", LONG).await, "complete");
    lease_lost(store.fail(&k, &token, "x", LONG).await, "fail");
    lease_lost(store.renew(&k, &token, LONG).await, "renew");
    lease_lost(store.release(&k, &token).await, "release");
    assert_eq!(
        store.get(&k).await.ok(),
        Some(None),
        "refused ops must not create records"
    );
}

/// The first claim's fingerprint stays with the record.
pub async fn fingerprint_is_kept<H: Harness>(h: &H) {
    let store = h.store();
    let k = key(&namespace(), "fp");
    let token = acquired(store.claim(&k, &fp(1), LONG).await);
    assert_eq!(
        existing(store.claim(&k, &fp(2), LONG).await),
        Entry::Running {
            fingerprint: fp(1),
            attempt: 0
        }
    );
    store
        .complete(&k, &token, "1", LONG)
        .await
        .expect("complete");
    assert_eq!(
        *existing(store.claim(&k, &fp(2), LONG).await).fingerprint(),
        fp(1)
    );
    // As the registry passes it for a tool keyed on all its arguments:
    // the digest the key ends with (which a store may keep implicitly).
    let k = key(&namespace(), "fp-digest");
    let digest = Fingerprint::from_hex(&k.as_str()[k.as_str().len() - 64..])
        .expect("a derived key ends with its digest");
    let token = acquired(store.claim(&k, &digest, LONG).await);
    assert_eq!(
        *existing(store.claim(&k, &fp(2), LONG).await).fingerprint(),
        digest
    );
    store
        .complete(&k, &token, "2", LONG)
        .await
        .expect("complete");
    let entry = store.get(&k).await.expect("get").expect("recorded");
    assert_eq!(*entry.fingerprint(), digest);
}

/// A record the backend cannot understand is an error, never a panic,
/// never a run.
pub async fn corrupt_record_is_an_error<H: Harness>(h: &H) {
    let ns = namespace();
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = registry(h.store(), &ns, &counter);
    let args = json!({ "n": 1 });
    let (k, f) = match registry.identify("run", "counter", args.clone()) {
        Ok(Some(id)) => id,
        other => panic!("identify: {other:?}"),
    };
    h.corrupt(&k, &f).await;
    for _ in 0..2 {
        match registry.call("run", "counter", args.clone()).await {
            Err(ToolError::Store {
                source: StoreError::Corrupt { .. },
                ..
            }) => {}
            other => {
                panic!("a corrupt record must give ToolError::Store(Corrupt), got {other:?}")
            }
        }
    }
    assert_eq!(counter.total(), 0, "nothing may run over a corrupt record");
    // The store answers for the key without panicking.
    let _ = h.store().get(&k).await;
}

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
    let registry = registry(h.store(), &namespace(), &counter);
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

/// The body ran but `complete` fails for longer than `max_hold` (it is
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

/// A settle sent again by the same token with the same payload (its first
/// reply lost with a dropped connection) succeeds and changes nothing; any
/// other settle of the settled record is fenced.
pub async fn settle_repeated_by_its_token_succeeds<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "repeat-done");
    let token = acquired(store.claim(&k, &f, LONG).await);
    store
        .complete(&k, &token, "1", LONG)
        .await
        .expect("complete");
    store
        .complete(&k, &token, "1", LONG)
        .await
        .expect("the same complete again");
    lease_lost(
        store.complete(&k, &token, "2", LONG).await,
        "another result",
    );
    lease_lost(
        store.fail(&k, &token, "1", LONG).await,
        "fail after complete",
    );
    lease_lost(store.renew(&k, &token, LONG).await, "renew after complete");
    lease_lost(
        store
            .complete(&k, &LeaseToken::generate(0), "1", LONG)
            .await,
        "another token",
    );
    let done = Entry::Done {
        result: "1".into(),
        fingerprint: f,
    };
    assert_eq!(store.get(&k).await.ok(), Some(Some(done)));

    let k = key(&ns, "repeat-fail");
    let token = acquired(store.claim(&k, &f, LONG).await);
    store.fail(&k, &token, "no", LONG).await.expect("fail");
    store
        .fail(&k, &token, "no", LONG)
        .await
        .expect("the same fail again");
    lease_lost(
        store.complete(&k, &token, "no", LONG).await,
        "complete after fail",
    );

    let k = key(&ns, "repeat-release");
    let token = acquired(store.claim(&k, &f, LONG).await);
    store.release(&k, &token).await.expect("release");
    store
        .release(&k, &token)
        .await
        .expect("the same release again");
    let next = acquired(store.claim(&k, &f, LONG).await);
    assert_eq!(next.attempt(), 1, "a repeated release counts once");
    lease_lost(store.release(&k, &token).await, "release after a new claim");
}

/// Duplicates racing to claim a key just released after a transient
/// failure: exactly one wins, the rest see it running, none sees an error.
pub async fn claims_after_a_release_have_one_winner<H: Harness>(h: &H) {
    let store = h.store();
    let ns = namespace();
    for round in 0..5 {
        let k = key(&ns, &format!("released-{round}"));
        let first = acquired(store.claim(&k, &fp(1), LONG).await);
        store.release(&k, &first).await.expect("release");
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (store, k) = (store.clone(), k.clone());
                tokio::spawn(async move { store.claim(&k, &fp(1), LONG).await })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            match t.await.expect("task") {
                Ok(Claim::Acquired(token)) => winners.push(token),
                Ok(Claim::Existing(Entry::Running { attempt: 1, .. })) => {}
                other => panic!("round {round}: unexpected claim result {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one claim wins");
        assert_eq!(winners[0].attempt(), 1, "round {round}");
    }
}

/// A permanent error whose text holds characters some stores refuse
/// (NUL) is recorded, and every caller gets the same text.
pub async fn registry_records_any_error_text<H: Harness>(h: &H) {
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = registry(h.store(), &namespace(), &counter);
    let args = json!({"n": 1, "fail_with": "declined: \u{0} ünïcødé \"quoted\" \u{1F4B3}"});
    let first = registry.call("r", "counter", args.clone()).await;
    let again = registry.call("r", "counter", args).await;
    let message = |r: Result<Value, ToolError>| match r {
        Err(ToolError::Failed {
            message,
            permanent: true,
            ..
        }) => message,
        other => panic!("expected a permanent failure, got {other:?}"),
    };
    let (first, again) = (message(first), message(again));
    assert_eq!(first, again, "the replayed error is the one first returned");
    assert!(first.contains("ünïcødé \"quoted\" \u{1F4B3}"), "{first}");
    assert!(!first.contains('\u{0}'), "{first:?}");
    assert_eq!(counter.total(), 1, "a recorded failure is not run again");
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

/// A proxy in front of the harness's server and a store through it, with
/// the registry's usual settings; `None` for a store without a server.
async fn proxied<H: Harness>(h: &H) -> Option<(Proxy, Arc<H::Store>)> {
    let server = h.server()?;
    let proxy = Proxy::start(server).await.expect("start a proxy");
    let store = h.store_via(proxy.addr()).await;
    Some((proxy, store))
}

/// Connections cut before a claim and between the body and its record:
/// the operation still runs once, its result is recorded and replayed.
pub async fn net_cut_connections_lose_nothing<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let proxy = Arc::new(proxy);
    let cut = proxy.clone();
    let counter = Counter::new(Duration::ZERO, WriteOptions::new()).on_run(move || cut.cut());
    let ns = namespace();
    let registry = registry(store, &ns, &counter);
    let direct = registry_with(h.store(), &ns, &counter, |b| b);
    for n in 0..3u64 {
        // The body cuts every connection: the record goes over a new one.
        let out = registry
            .call("r", "counter", json!({ "n": n }))
            .await
            .expect("the call survives the cut");
        // Cut again while idle: the replay goes over a new one too.
        proxy.cut();
        let replay = registry
            .call("r", "counter", json!({ "n": n }))
            .await
            .expect("the replay survives the cut");
        assert_eq!(out, replay);
        assert_eq!(
            direct.call("r", "counter", json!({ "n": n })).await.ok(),
            Some(out),
            "the result is recorded in the store"
        );
    }
    assert_eq!(counter.total(), 3, "each operation ran once");
    assert!(proxy.accepted() > 1, "the cuts forced new connections");
}

/// A renewal stalled on the network never holds the body up: the body
/// finishes while the renewal is still stalled.
pub async fn net_stalled_renewal_does_not_block_the_body<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let proxy = Arc::new(proxy);
    let stall = proxy.clone();
    // The body stalls the network, then works for several lease periods:
    // renewals are due meanwhile and hang until the stall ends.
    let counter =
        Counter::new(SHORT * 3, WriteOptions::new().lease(SHORT)).on_run(move || stall.stall());
    let registry = registry_with(store, &namespace(), &counter, |b| {
        b.store_timeout(Duration::from_secs(120))
    });
    let call = tokio::spawn(async move { registry.call("r", "counter", json!({"n": 1})).await });
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while counter.finished() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    proxy.forward();
    assert!(
        waited.is_ok(),
        "the body did not finish while a renewal was stalled: the heartbeat blocks it"
    );
    assert_eq!(counter.saw_lease_lost(), 1, "the stall outlasted the lease");
    let out = call.await.expect("task");
    // Nobody claimed meanwhile: the late renewal and the record land.
    assert!(out.is_ok(), "{out:?}");
}

/// The store stalls longer than the store timeout while the result is
/// recorded: the record is retried until it lands, and never runs twice.
pub async fn net_slow_record_is_retried_until_it_lands<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let proxy = Arc::new(proxy);
    let stall = proxy.clone();
    let counter = Counter::new(Duration::ZERO, WriteOptions::new()).on_run(move || stall.stall());
    let ns = namespace();
    let proxied = registry_with(store, &ns, &counter, |b| {
        b.store_timeout(Duration::from_millis(200))
    });
    let call = tokio::spawn(async move { proxied.call("r", "counter", json!({"n": 1})).await });
    while counter.finished() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Several tries time out meanwhile.
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.forward();
    let out = call.await.expect("task").expect("the result");
    let direct = registry(h.store(), &ns, &counter);
    let replay = direct
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replay");
    assert_eq!(out, replay, "the recorded result is the one returned");
    assert_eq!(counter.total(), 1);
}

/// Renewals vanish (a partition): the body is told its lease is lost and
/// stops; another worker takes the key over; the first one's late result
/// is fenced off.
pub async fn net_body_sees_its_lease_lost<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let proxy = Arc::new(proxy);
    let hole = proxy.clone();
    let ns = namespace();
    let slow = Counter::new(Duration::from_secs(60), WriteOptions::new().lease(SHORT))
        .stop_when_lease_lost()
        .on_run(move || hole.black_hole());
    let worker_a = registry_with(store, &ns, &slow, |b| {
        b.store_timeout(Duration::from_millis(200))
    });
    let a = tokio::spawn(async move { worker_a.call("r", "counter", json!({"n": 1})).await });
    let told = tokio::time::timeout(Duration::from_secs(30), async {
        while slow.finished() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(told.is_ok(), "the body was never told its lease was lost");
    assert_eq!(slow.saw_lease_lost(), 1);
    // A counts its lease from when it sent the claim, so the store may see
    // it a moment longer: B waits for the key, as a duplicate may.
    let fast = Counter::new(
        Duration::ZERO,
        WriteOptions::new().on_in_flight(OnInFlight::Wait(Duration::from_secs(30))),
    );
    let worker_b = registry(h.store(), &ns, &fast);
    let b = worker_b
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("B takes over");
    assert_eq!(b["attempt"], 1);
    proxy.forward();
    match a.await.expect("task") {
        Err(ToolError::LeaseLost { .. }) => {}
        other => panic!("A must get LeaseLost, got {other:?}"),
    }
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
