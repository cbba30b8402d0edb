//! Operator cases: reading a record in every state (`inspect`), paging
//! through a namespace (`scan`), ending a stuck claim with the holder's
//! token as an operator does, and counting what a purge would remove.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::error::StoreError;
use crate::store::{ClaimRequest, IdemStore, Outcome, RecordInfo, RecordState, ScanFilter};
use crate::testing::harness::Harness;
use crate::testing::helpers::*;

/// What a claim says of its operation in these cases: any text, `|` and
/// all.
const ABOUT: &str = r#"{"arguments":{"memo":"a|b — ü","n":1},"run":"r|1","tenant":null}"#;

/// `inspect` shows each state with its tool, attempt, holder, lease,
/// payload and what its claim said of the operation (kept through a
/// renewal and a settle), hides nothing a released record has, and
/// changes nothing.
pub async fn inspect_shows_every_state<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "a");
    assert_eq!(store.inspect(&k).await.ok(), Some(None), "a fresh key");

    let request = ClaimRequest::new(TOOL, &f, LONG).about(ABOUT);
    let token = acquired(store.claim(&k, request).await);
    assert_eq!(inspected(&*store, &k).await.about.as_deref(), Some(ABOUT));
    store.renew(&k, &token, LONG).await.expect("renew");
    let running = inspected(&*store, &k).await;
    assert_eq!(running.about.as_deref(), Some(ABOUT), "kept by a renewal");
    assert_eq!(
        (running.state, running.tool.as_deref(), running.attempt),
        (RecordState::Running, Some(TOOL), 0)
    );
    assert_eq!(
        (running.key.as_str(), &running.fingerprint),
        (k.as_str(), &f)
    );
    assert_eq!(running.holder.map(|t| t.id()), Some(token.id()));
    let lease = running.lease_left.expect("a running record has a lease");
    assert!(
        lease > Duration::ZERO && lease <= LONG,
        "lease left {lease:?}"
    );
    assert!(running.expires_in > lease, "kept after its lease");
    assert!(running.age.is_some_and(|age| age <= LONG));
    assert_eq!(running.payload, None);
    assert!(
        matches!(
            store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await,
            Ok(crate::store::Claim::Existing(_))
        ),
        "inspecting must not free the claim"
    );

    store
        .settle(&k, &token, done_with(r#"{"ok":1}"#))
        .await
        .expect("settle done");
    let done = inspected(&*store, &k).await;
    assert_eq!(
        (done.state, done.tool.as_deref(), done.attempt),
        (RecordState::Done, Some(TOOL), 0)
    );
    assert_eq!((done.holder, done.lease_left), (None, None));
    assert_eq!(done.payload.as_deref(), Some(r#"{"ok":1}"#));
    assert_eq!(done.about.as_deref(), Some(ABOUT), "kept by a settle");
    released_failed_and_lapsed(&*store, &ns).await;
}

/// `inspect` of a released record, then failed, and of a lapsed claim.
async fn released_failed_and_lapsed(store: &dyn IdemStore, ns: &str) {
    let f = fp(1);
    let r = key(ns, "released");
    let token = acquired(
        store
            .claim(&r, ClaimRequest::new("other_tool", &f, LONG))
            .await,
    );
    store
        .settle(&r, &token, Outcome::Released)
        .await
        .expect("settle released");
    let released = inspected(store, &r).await;
    assert_eq!(
        (released.state, released.tool.as_deref(), released.holder),
        (RecordState::Released, Some("other_tool"), None)
    );
    assert_eq!(released.about, None, "a claim that said nothing");
    let token = acquired(
        store
            .claim(&r, ClaimRequest::new("other_tool", &f, LONG))
            .await,
    );
    store
        .settle(&r, &token, failed_with("declined | 51"))
        .await
        .expect("settle failed");
    let failed = inspected(store, &r).await;
    assert_eq!((failed.state, failed.attempt), (RecordState::Failed, 1));
    assert_eq!(failed.payload.as_deref(), Some("declined | 51"));

    let lapsed = key(ns, "lapsed");
    acquired(
        store
            .claim(&lapsed, ClaimRequest::new(TOOL, &f, SHORT))
            .await,
    );
    past_short().await;
    let info = inspected(store, &lapsed).await;
    assert_eq!(
        (info.state, info.lease_left),
        (RecordState::Running, Some(Duration::ZERO)),
        "a lapsed lease has nothing left"
    );
}

/// An operator ends a stuck claim with the holder's token from
/// `inspect`: the worker still holding it is fenced, the next claim runs
/// as the next attempt, and a release that comes after the worker recorded
/// changes nothing.
pub async fn released_by_the_inspected_holder_fences_the_worker<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let k = key(&ns, "stuck");
    let worker = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    let holder = inspected(&*store, &k).await.holder.expect("a holder");
    store
        .settle(&k, &holder, Outcome::Released)
        .await
        .expect("the operator's release");
    lease_lost(
        store.settle(&k, &worker, done_with("1")).await,
        "the fenced worker's complete",
    );
    let next = acquired(store.claim(&k, ClaimRequest::new(TOOL, &f, LONG)).await);
    assert_eq!(next.attempt(), 1);

    store
        .settle(&k, &next, done_with("2"))
        .await
        .expect("settle done");
    lease_lost(
        store.settle(&k, &holder, Outcome::Released).await,
        "a release with a holder that has since recorded",
    );
    assert_eq!(inspected(&*store, &k).await.state, RecordState::Done);
}

/// `scan` pages through every live record of a namespace and of no other,
/// filters by state and tool, answers what each record says of its
/// operation, and never reads payloads. A store that
/// cannot scan says so with `Unsupported`.
pub async fn scan_pages_through_a_namespace<H: Harness>(h: &H) {
    let store = h.store();
    let (ns, f) = (namespace(), fp(1));
    let filter = ScanFilter::namespace(ns.as_str());
    if store.backend() == "memory" {
        let refused = store.scan(&filter, "", 10).await;
        assert!(
            matches!(refused, Err(StoreError::Unsupported { op: "scan", .. })),
            "the memory store keeps no keys to scan: {refused:?}"
        );
        return;
    }
    let mut made = BTreeSet::new();
    for i in 0..7 {
        let k = key(&ns, &format!("r{i}"));
        let tool = if i < 2 { "other_tool" } else { TOOL };
        let request = ClaimRequest::new(tool, &f, LONG).about(ABOUT);
        let token = acquired(store.claim(&k, request).await);
        if i % 3 == 0 {
            store
                .settle(&k, &token, done_with("1"))
                .await
                .expect("settle done");
        }
        made.insert(k.into_string());
    }
    // Another namespace, and an expired record: neither is answered.
    acquired(
        store
            .claim(&key(&namespace(), "r0"), ClaimRequest::new(TOOL, &f, LONG))
            .await,
    );
    let gone = key(&ns, "gone");
    let token = acquired(store.claim(&gone, ClaimRequest::new(TOOL, &f, LONG)).await);
    store
        .settle(
            &gone,
            &token,
            Outcome::Done {
                result: "1",
                ttl: SHORT,
            },
        )
        .await
        .expect("settle done");
    past_short().await;

    let all = scan_all(&*store, &filter).await;
    assert_eq!(keys(&all), made, "every record of the namespace, once");
    assert!(all.iter().all(|r| r.payload.is_none()), "no payloads");
    assert!(
        all.iter().all(|r| r.about.as_deref() == Some(ABOUT)),
        "what each says of its operation: {all:?}"
    );
    let done = scan_all(&*store, &filter.clone().state(RecordState::Done)).await;
    assert_eq!(done.len(), 3, "r0, r3, r6 are done: {done:?}");
    let other = scan_all(&*store, &filter.clone().tool("other_tool")).await;
    assert_eq!(other.len(), 2, "r0 and r1 are other_tool's: {other:?}");
}

/// Every record of a scan, two to a page; panics on an error or a scan
/// that does not end. A Redis scan walks the whole keyspace two keys a
/// page, whatever else the server holds: the bound is a million pages.
async fn scan_all<S: IdemStore>(store: &S, filter: &ScanFilter) -> Vec<RecordInfo> {
    let (mut records, mut cursor) = (Vec::new(), String::new());
    for _ in 0..1_000_000 {
        let page = match store.scan(filter, &cursor, 2).await {
            Ok(page) => page,
            Err(e) => panic!("scan from {cursor:?}: {e}"),
        };
        records.extend(page.records);
        match page.next {
            Some(next) => cursor = next,
            None => return dedup(records),
        }
    }
    panic!("the scan did not end")
}

/// A scan may answer a record twice (Redis under a rehash); one each.
fn dedup(mut records: Vec<RecordInfo>) -> Vec<RecordInfo> {
    let mut seen = BTreeSet::new();
    records.retain(|r| seen.insert(r.key.as_str().to_owned()));
    records
}

fn keys(records: &[RecordInfo]) -> BTreeSet<String> {
    records.iter().map(|r| r.key.as_str().to_owned()).collect()
}
