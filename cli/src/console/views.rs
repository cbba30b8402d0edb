//! What the console shows of records beyond what `idem show --json`
//! does: the tenant a record names, a page of a list, and the decisions
//! made (who, what, when, and what the operation is now).

use idem::store::{About, ApprovalAsked, RecordInfo, RecordState, Refusal};
use serde_json::{Value, json};

/// How many items a page holds unless asked, and at most.
const PAGE: usize = 100;
const PAGE_AT_MOST: usize = 1000;

/// The tenant `record`'s operation was called for; `None` when it names
/// none or cannot be read (sealed).
pub(super) fn tenant(record: &RecordInfo) -> Option<String> {
    record.about.as_deref().and_then(About::parse)?.tenant
}

/// Which part of a list is asked for: `?offset=N&limit=M`.
pub(super) struct Page {
    offset: usize,
    limit: usize,
}

impl Page {
    /// The page `query` asks for (the first [`PAGE`] by default).
    pub(super) fn of(query: Option<&str>) -> Page {
        let mut page = Page {
            offset: 0,
            limit: PAGE,
        };
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match (name.as_ref(), value.parse::<usize>()) {
                ("offset", Ok(n)) => page.offset = n,
                ("limit", Ok(n)) => page.limit = n.clamp(1, PAGE_AT_MOST),
                _ => {}
            }
        }
        page
    }

    /// The answer: `total`, the page's place and its `items`, each as
    /// `shown` shows it.
    pub(super) fn answer<T>(&self, all: &[T], shown: impl Fn(&T) -> Value) -> Value {
        let items: Vec<Value> = all
            .iter()
            .skip(self.offset)
            .take(self.limit)
            .map(shown)
            .collect();
        json!({
            "total": all.len(),
            "offset": self.offset,
            "limit": self.limit,
            "items": items,
        })
    }
}

/// The decisions `records` keep, newest first: approvals (and what came
/// of them), refusals and revocations, with who made them and when.
pub(super) fn decisions(records: &[RecordInfo]) -> Vec<Value> {
    let mut made: Vec<Value> = records.iter().filter_map(decision).collect();
    made.sort_by(|a, b| b["at"].as_str().cmp(&a["at"].as_str()));
    made
}

/// The decision `record` keeps, if any.
fn decision(record: &RecordInfo) -> Option<Value> {
    let about = record.about.as_deref().and_then(About::parse);
    let base = |decision: &str, by: Option<&str>, at: Option<&str>| {
        json!({
            "key": record.key.as_str(),
            "tool": record.tool,
            "tenant": about.as_ref().and_then(|a| a.tenant.clone()),
            "decision": decision,
            "by": by,
            "at": at,
            "state": record.state.as_str(),
            "outcome": outcome(record.state),
        })
    };
    let payload = record.payload.as_deref();
    match record.state {
        RecordState::Failed => {
            let refusal = payload.and_then(Refusal::parse)?;
            let mut made = base("refused", refusal.by.as_deref(), refusal.at.as_deref());
            made["reason"] = refusal.reason.into();
            made["outcome"] = "refused".into();
            Some(made)
        }
        RecordState::Awaiting => {
            let revoked = payload.and_then(ApprovalAsked::parse)?.revoked?;
            Some(base("revoked", Some(&revoked.by), Some(&revoked.at)))
        }
        _ => {
            let approved = about.as_ref()?.approved.as_ref()?;
            Some(base("approved", Some(&approved.by), Some(&approved.at)))
        }
    }
}

/// What became of an approved operation, by the state of its record.
fn outcome(state: RecordState) -> &'static str {
    match state {
        RecordState::Approved => "not used yet",
        RecordState::Running => "running",
        RecordState::Done => "ran",
        RecordState::Failed => "failed",
        RecordState::Unknown => "outcome unknown",
        RecordState::Released => "to run again",
        RecordState::Awaiting => "awaits a decision again",
    }
}
