//! Approval: a record awaiting a person's approval answers every claim
//! with what was asked and takes no token operation but the decision, by
//! the token that asked; of two decisions at once one lands; an approval
//! is used once, by a claim of the very arguments approved, and lapses
//! with its window; until it is used, it is revoked by the token that
//! asked.

use std::time::Duration;

use serde_json::json;

use crate::error::{ResolveError, StoreError, ToolError};
use crate::store::{ClaimRequest, Entry, IdemStore, LeaseToken, Outcome, RecordState};
use crate::testing::fixtures::Counter;
use crate::testing::harness::Harness;
use crate::testing::helpers::*;
use crate::tool::{Approval, WriteOptions};

/// What the cases ask a person.
const REQUEST: &str = r#"{"asks":"charge | 5 EUR"}"#;
/// What an approval writes over the record's about: who approved.
const APPROVED: &str = r#"{"arguments":{"n":1},"approved":{"by":"ana | ops"}}"#;

fn awaiting(ttl: Duration) -> Outcome<'static> {
    Outcome::Awaiting {
        request: REQUEST,
        ttl,
    }
}

fn approved(about: &str, window: Duration) -> Outcome<'_> {
    Outcome::Approved { about, window }
}

/// Claims `k` with fingerprint `fp(1)` and settles it awaiting; returns
/// the token that asked.
async fn ask(store: &dyn IdemStore, k: &crate::IdemKey) -> LeaseToken {
    let f = fp(1);
    let request = ClaimRequest::new(TOOL, &f, LONG).about(r#"{"arguments":{"n":1}}"#);
    let token = acquired(store.claim(k, request).await);
    store
        .settle(k, &token, awaiting(LONG))
        .await
        .expect("asked by the holder");
    token
}

/// An awaiting record answers claims and reads with what was asked and
/// refuses every token operation but a decision by the token that asked;
/// an approval repeated changes nothing, another is refused; a claim of
/// other arguments finds the approval and cannot use it; a claim of the
/// approved arguments uses it, once, keeping who approved; an approval
/// not used within its window lapses, and the next claim asks again.
pub async fn approval_is_used_once_by_its_own_arguments<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "approval");
    let asked = ask(&*store, &k).await;
    for entry in [
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        store.get(&k).await.expect("get").expect("a record"),
    ] {
        assert!(
            matches!(&entry, Entry::Awaiting { request, fingerprint, .. }
                if request == REQUEST && *fingerprint == f),
            "an awaiting record answers with what was asked: {entry:?}"
        );
    }
    let info = inspected(&*store, &k).await;
    assert_eq!(
        (info.state, info.holder, info.payload.as_deref()),
        (RecordState::Awaiting, Some(asked), Some(REQUEST))
    );
    store
        .settle(&k, &asked, awaiting(LONG))
        .await
        .expect("the same request repeated");
    lease_lost(store.renew(&k, &asked, LONG).await, "renew while awaiting");
    lease_lost(
        store.settle(&k, &asked, done_with("1")).await,
        "a result while awaiting",
    );
    let stranger = LeaseToken::generate(0);
    lease_lost(
        store.settle(&k, &stranger, approved(APPROVED, LONG)).await,
        "an approval with another token",
    );
    store
        .settle(&k, &asked, approved(APPROVED, LONG))
        .await
        .expect("approved with the token that asked");
    store
        .settle(&k, &asked, approved(APPROVED, LONG))
        .await
        .expect("the same approval repeated");
    lease_lost(
        store.settle(&k, &asked, approved("{}", LONG)).await,
        "another approval of an approved record",
    );
    the_approval_is_used_once(&*store, &k, &asked).await;
    an_approval_lapses_with_its_window(&*store, &ns).await;
}

/// The approved record under `k` (asked with `asked`): a claim of other
/// arguments cannot use it; one of the approved arguments does, at the
/// same attempt, keeping who approved through its run and its result; the
/// next finds it running.
async fn the_approval_is_used_once(store: &dyn IdemStore, k: &crate::IdemKey, asked: &LeaseToken) {
    let (k, f) = (k.clone(), fp(1));
    assert_eq!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &fp(2), LONG)).await),
        Entry::Approved {
            fingerprint: f.clone()
        },
        "other arguments cannot use the approval"
    );
    let ran = match store
        .claim(&k, ClaimRequest::new(TOOL, &f, LONG).about("{}"))
        .await
    {
        Ok(crate::store::Claim::Approved(token)) => token,
        other => panic!("the approved arguments use the approval, got {other:?}"),
    };
    assert_eq!(ran.attempt(), asked.attempt(), "nothing ran before it");
    let info = inspected(store, &k).await;
    assert_eq!(
        (info.state, info.about.as_deref()),
        (RecordState::Running, Some(APPROVED)),
        "the running record says who approved"
    );
    assert!(matches!(
        existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
        Entry::Running { .. }
    ));
    store.settle(&k, &ran, done_with("1")).await.expect("done");
    assert_eq!(inspected(store, &k).await.about.as_deref(), Some(APPROVED));
}

/// An approval not used within its window lapses: the record is gone, and
/// the next claim is a first one, which asks again.
async fn an_approval_lapses_with_its_window(store: &dyn IdemStore, ns: &str) {
    let (k, f) = (key(ns, "window"), fp(1));
    let asked = ask(store, &k).await;
    store
        .settle(&k, &asked, approved(APPROVED, SHORT))
        .await
        .expect("approved for a short window");
    past_short().await;
    assert_eq!(store.get(&k).await.expect("get"), None, "lapsed");
    let again = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!(again.attempt(), 0, "a first claim, which asks again");
}

/// Two people decide one request at once, one approving and one
/// refusing: exactly one lands, the other is fenced, and every claim then
/// meets what the first decided.
pub async fn approval_decisions_race_to_one<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    for round in 0..4 {
        let k = key(&ns, &format!("race-{round}"));
        let asked = ask(&*store, &k).await;
        let refused = Outcome::Failed {
            error: "refused by bob",
            ttl: LONG,
        };
        let (a, b) = tokio::join!(
            store.settle(&k, &asked, approved(APPROVED, LONG)),
            store.settle(&k, &asked, refused),
        );
        let claim = store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await;
        match (a, b, claim) {
            (Ok(()), Err(StoreError::LeaseLost), Ok(crate::store::Claim::Approved(_))) => {}
            (Err(StoreError::LeaseLost), Ok(()), Ok(crate::store::Claim::Existing(entry))) => {
                assert_eq!(
                    entry,
                    Entry::Failed {
                        error: "refused by bob".into(),
                        fingerprint: f.clone()
                    }
                );
            }
            other => panic!("exactly one decision must land, got {other:?}"),
        }
    }
}

/// An approval not yet used is revoked by the token that asked: the
/// record awaits again (its about kept, its payload the new request), and
/// a repeat of the same revocation changes nothing; another token, or a
/// revocation once a claim has used the approval, is fenced. Of a
/// revocation and the claim that would use the approval, at once,
/// exactly one lands.
pub async fn an_unused_approval_is_revoked_by_its_token<H: Harness>(h: &H) {
    const AGAIN: &str = r#"{"asks":"again","revoked":{"by":"carol"}}"#;
    let revoked = Outcome::Awaiting {
        request: AGAIN,
        ttl: LONG,
    };
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "revoked");
    let asked = ask(&*store, &k).await;
    lease_lost(
        store.settle(&k, &asked, revoked).await,
        "a revocation of no approval",
    );
    store
        .settle(&k, &asked, approved(APPROVED, LONG))
        .await
        .expect("approved");
    let info = inspected(&*store, &k).await;
    assert_eq!(
        (info.state, info.holder),
        (RecordState::Approved, Some(asked)),
        "the token that asked revokes"
    );
    let stranger = LeaseToken::generate(0);
    lease_lost(
        store.settle(&k, &stranger, revoked).await,
        "a revocation with another token",
    );
    store.settle(&k, &asked, revoked).await.expect("revoked");
    store
        .settle(&k, &asked, revoked)
        .await
        .expect("the same revocation repeated");
    let info = inspected(&*store, &k).await;
    assert_eq!(
        (
            info.state,
            info.holder,
            info.payload.as_deref(),
            info.about.as_deref()
        ),
        (
            RecordState::Awaiting,
            Some(asked),
            Some(AGAIN),
            Some(APPROVED)
        ),
        "awaiting again, saying who revoked, the about kept"
    );
    assert!(
        matches!(
            existing(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await),
            Entry::Awaiting { .. }
        ),
        "a claim finds it awaiting"
    );
    store
        .settle(&k, &asked, approved(APPROVED, LONG))
        .await
        .expect("approved again");
    a_revocation_races_the_run(&*store, &ns, revoked).await;
}

/// Of a revocation and the claim that would use the approval, at once,
/// exactly one lands; a revocation of a used approval is fenced.
async fn a_revocation_races_the_run(store: &dyn IdemStore, ns: &str, revoked: Outcome<'_>) {
    let f = fp(1);
    for round in 0..4 {
        let k = key(ns, &format!("revoke-race-{round}"));
        let asked = ask(store, &k).await;
        store
            .settle(&k, &asked, approved(APPROVED, LONG))
            .await
            .expect("approved");
        let (revoke, claim) = tokio::join!(
            store.settle(&k, &asked, revoked),
            store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)),
        );
        match (revoke, claim) {
            (Ok(()), Ok(crate::store::Claim::Existing(Entry::Awaiting { .. }))) => {}
            (Err(StoreError::LeaseLost), Ok(crate::store::Claim::Approved(ran))) => {
                lease_lost(
                    store.settle(&k, &asked, revoked).await,
                    "a revocation of a used approval",
                );
                store
                    .settle(&k, &ran, done_with("1"))
                    .await
                    .expect("the run records its result");
            }
            other => panic!("a revocation or the run must land, not both: {other:?}"),
        }
    }
}

/// What the awaiting `record` says is asked, on what terms.
fn asked_of(record: &crate::store::RecordInfo) -> crate::store::ApprovalAsked {
    let asked = record.payload.as_deref();
    let asked = asked.and_then(crate::store::ApprovalAsked::parse);
    asked.expect("the awaiting record says what is asked, on what terms")
}

/// Through the registry, a tool that needs approval runs nothing until a
/// person approves that very operation: every call before is told it
/// waits (asked once); after the approval the next call runs the body
/// once and later ones replay it; other arguments are another operation,
/// with an approval of its own; a refusal is answered to every call; a
/// decision on a record that does not await one is refused, and of an
/// approval and a refusal at once one lands. With `Approval::Decided` the
/// tool's function says which calls ask.
pub async fn registry_runs_an_approved_operation_once<H: Harness>(h: &H) {
    let options = WriteOptions::new().approval(Approval::Required);
    let counter = Counter::new(Duration::ZERO, options);
    let registry = registry(h.store(), &namespace(), &counter);
    let call = |n: u64| registry.call("r", "counter", json!({ "n": n }));
    let k1 = waits(&call(1).await).expect("the first call asks");
    let asked = inspected(registry.store(), &k1).await;
    assert_eq!(waits(&call(1).await), Some(k1.clone()), "a duplicate waits");
    let again = inspected(registry.store(), &asked.key).await;
    assert_eq!(again.holder, asked.holder, "nothing is asked twice");
    let k2 = waits(&call(2).await).expect("other arguments ask for themselves");
    assert_ne!(k1, k2);
    assert_eq!(counter.total(), 0, "nothing ran before an approval");
    let k1 = asked.key;
    registry.approve(&k1, "ana").await.expect("approved");
    assert!(matches!(
        registry.approve(&k1, "bob").await,
        Err(ResolveError::NotAwaiting {
            state: RecordState::Approved,
            ..
        })
    ));
    assert!(waits(&call(2).await).is_some(), "k1's approval is not k2's");
    let ran = call(1).await.expect("runs once approved");
    assert_eq!(call(1).await.expect("replayed"), ran);
    assert_eq!(counter.total(), 1, "one approval, one run");
    let about = inspected(registry.store(), &k1)
        .await
        .about
        .unwrap_or_default();
    assert!(about.contains(r#""by":"ana""#), "who approved: {about}");
    registry
        .deny(&k2, "bob", "too large")
        .await
        .expect("refused");
    for _ in 0..2 {
        match call(2).await {
            Err(ToolError::Denied {
                key, by, reason, ..
            }) => assert_eq!(
                (key, by.as_deref(), reason.as_str()),
                (k2.clone(), Some("bob"), "too large")
            ),
            other => panic!("a refusal is answered, got {other:?}"),
        }
    }
    assert!(matches!(
        registry.deny(&k2, "bob", "twice").await,
        Err(ResolveError::NotAwaiting {
            state: RecordState::Failed,
            ..
        })
    ));
    assert!(matches!(
        registry.approve(&key(&namespace(), "never"), "ana").await,
        Err(ResolveError::NotFound { .. })
    ));
    let k3 = waits(&call(3).await).expect("asks");
    let (a, d) = tokio::join!(
        registry.approve(&k3, "ana"),
        registry.deny(&k3, "bob", "no")
    );
    let lost = |r: &Result<(), ResolveError>| {
        matches!(
            r,
            Err(ResolveError::Raced { .. } | ResolveError::NotAwaiting { .. })
        )
    };
    assert!(
        (a.is_ok() && lost(&d)) || (d.is_ok() && lost(&a)),
        "exactly one decision lands: {a:?}, {d:?}"
    );
    assert_eq!(call(3).await.is_ok(), a.is_ok());
    assert_eq!(counter.total(), 1 + usize::from(a.is_ok()));
    the_tools_function_decides(h, options).await;
}

/// With `Approval::Decided` the tool's function says which calls ask.
async fn the_tools_function_decides<H: Harness>(h: &H, options: WriteOptions) {
    let decided = Counter::new(Duration::ZERO, options.approval(Approval::Decided));
    let registry = crate::testing::helpers::registry(h.store(), &namespace(), &decided);
    let small = registry.call("r", "counter", json!({ "n": 5 })).await;
    assert!(small.is_ok(), "under the limit it runs: {small:?}");
    let large = registry.call("r", "counter", json!({ "n": 500 })).await;
    assert!(waits(&large).is_some(), "over it, it asks: {large:?}");
}

/// A tool's approval terms are kept in the record that asks: its window,
/// and its TTL. An approval is good for the tool's window, then lapses and
/// the next call asks again; a refusal is kept for the tool's TTL; and a
/// registry that does not hold the tool (an operator's, another service's)
/// decides on the terms the record keeps.
pub async fn registry_keeps_the_tools_approval_terms<H: Harness>(h: &H) {
    let ttl = Duration::from_secs(3 * 86_400);
    let options = WriteOptions::new()
        .approval(Approval::Required)
        .approval_window(SHORT)
        .ttl(ttl);
    let counter = Counter::new(Duration::ZERO, options);
    let ns = namespace();
    let registry = registry(h.store(), &ns, &counter);
    let call = |n: u64| registry.call("r", "counter", json!({ "n": n }));
    let asked = waits(&call(1).await).expect("asks");
    let terms = asked_of(&inspected(registry.store(), &asked).await);
    assert_eq!((terms.window, terms.ttl), (Some(SHORT), Some(ttl)));

    registry.approve(&asked, "ana").await.expect("approved");
    let approved = inspected(registry.store(), &asked).await;
    assert!(
        approved.expires_in <= SHORT,
        "good for the window: {approved:?}"
    );
    past_short().await;
    assert!(
        waits(&call(1).await).is_some(),
        "lapsed: the next call asks again"
    );
    assert_eq!(counter.total(), 0);

    let refused = waits(&call(2).await).expect("asks");
    registry.deny(&refused, "bob", "no").await.expect("refused");
    let kept = inspected(registry.store(), &refused).await.expires_in;
    assert!(
        kept > ttl - LONG && kept <= ttl,
        "kept for the TTL: {kept:?}"
    );

    // A registry without the tool decides on the record's terms.
    let operator = operator(h.store(), &ns);
    let other = waits(&call(3).await).expect("asks");
    operator.approve(&other, "ops").await.expect("approved");
    let approved = inspected(registry.store(), &other).await;
    assert!(
        approved.expires_in <= SHORT,
        "the tool's window: {approved:?}"
    );
    let last = waits(&call(4).await).expect("asks");
    operator.deny(&last, "bob", "no").await.expect("refused");
    let kept = inspected(registry.store(), &last).await.expires_in;
    assert!(kept > ttl - LONG && kept <= ttl, "the tool's TTL: {kept:?}");
}

/// Through the registry, an approval not yet used is revoked: the next
/// call is told it waits again, the record says who revoked it, on the
/// tool's terms; approved anew, it runs once. Revoking what is no unused
/// approval (awaiting, done, refused, absent) is refused with what it is,
/// changing nothing; a registry without the tool revokes on the terms the
/// approval kept.
pub async fn registry_revokes_an_unused_approval<H: Harness>(h: &H) {
    let ttl = Duration::from_secs(2 * 86_400);
    let options = WriteOptions::new()
        .approval(Approval::Required)
        .approval_window(LONG)
        .ttl(ttl);
    let counter = Counter::new(Duration::ZERO, options);
    let ns = namespace();
    let registry = registry(h.store(), &ns, &counter);
    let call = |n: u64| registry.call("r", "counter", json!({ "n": n }));
    let k = waits(&call(1).await).expect("asks");
    let not_approved = |r: Result<(), ResolveError>, want: RecordState| match r {
        Err(ResolveError::NotApproved { state, .. }) => assert_eq!(state, want),
        other => panic!("revoking a record {want} is refused, got {other:?}"),
    };
    not_approved(registry.revoke(&k, "carol").await, RecordState::Awaiting);
    registry.approve(&k, "ana").await.expect("approved");
    registry.revoke(&k, "carol").await.expect("revoked");
    assert_eq!(waits(&call(1).await), Some(k.clone()), "it waits again");
    assert_eq!(counter.total(), 0, "nothing ran");
    let info = inspected(registry.store(), &k).await;
    let asked = asked_of(&info);
    assert_eq!(
        (asked.revoked.map(|r| r.by), asked.window, asked.ttl),
        (Some("carol".to_owned()), Some(LONG), Some(ttl)),
        "who revoked, and the tool's terms"
    );
    assert!(
        info.expires_in > ttl - LONG,
        "it awaits for the TTL: {info:?}"
    );
    registry.approve(&k, "ana").await.expect("approved again");
    let ran = call(1).await.expect("runs once approved");
    assert_eq!(call(1).await.expect("replayed"), ran);
    assert_eq!(counter.total(), 1);
    not_approved(registry.revoke(&k, "carol").await, RecordState::Done);
    let refused = waits(&call(2).await).expect("asks");
    registry.deny(&refused, "bob", "no").await.expect("refused");
    not_approved(
        registry.revoke(&refused, "carol").await,
        RecordState::Failed,
    );
    assert!(matches!(
        registry.revoke(&key(&ns, "never"), "carol").await,
        Err(ResolveError::NotFound { .. })
    ));

    let operator = operator(h.store(), &ns);
    let other = waits(&call(3).await).expect("asks");
    operator.approve(&other, "ops").await.expect("approved");
    operator
        .revoke(&other, "ops")
        .await
        .expect("revoked without the tool");
    let info = inspected(registry.store(), &other).await;
    let asked = asked_of(&info);
    assert_eq!(
        (asked.window, asked.ttl),
        (Some(LONG), Some(ttl)),
        "the terms the approval kept"
    );
    assert!(
        info.expires_in > ttl - LONG && info.expires_in <= ttl,
        "{info:?}"
    );
    assert_eq!(counter.total(), 1, "nothing else ran");
}
