//! Store-level cases: the operations of the contract, one state and one
//! token at a time, each straight on the store under test.

use std::time::Duration;

use serde_json::json;

use crate::error::{StoreError, ToolError};
use crate::key::Fingerprint;
use crate::store::{Claim, ClaimRequest, Entry, IdemStore, LeaseToken, Outcome};
use crate::testing::fixtures::Counter;
use crate::testing::harness::Harness;
use crate::testing::helpers::*;
use crate::tool::WriteOptions;

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
    let token = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!(token.attempt(), 0);
    assert_eq!(
        store.get(&k).await.ok(),
        Some(Some(Entry::Running {
            fingerprint: f.clone(),
            attempt: 0
        }))
    );
    store
        .settle(&k, &token, done_with(r#"{"ok":true}"#))
        .await
        .expect("settle done");
    let done = Entry::Done {
        result: r#"{"ok":true}"#.into(),
        fingerprint: f.clone(),
    };
    assert_eq!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        done
    );
    assert_eq!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        done
    );
    assert_eq!(store.get(&k).await.ok(), Some(Some(done)));
    lease_lost(
        store.settle(&k, &token, done_with("1")).await,
        "complete after complete",
    );
    lease_lost(
        store.settle(&k, &token, Outcome::Released).await,
        "release after complete",
    );
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
                tokio::spawn(
                    async move { store.claim(&k, ClaimRequest::new(TOOL, &fp(1), LONG)).await },
                )
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

/// A lapsed lease lets the next claim in, one attempt higher, taken over
/// (the lapsed attempt's outcome is uncertain).
pub async fn lapsed_lease_lets_a_new_claim_in<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "lapse");
    let first = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, SHORT)).await);
    assert!(matches!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, SHORT)).await),
        Entry::Running { .. }
    ));
    past_short().await;
    let second = taken_over(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!((first.attempt(), second.attempt()), (0, 1));
    assert_ne!(first, second);
}

/// Renewing keeps other claims out past the original lease.
pub async fn renew_keeps_the_lease<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "renew");
    let lease = Duration::from_millis(1000);
    let token = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, lease)).await);
    for _ in 0..8 {
        tokio::time::sleep(lease / 5).await;
        store
            .renew(&k, &token, lease)
            .await
            .expect("renew by the holder");
    }
    // 1.5 leases have passed since the claim; the renewals kept it.
    assert!(matches!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, lease)).await),
        Entry::Running { attempt: 0, .. }
    ));
    store
        .settle(&k, &token, done_with("1"))
        .await
        .expect("the holder records");
}

/// A worker whose lease lapsed and was taken over can change nothing.
pub async fn stale_token_is_fenced<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "fence");
    let stale = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, SHORT)).await);
    past_short().await;
    let owner = taken_over(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    lease_lost(
        store.settle(&k, &stale, done_with(r#""stale""#)).await,
        "stale complete",
    );
    lease_lost(
        store
            .settle(&k, &stale, Outcome::Unknown { reason: "stale" })
            .await,
        "stale unknown",
    );
    lease_lost(
        store.settle(&k, &stale, failed_with("stale")).await,
        "stale fail",
    );
    lease_lost(store.renew(&k, &stale, LONG).await, "stale renew");
    lease_lost(
        store.settle(&k, &stale, Outcome::Released).await,
        "stale release",
    );
    assert_eq!(
        store.get(&k).await.ok(),
        Some(Some(Entry::Running {
            fingerprint: f.clone(),
            attempt: 1
        })),
        "the stale worker changed the owner's record"
    );
    store
        .settle(&k, &owner, done_with(r#""owner""#))
        .await
        .expect("owner completes");
    lease_lost(
        store.settle(&k, &stale, done_with(r#""stale""#)).await,
        "stale complete after owner",
    );
    assert_eq!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        Entry::Done {
            result: r#""owner""#.into(),
            fingerprint: f.clone()
        }
    );
}

/// A lapsed lease nobody claimed since may still be renewed and recorded.
pub async fn lapsed_but_unclaimed_may_still_record<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "late");
    let token = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, SHORT)).await);
    past_short().await;
    store
        .renew(&k, &token, LONG)
        .await
        .expect("re-claim by renewing");
    assert!(matches!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        Entry::Running { .. }
    ));
    store
        .settle(&k, &token, done_with("7"))
        .await
        .expect("late complete");
    assert_eq!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        Entry::Done {
            result: "7".into(),
            fingerprint: f.clone()
        }
    );
    let k2 = key(&ns, "late-2");
    let token = acquired(store.claim(&k2, ClaimRequest::new(TOOL, &f, SHORT)).await);
    past_short().await;
    store
        .settle(&k2, &token, done_with("8"))
        .await
        .expect("late complete without renewal");
}

/// Release frees the key at once; the next claim counts the attempt.
pub async fn release_counts_the_attempt<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "release");
    let t0 = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(&k, &t0, Outcome::Released)
        .await
        .expect("settle released");
    assert_eq!(
        store.get(&k).await.ok(),
        Some(None),
        "a released key holds no entry"
    );
    lease_lost(
        store.settle(&k, &t0, done_with("1")).await,
        "complete after release",
    );
    let t1 = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(&k, &t1, Outcome::Released)
        .await
        .expect("settle released");
    let t2 = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!((t0.attempt(), t1.attempt(), t2.attempt()), (0, 1, 2));
    store
        .settle(&k, &t2, done_with("2"))
        .await
        .expect("settle done");
}

/// A permanent failure is recorded and replayed.
pub async fn permanent_failure_is_replayed<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "fail");
    let token = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(
            &k,
            &token,
            failed_with("card declined: \"insufficient funds\""),
        )
        .await
        .expect("settle failed");
    let failed = Entry::Failed {
        error: "card declined: \"insufficient funds\"".into(),
        fingerprint: f.clone(),
    };
    assert_eq!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        failed
    );
    assert_eq!(store.get(&k).await.ok(), Some(Some(failed)));
}

/// A recorded result is forgotten after its TTL.
pub async fn result_ttl_expires<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "ttl");
    let token = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(
            &k,
            &token,
            Outcome::Done {
                result: "1",
                ttl: SHORT,
            },
        )
        .await
        .expect("settle done");
    assert!(matches!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        Entry::Done { .. }
    ));
    past_short().await;
    assert_eq!(store.get(&k).await.ok(), Some(None));
    assert_eq!(
        acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await).attempt(),
        0
    );
}

/// Purging frees expired records and leaves live ones alone.
pub async fn purge_removes_only_expired_records<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let (live, dead) = (key(&ns, "live"), key(&ns, "dead"));
    let t = acquired(store.claim(&live, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(&live, &t, done_with("1"))
        .await
        .expect("settle done");
    let t = acquired(store.claim(&dead, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(
            &dead,
            &t,
            Outcome::Done {
                result: "2",
                ttl: SHORT,
            },
        )
        .await
        .expect("settle done");
    past_short().await;
    let counted = store.count_expired().await.expect("count");
    if store.backend() == "redis" {
        assert_eq!(counted, 0, "Redis expires records itself");
    } else {
        assert!(counted >= 1, "the expired record is counted");
    }
    store.purge_expired().await.expect("purge");
    assert_eq!(store.get(&dead).await.ok(), Some(None));
    assert_eq!(
        store.get(&live).await.ok(),
        Some(Some(Entry::Done {
            result: "1".into(),
            fingerprint: f.clone()
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
    lease_lost(
        store.settle(&k, &token, done_with("1")).await,
        "settle done",
    );
    lease_lost(store.settle(&k, &token, failed_with("x")).await, "fail");
    lease_lost(store.renew(&k, &token, LONG).await, "renew");
    lease_lost(store.settle(&k, &token, Outcome::Released).await, "release");
    assert_eq!(
        store.get(&k).await.ok(),
        Some(None),
        "refused ops must not create records"
    );
}

/// The first claim's fingerprint stays with the record, whole: its field
/// tags too.
pub async fn fingerprint_is_kept<H: Harness>(h: &H) {
    let store = h.store();
    let k = key(&namespace(), "fp");
    let token = acquired(store.claim(&k, ClaimRequest::new(TOOL, &fp(1), LONG)).await);
    assert_eq!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &fp(2), LONG)).await),
        Entry::Running {
            fingerprint: fp(1),
            attempt: 0
        }
    );
    store
        .settle(&k, &token, done_with("1"))
        .await
        .expect("settle done");
    assert_eq!(
        *existing(store.claim(&k, ClaimRequest::new(TOOL, &fp(2), LONG)).await).fingerprint(),
        fp(1)
    );
    // As the registry passes it for a tool keyed on all its arguments:
    // the digest the key ends with (which a store may keep implicitly).
    let k = key(&namespace(), "fp-digest");
    let digest = Fingerprint::from_hex(&k.as_str()[k.as_str().len() - 64..])
        .expect("a derived key ends with its digest");
    let token = acquired(
        store
            .claim(&k, ClaimRequest::new(TOOL, &digest, LONG))
            .await,
    );
    assert_eq!(
        *existing(store.claim(&k, ClaimRequest::new(TOOL, &fp(2), LONG)).await).fingerprint(),
        digest
    );
    store
        .settle(&k, &token, done_with("2"))
        .await
        .expect("settle done");
    let entry = store.get(&k).await.expect("get").expect("recorded");
    assert_eq!(*entry.fingerprint(), digest);
    // With field tags, as the registry passes it for a tool keyed on a
    // subset of its arguments: kept whole, tags and all, running and done.
    let k = key(&namespace(), "fp-tagged");
    let tagged = tagged_fp(1, 3);
    let token = acquired(
        store
            .claim(&k, ClaimRequest::new(TOOL, &tagged, LONG))
            .await,
    );
    let running = existing(store.claim(&k, ClaimRequest::new(TOOL, &fp(2), LONG)).await);
    assert_eq!(running.fingerprint().to_hex(), tagged.to_hex());
    store
        .settle(&k, &token, done_with("3"))
        .await
        .expect("settle done");
    let entry = store.get(&k).await.expect("get").expect("recorded");
    assert_eq!(entry.fingerprint().to_hex(), tagged.to_hex());
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

/// A settle sent again by the same token with the same payload (its first
/// reply lost with a dropped connection) succeeds and changes nothing; any
/// other settle of the settled record is fenced.
pub async fn settle_repeated_by_its_token_succeeds<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "repeat-done");
    let token = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(&k, &token, done_with("1"))
        .await
        .expect("settle done");
    store
        .settle(&k, &token, done_with("1"))
        .await
        .expect("the same complete again");
    lease_lost(
        store.settle(&k, &token, done_with("2")).await,
        "another result",
    );
    lease_lost(
        store.settle(&k, &token, failed_with("1")).await,
        "fail after complete",
    );
    lease_lost(store.renew(&k, &token, LONG).await, "renew after complete");
    lease_lost(
        store
            .settle(&k, &LeaseToken::generate(0), done_with("1"))
            .await,
        "another token",
    );
    let done = Entry::Done {
        result: "1".into(),
        fingerprint: f.clone(),
    };
    assert_eq!(store.get(&k).await.ok(), Some(Some(done)));

    let k = key(&ns, "repeat-fail");
    let token = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(&k, &token, failed_with("no"))
        .await
        .expect("settle failed");
    store
        .settle(&k, &token, failed_with("no"))
        .await
        .expect("the same fail again");
    lease_lost(
        store.settle(&k, &token, done_with("no")).await,
        "complete after fail",
    );

    let k = key(&ns, "repeat-release");
    let token = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(&k, &token, Outcome::Released)
        .await
        .expect("settle released");
    store
        .settle(&k, &token, Outcome::Released)
        .await
        .expect("the same release again");
    let next = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!(next.attempt(), 1, "a repeated release counts once");
    lease_lost(
        store.settle(&k, &token, Outcome::Released).await,
        "release after a new claim",
    );
}

/// Duplicates racing to claim a key just released after a transient
/// failure: exactly one wins, the rest see it running, none sees an error.
pub async fn claims_after_a_release_have_one_winner<H: Harness>(h: &H) {
    let store = h.store();
    let ns = namespace();
    for round in 0..5 {
        let k = key(&ns, &format!("released-{round}"));
        let first = acquired(store.claim(&k, ClaimRequest::new(TOOL, &fp(1), LONG)).await);
        store
            .settle(&k, &first, Outcome::Released)
            .await
            .expect("settle released");
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (store, k) = (store.clone(), k.clone());
                tokio::spawn(
                    async move { store.claim(&k, ClaimRequest::new(TOOL, &fp(1), LONG)).await },
                )
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
