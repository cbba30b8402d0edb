//! Uncertain outcomes: a claim taken over from a lapsed one is told so, a
//! lapsed claim is remembered for the retention its claim asked, an
//! unknown record is answered to every claim until it is resolved, and of
//! two resolutions at once exactly one lands; through the registry, a tool
//! that refuses to run an uncertain operation again does not, until an
//! operator resolves it, and remembers a lapsed claim for its TTL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::error::{ResolveError, StoreError, ToolError};
use crate::registry::Resolution;
use crate::store::{
    CLAIM_RETENTION, ClaimRequest, Entry, IdemStore, LeaseToken, Outcome, RecordState, UnknownNote,
};
use crate::testing::fixtures::{Counter, CounterOut};
use crate::testing::harness::Harness;
use crate::testing::helpers::*;
use crate::tool::{OnInFlight, OnUncertain, Verified, WriteOptions};

/// The reason a case records an outcome unknown with.
const WHY: &str = "attempt 0 lapsed | the worker crashed";

/// A lapsed claim is taken over (and said to be); settled unknown, the
/// record answers every claim and read with its attempt and reason, and
/// refuses every token operation but a resolution by the token that made
/// it unknown; two resolutions at once have one winner, whose outcome is
/// then replayed; a resolution to rerun lets the next claim in, one
/// attempt higher and not taken over.
pub async fn unknown_outcome_is_kept_until_resolved_once<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "unknown");
    let token = mark_unknown_after_a_lapse(&*store, &k).await;
    assert!(
        matches!(
            existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
            Entry::Unknown { attempt: 1, ref reason, ref fingerprint, .. }
                if reason == WHY && *fingerprint == f
        ),
        "an unknown record answers a claim with its attempt, reason and fingerprint"
    );
    assert!(matches!(
        store.get(&k).await,
        Ok(Some(Entry::Unknown { attempt: 1, .. }))
    ));
    let info = inspected(&*store, &k).await;
    assert_eq!(info.state, RecordState::Unknown);
    assert_eq!(info.holder, Some(token), "the token that made it unknown");
    assert_eq!(info.payload.as_deref(), Some(WHY));
    store
        .settle(&k, &token, unknown_with(WHY))
        .await
        .expect("the same settle repeated");
    lease_lost(
        store
            .settle(&k, &token, unknown_with("another reason"))
            .await,
        "unknown again with another reason",
    );
    lease_lost(
        store.renew(&k, &token, LONG).await,
        "renew of an unknown record",
    );
    let stranger = LeaseToken::generate(1);
    lease_lost(
        store.settle(&k, &stranger, done_with("1")).await,
        "a resolution with another token",
    );
    // Two resolutions at once: one lands, the other is fenced.
    let (a, b) = tokio::join!(
        store.settle(&k, &token, done_with(r#""sent""#)),
        store.settle(&k, &token, failed_with("never sent")),
    );
    let winner = match (a, b) {
        (Ok(()), Err(StoreError::LeaseLost)) => Entry::Done {
            result: r#""sent""#.into(),
            fingerprint: f.clone(),
        },
        (Err(StoreError::LeaseLost), Ok(())) => Entry::Failed {
            error: "never sent".into(),
            fingerprint: f.clone(),
        },
        other => panic!("exactly one of two resolutions must land, got {other:?}"),
    };
    assert_eq!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        winner
    );
    lease_lost(
        store.settle(&k, &token, Outcome::Released).await,
        "a resolution of a record no longer unknown",
    );

    let k = key(&ns, "rerun");
    let token = mark_unknown_after_a_lapse(&*store, &k).await;
    store
        .settle(&k, &token, Outcome::Released)
        .await
        .expect("resolved to run again");
    let next = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!(next.attempt(), 2, "the next claim counts the attempts");
    store
        .settle(&k, &next, done_with("2"))
        .await
        .expect("settle done");
}

/// A lapsed claim is remembered for the retention its claim asked, and no
/// longer: a day's retention neither keeps the lease live past its end
/// (the next claim takes it over) nor lets the record go at the hour
/// (`CLAIM_RETENTION`), and a renewal keeps it; a retention of a quarter
/// of a second lets the record go once it has passed, and the next claim
/// is a first one.
pub async fn a_lapsed_claim_is_remembered_for_its_retention<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let day = Duration::from_secs(24 * 3600);
    let k = key(&ns, "day");
    let first = acquired(
        store
            .claim(&k, ClaimRequest::new(TOOL, &f, SHORT).retention(day))
            .await,
    );
    assert!(
        matches!(
            existing(store.claim(&k, ClaimRequest::new(TOOL, &f, SHORT)).await),
            Entry::Running { .. }
        ),
        "a long retention is not a live lease"
    );
    store
        .renew(&k, &first, SHORT)
        .await
        .expect("renewed by the holder");
    let info = inspected(&*store, &k).await;
    assert!(
        info.expires_in > day - LONG && info.expires_in <= day + SHORT,
        "kept the claim's retention after the renewed lease: {info:?}"
    );
    assert!(
        info.lease_left.is_some_and(|left| left <= SHORT),
        "the lease is the lease, not the retention: {info:?}"
    );
    past_short().await;
    let info = inspected(&*store, &k).await;
    assert!(
        info.state == RecordState::Running && info.expires_in > CLAIM_RETENTION,
        "a lapsed claim is kept past the hour: {info:?}"
    );
    let next = taken_over(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!(next.attempt(), 1);

    let k = key(&ns, "short");
    acquired(
        store
            .claim(&k, ClaimRequest::new(TOOL, &f, SHORT).retention(SHORT))
            .await,
    );
    past_short().await;
    assert_eq!(store.get(&k).await.expect("get"), None, "forgotten");
    let fresh = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!(
        fresh.attempt(),
        0,
        "a first claim once the retention passed"
    );
}

/// Through the registry, a tool that may not run an uncertain operation
/// again (`refuse`, `verify`) claims with its TTL as the retention, so a
/// worker's crash is remembered that long; a `rerun` tool's lapsed claim
/// is kept the hour, as before. Read from the lapsed records themselves.
pub async fn registry_remembers_a_lapsed_claim_for_the_ttl<H: Harness>(h: &H) {
    let ttl = Duration::from_secs(3 * 24 * 3600);
    for (policy, kept) in [
        (OnUncertain::Refuse, ttl),
        (OnUncertain::Rerun, CLAIM_RETENTION),
    ] {
        let options = WriteOptions::new()
            .on_uncertain(policy)
            .lease(SHORT)
            .ttl(ttl);
        let counter = Counter::new(LONG, options);
        let registry = registry(h.store(), &namespace(), &counter);
        let (k, _) = registry
            .identify("r", "counter", json!({ "n": 1 }))
            .expect("identify")
            .expect("a write tool");
        // The worker dies in the body: its call is dropped, the claim lapses.
        let call = registry.call("r", "counter", json!({ "n": 1 }));
        let died = tokio::time::timeout(SHORT * 2, call).await;
        assert!(died.is_err(), "{policy:?}: the body was still running");
        assert_eq!(counter.total(), 1, "{policy:?}: the body had started");
        past_short().await;
        let info = inspected(registry.store(), &k).await;
        assert_eq!(info.state, RecordState::Running, "{policy:?}");
        assert!(
            info.expires_in > kept - LONG && info.expires_in <= kept,
            "{policy:?}: a lapsed claim is kept {kept:?} after its lease: {info:?}"
        );
    }
}

/// Claims `k` for a [`SHORT`] lease, lets it lapse, takes it over and
/// settles it unknown; returns the token that did.
async fn mark_unknown_after_a_lapse(store: &dyn IdemStore, k: &crate::IdemKey) -> LeaseToken {
    let f = fp(1);
    acquired(store.claim(k, ClaimRequest::new(TOOL, &f, SHORT)).await);
    past_short().await;
    let token = taken_over(store.claim(k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!(token.attempt(), 1);
    store
        .settle(k, &token, unknown_with(WHY))
        .await
        .expect("settled unknown by the new holder");
    token
}

fn unknown_with(reason: &str) -> Outcome<'_> {
    Outcome::Unknown { reason }
}

/// A tool that refuses to run an uncertain operation again: after a crash
/// (a claim left to lapse), every call is `OutcomeUnknown` and nothing
/// runs; of two resolutions at once one lands (the operator's result
/// replayed, or the body run once more, one attempt higher); a resolution
/// of anything but an unknown record, or with a result the tool cannot
/// replay, is refused; a failure resolved is replayed; a resolution racing
/// a call runs the operation once. The default policy runs the body
/// again.
pub async fn registry_refuses_an_uncertain_operation_until_resolved<H: Harness>(h: &H) {
    let ns = namespace();
    let refuse = WriteOptions::new().on_uncertain(OnUncertain::Refuse);
    let counter = Counter::new(Duration::ZERO, refuse);
    let registry = registry(h.store(), &ns, &counter);
    let k = crash(&registry, 1).await;
    for _ in 0..2 {
        match registry.call("r", "counter", json!({"n": 1})).await {
            Err(ToolError::OutcomeUnknown {
                attempt: 1, key, ..
            }) => {
                assert_eq!(key, k.to_string());
            }
            other => panic!("expected OutcomeUnknown, got {other:?}"),
        }
    }
    assert_eq!(
        counter.total(),
        0,
        "an uncertain operation never runs again by itself"
    );
    let info = inspected(registry.store(), &k).await;
    let note = info
        .payload
        .as_deref()
        .and_then(UnknownNote::parse)
        .expect("a note");
    assert!(note.reason.contains("attempt 0 lapsed"), "{note:?}");
    assert_eq!(note.tenant, None);
    resolutions_race(&registry, &counter, &k).await;
    assert!(matches!(
        registry.resolve(&k, Resolution::Rerun).await,
        Err(ResolveError::NotUnknown {
            state: RecordState::Done,
            ..
        })
    ));
    let k2 = crash(&registry, 2).await;
    assert!(
        registry
            .call("r", "counter", json!({"n": 2}))
            .await
            .is_err()
    );
    assert!(matches!(
        registry
            .resolve(&k2, Resolution::Done(json!("not a CounterOut")))
            .await,
        Err(ResolveError::InvalidResult { .. })
    ));
    registry
        .resolve(&k2, Resolution::Failed("the card was declined".into()))
        .await
        .expect("resolved failed");
    assert!(matches!(
        registry.call("r", "counter", json!({"n": 2})).await,
        Err(ToolError::Failed { permanent: true, ref message, .. }) if message == "the card was declined"
    ));
    assert!(matches!(
        registry
            .resolve(&key(&ns, "never"), Resolution::Rerun)
            .await,
        Err(ResolveError::NotFound { .. })
    ));
    resolution_races_a_call(&registry, &counter).await;

    let rerun = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = crate::testing::helpers::registry(h.store(), &namespace(), &rerun);
    crash(&registry, 3).await;
    let out = registry
        .call("r", "counter", json!({"n": 3}))
        .await
        .expect("run again by default");
    assert_eq!((rerun.total(), out["attempt"].clone()), (1, json!(1)));
}

/// A tool that refuses to rerun an uncertain operation, whose results are
/// kept a quarter of a second: its unknown record is still answered well
/// past that TTL, and the body never runs.
pub async fn registry_keeps_an_unknown_outcome_past_the_ttl<H: Harness>(h: &H) {
    let refuse = WriteOptions::new()
        .on_uncertain(OnUncertain::Refuse)
        .ttl(SHORT);
    let counter = Counter::new(Duration::ZERO, refuse);
    let registry = registry(h.store(), &namespace(), &counter);
    crash(&registry, 1).await;
    for _ in 0..2 {
        let outcome = registry.call("r", "counter", json!({"n": 1})).await;
        assert!(
            matches!(outcome, Err(ToolError::OutcomeUnknown { .. })),
            "an unknown record is kept past the TTL, got {outcome:?}"
        );
        past_short().await;
    }
    assert_eq!(counter.total(), 0, "nothing ran after the TTL either");
}

/// A worker that claimed the counter's operation `n` and crashed: its
/// claim left to lapse. Returns the operation's key.
async fn crash(registry: &crate::Registry<()>, n: u64) -> crate::IdemKey {
    crashed(registry, &[n]).await.remove(0)
}

/// [`crash`] for each of `ops`, with one wait for all their leases.
async fn crashed(registry: &crate::Registry<()>, ops: &[u64]) -> Vec<crate::IdemKey> {
    let mut keys = Vec::new();
    for n in ops {
        let (k, f) = registry
            .identify("r", "counter", json!({ "n": n }))
            .expect("identify")
            .expect("a write tool");
        acquired(
            registry
                .store()
                .claim(&k, ClaimRequest::new("counter", &f, SHORT))
                .await,
        );
        keys.push(k);
    }
    past_short().await;
    keys
}

/// An operator resolves operation 4 to run again while a duplicate of it
/// comes in: the duplicate is refused (before) or runs (after), and the
/// operation runs once in all.
async fn resolution_races_a_call(registry: &crate::Registry<()>, counter: &Counter) {
    let k = crash(registry, 4).await;
    assert!(
        registry
            .call("r", "counter", json!({"n": 4}))
            .await
            .is_err()
    );
    let before = counter.total();
    let (resolved, call) = tokio::join!(
        registry.resolve(&k, Resolution::Rerun),
        registry.call("r", "counter", json!({"n": 4})),
    );
    resolved.expect("resolved to run again");
    match call {
        Err(ToolError::OutcomeUnknown { .. }) | Ok(_) => {}
        other => panic!("the racing call: {other:?}"),
    }
    let after = registry
        .call("r", "counter", json!({"n": 4}))
        .await
        .expect("runs, or replays the run");
    assert_eq!(after["attempt"], 2);
    assert_eq!(counter.total() - before, 1, "one run after the resolution");
}

/// Two operators resolve `k` at once, one done with a result and one to
/// rerun: exactly one lands, and the next call gets what it said.
async fn resolutions_race(registry: &crate::Registry<()>, counter: &Counter, k: &crate::IdemKey) {
    let by_hand =
        json!({"n": 1, "key": "by hand", "attempt": 0, "unclaimed": false, "padding": ""});
    let (a, b) = tokio::join!(
        registry.resolve(k, Resolution::Done(by_hand)),
        registry.resolve(k, Resolution::Rerun),
    );
    // The loser finds the record changed under it, or no longer unknown.
    let lost = |r: &Result<(), ResolveError>| {
        matches!(
            r,
            Err(ResolveError::Raced { .. } | ResolveError::NotUnknown { .. })
        )
    };
    let ran_again = match (a, b) {
        (Ok(()), b) if lost(&b) => false,
        (a, Ok(())) if lost(&a) => true,
        other => panic!("exactly one of two resolutions must land, got {other:?}"),
    };
    let out = registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("answered after the resolution");
    if ran_again {
        assert_eq!((counter.total(), out["attempt"].clone()), (1, json!(2)));
    } else {
        assert_eq!((counter.total(), out["key"].clone()), (0, json!("by hand")));
    }
}

/// What [`registry_verifies_an_uncertain_operation`]'s downstream says of
/// operation `n`: 1, 5 and 6 happened, 2 did not, 3 it cannot tell, 4 it
/// cannot be asked until `up`.
fn downstream_says(n: u64, up: bool) -> Result<Verified<CounterOut>, String> {
    let happened = || {
        Verified::Done(CounterOut {
            n,
            key: "seen downstream".into(),
            attempt: 0,
            unclaimed: false,
            padding: String::new(),
        })
    };
    match n {
        2 => Ok(Verified::NotDone),
        3 => Ok(Verified::Unknown),
        4 if !up => Err("the gateway is down".into()),
        _ => Ok(happened()),
    }
}

/// A tool that verifies an uncertain operation: after a crash, what the
/// downstream says happened is recorded without running the body (and
/// replayed); what did not happen runs; what it cannot tell is left
/// unknown; a verification that fails settles nothing, and the next
/// duplicate after the lease verifies again; two duplicates at once verify
/// once; an error that leaves the outcome unknown is verified at once.
pub async fn registry_verifies_an_uncertain_operation<H: Harness>(h: &H) {
    let up = Arc::new(AtomicBool::new(false));
    let seen = up.clone();
    let options = WriteOptions::new()
        .on_uncertain(OnUncertain::Verify)
        .lease(SHORT)
        .on_in_flight(OnInFlight::Wait(LONG));
    let counter = Counter::new(Duration::from_millis(100), options)
        .verifies_with(move |args| downstream_says(args.n, seen.load(Ordering::SeqCst)));
    let registry = registry(h.store(), &namespace(), &counter);
    let call = |n: u64| registry.call("r", "counter", json!({ "n": n }));
    crashed(&registry, &[1, 2, 3, 4]).await;
    let verified = call(1).await.expect("verified done");
    assert_eq!(verified["key"], "seen downstream");
    assert_eq!(call(1).await.expect("replayed"), verified);
    assert_eq!(call(2).await.expect("verified not done")["attempt"], 1);
    assert_eq!(
        counter.total(),
        1,
        "only the operation that did not happen ran"
    );
    assert!(matches!(
        call(3).await,
        Err(ToolError::OutcomeUnknown { .. })
    ));
    let failed = call(4).await;
    assert!(transient(&failed), "{failed:?}");
    up.store(true, Ordering::SeqCst);
    past_short().await;
    assert_eq!(
        call(4).await.expect("verified again")["key"],
        "seen downstream"
    );
    assert_eq!(counter.verifications(), 5, "1, 2, 3, and 4 twice");

    crash(&registry, 5).await;
    let (a, b) = tokio::join!(call(5), call(5));
    assert_eq!(a.expect("first"), b.expect("second"), "both get one answer");
    assert_eq!(
        counter.verifications(),
        6,
        "two duplicates at once verify once"
    );

    let at_once = registry
        .call("r", "counter", json!({ "n": 6, "uncertain": true }))
        .await
        .expect("verified after an uncertain error");
    assert_eq!(at_once["key"], "seen downstream");
    assert_eq!((counter.total(), counter.verifications()), (2, 7));
}

/// An error that leaves the outcome unknown, under the other two policies:
/// refused (the record unknown, nothing more runs) or released (it runs
/// again).
pub async fn registry_uncertain_errors_follow_the_policy<H: Harness>(h: &H) {
    let args = json!({ "n": 1, "uncertain": true });
    let refuse = Counter::new(
        Duration::ZERO,
        WriteOptions::new().on_uncertain(OnUncertain::Refuse),
    );
    let registry = registry(h.store(), &namespace(), &refuse);
    for _ in 0..2 {
        let refused = registry.call("r", "counter", args.clone()).await;
        assert!(
            matches!(refused, Err(ToolError::OutcomeUnknown { attempt: 0, .. })),
            "{refused:?}"
        );
    }
    assert_eq!(refuse.total(), 1, "it ran once, and never again");

    let rerun = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = crate::testing::helpers::registry(h.store(), &namespace(), &rerun);
    for _ in 0..2 {
        let failed = registry.call("r", "counter", args.clone()).await;
        assert!(transient(&failed), "{failed:?}");
    }
    assert_eq!(
        rerun.runs(1).iter().map(|r| r.1).collect::<Vec<_>>(),
        [0, 1]
    );
}

/// Whether a call failed transiently (a retry may run it).
fn transient(outcome: &Result<serde_json::Value, ToolError>) -> bool {
    matches!(
        outcome,
        Err(ToolError::Failed {
            permanent: false,
            ..
        })
    )
}
