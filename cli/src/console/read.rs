//! What the console reads of its namespace: one scan serves every list
//! (what awaits approval and the unknown outcomes, oldest first, and the
//! records that keep a decision), and the decisions are read from the
//! youngest of those, read whole. Both are kept a moment (`fresh.rs`).

use idem::IdemStore;
use idem::store::{About, RecordInfo, RecordState, ScanFilter};
use serde_json::Value;

use super::views;

/// How many of the records that keep a decision are read whole for the
/// list of decisions, youngest first: the page shows the last 50.
const DECISIONS_READ: usize = 200;

/// The namespace as the console last read it: the records it shows.
pub(super) struct Namespace {
    /// Awaiting approval, oldest first.
    pub(super) awaiting: Vec<RecordInfo>,
    /// Unknown outcomes, oldest first.
    pub(super) unknown: Vec<RecordInfo>,
    /// Those that keep a decision, or may: approved once (their `about`
    /// says by whom; awaiting again, revoked) or failed (a refusal is a
    /// failed record's payload), youngest first.
    decided: Vec<RecordInfo>,
}

/// Every record of `filter`'s namespace that `shows` keeps, in one scan.
pub(super) async fn namespace(
    store: &dyn IdemStore,
    filter: &ScanFilter,
    shows: impl Fn(&RecordInfo) -> bool,
) -> Result<Namespace, String> {
    let mut namespace = Namespace {
        awaiting: Vec::new(),
        unknown: Vec::new(),
        decided: Vec::new(),
    };
    crate::scan::scan(store, filter, None, |record| {
        if !shows(&record) {
            return;
        }
        let approved = record
            .about
            .as_deref()
            .and_then(About::parse)
            .is_some_and(|a| a.approved.is_some());
        if approved || record.state == RecordState::Failed {
            namespace.decided.push(record.clone());
        }
        match record.state {
            RecordState::Awaiting => namespace.awaiting.push(record),
            RecordState::Unknown => namespace.unknown.push(record),
            _ => {}
        }
    })
    .await?;
    crate::scan::by_age(&mut namespace.awaiting);
    crate::scan::by_age(&mut namespace.unknown);
    crate::scan::by_age(&mut namespace.decided);
    namespace.decided.reverse();
    namespace.decided.truncate(DECISIONS_READ);
    Ok(namespace)
}

/// The decisions `namespace`'s records keep, newest first: those whose
/// payload says them read whole from `store` (a scan does not read
/// payloads).
pub(super) async fn decisions(store: &dyn IdemStore, namespace: &Namespace) -> Vec<Value> {
    let mut records = namespace.decided.clone();
    for record in &mut records {
        let said_by_payload = matches!(record.state, RecordState::Failed | RecordState::Awaiting);
        if said_by_payload && record.payload.is_none() {
            let read = store.inspect(&record.key).await;
            if let Ok(Some(whole)) = read {
                *record = whole;
            }
        }
    }
    views::decisions(&records)
}
