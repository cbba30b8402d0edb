//! `approvals`, `approve`, `deny` and `revoke`: the operations that wait
//! for a person's approval (a tool with `approval = "required"`), oldest
//! first, with what each would do; and a person's decision on one, bound
//! to that very operation: approved, its next call runs it once; refused,
//! every call of it is answered the refusal; an approval not yet used,
//! revoked, it awaits again. A decision is the store's fenced settle on
//! the token that asked, so of two at once (or a decision and the call
//! that uses an approval) one lands and the other is told; it is logged on
//! stderr.

use std::time::Duration;

use idem::notify::{EventKind, Webhooks};
use idem::store::{About, ApprovalAsked, Outcome, RecordInfo, RecordState, Refusal, ScanFilter};
use idem::{APPROVAL_WINDOW, IdemKey, IdemStore, StoreError};
use serde_json::json;

use crate::notify;
use crate::output::say;
use crate::record::{arguments_json, arguments_line, human, inspected};
use crate::refused::Refused;

/// `approvals`: every awaiting record of the namespace `filter` names,
/// oldest first, with its tool, tenant, run, age and arguments; `json`,
/// one object a line.
pub(crate) async fn approvals(
    store: &dyn IdemStore,
    filter: ScanFilter,
    json: bool,
) -> Result<(), String> {
    let filter = filter.state(RecordState::Awaiting);
    let records = crate::scan::oldest_first(store, &filter, |_| true).await?;
    if !json {
        say!(
            "{:<8} {:<20} {:<16} {:<16} KEY",
            "AGE",
            "TOOL",
            "TENANT",
            "RUN"
        );
    }
    for record in &records {
        print_awaiting(record, json);
    }
    if !json {
        let n = records.len();
        eprintln!(
            "{n} operation{} awaiting approval",
            if n == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

/// One awaiting record, and what it says of its operation.
fn print_awaiting(record: &RecordInfo, json: bool) {
    let about = record
        .about
        .as_deref()
        .and_then(|a| crate::record::about(a).ok());
    let (tenant, run) = about.map_or((None, None), |a| (a.tenant, a.run));
    if json {
        let age = record
            .age
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let line = json!({
            "key": record.key.as_str(), "tool": record.tool, "tenant": tenant, "run": run,
            "age_ms": age, "arguments": arguments_json(record),
        });
        say!("{line}");
        return;
    }
    let arguments = arguments_line(record);
    say!(
        "{:<8} {:<20} {:<16} {:<16} {}",
        record.age.map_or("-".into(), human),
        record.tool.as_deref().unwrap_or("-"),
        tenant.as_deref().unwrap_or("-"),
        run.as_deref().unwrap_or("-"),
        record.key,
    );
    say!("{:<8} arguments: {arguments}", "");
}

/// A person's decision on an awaiting operation, or their taking back an
/// approval not yet used.
pub(crate) enum Decision {
    /// Approved by this person.
    Approve { by: String },
    /// Refused by this person, for this reason, the refusal kept this
    /// long (by default, the tool's TTL, as the awaiting record keeps it).
    Deny {
        by: String,
        reason: String,
        ttl: Option<Duration>,
    },
    /// The approval revoked by this person: awaiting again.
    Revoke { by: String },
}

impl Decision {
    /// The state a record must be in to be decided so.
    fn decides(&self) -> RecordState {
        match self {
            Decision::Revoke { .. } => RecordState::Approved,
            _ => RecordState::Awaiting,
        }
    }

    /// What it did, for the log and for the refusal when it could not.
    fn done(&self) -> &'static str {
        match self {
            Decision::Approve { .. } => "approved",
            Decision::Deny { .. } => "refused",
            Decision::Revoke { .. } => "revoked",
        }
    }
}

/// The refusal's keeping when neither the person nor the record says: the
/// registry's default TTL.
const DEFAULT_TTL: Duration = Duration::from_secs(86_400);

/// `approve`, `deny` and `revoke`: settles the record under `key` as
/// `decision` says, on the token that asked.
pub(crate) async fn decide(
    store: &dyn IdemStore,
    key: &IdemKey,
    decision: Decision,
    webhooks: Option<&Webhooks>,
) -> Result<(), Refused> {
    let record = inspected(store, key).await?;
    let token = decidable(key, &record, &decision)?;
    let terms = terms(&record);
    let (window, ttl) = (
        terms.window.unwrap_or(APPROVAL_WINDOW),
        terms.ttl.unwrap_or(DEFAULT_TTL),
    );
    let terms = terms.with_terms(window, ttl);
    let text;
    let (outcome, kept) = match &decision {
        Decision::Approve { by } => {
            text = About::approval(record.about.as_deref(), by, &terms);
            let outcome = Outcome::Approved {
                about: &text,
                window,
            };
            (
                outcome,
                format!("the approval is good for {}", human(window)),
            )
        }
        Decision::Deny {
            by,
            reason,
            ttl: given,
        } => {
            text = Refusal::new(by, reason).to_payload();
            let ttl = given.unwrap_or(ttl);
            let outcome = Outcome::Failed { error: &text, ttl };
            (outcome, format!("the refusal is kept for {}", human(ttl)))
        }
        Decision::Revoke { by } => {
            let tool = record.tool.as_deref().unwrap_or("-");
            let request = ApprovalAsked::for_tool(tool, terms.tenant.as_deref());
            text = request.with_terms(window, ttl).revoked_by(by).to_payload();
            let outcome = Outcome::Awaiting {
                request: &text,
                ttl,
            };
            (
                outcome,
                format!("it awaits a decision again, for {}", human(ttl)),
            )
        }
    };
    let what = decision.done();
    match store.settle(key, &token, outcome).await {
        Ok(()) => {
            eprintln!(
                "idem: {what} {key} (tool {}, {} for {}); {kept}",
                record.tool.as_deref().unwrap_or("-"),
                record.state,
                record.age.map_or("-".into(), human),
            );
            tell(webhooks, &record, &decision);
            crate::store::announce(store, key).await;
            Ok(())
        }
        Err(StoreError::LeaseLost) => Err(Refused::Conflict(format!(
            "{key} was not {what}: it changed meanwhile (a call used it, or another decision \
             came first); look at it again with `idem show`"
        ))),
        Err(e) => Err(Refused::Store(format!("cannot decide {key}: {e}"))),
    }
}

/// Tells `webhooks` of `decision` on `record`: an approval or a
/// refusal (a revocation is no event).
fn tell(webhooks: Option<&Webhooks>, record: &RecordInfo, decision: &Decision) {
    match decision {
        Decision::Approve { by } => {
            notify::tell(webhooks, record, EventKind::ApprovalApproved, |e| {
                e.with("by", by.as_str())
            })
        }
        Decision::Deny { by, reason, .. } => {
            notify::tell(webhooks, record, EventKind::ApprovalDenied, |e| {
                e.with("by", by.as_str()).with("reason", reason.as_str())
            })
        }
        Decision::Revoke { .. } => {}
    }
}

/// The token `record` is decided with, or why it cannot be decided as
/// `decision` would: not in the state it decides, or sealed.
fn decidable(
    key: &IdemKey,
    record: &RecordInfo,
    decision: &Decision,
) -> Result<idem::store::LeaseToken, Refused> {
    let wanted = decision.decides();
    if record.state != wanted {
        // The registry's refusals, word for word.
        let (key, state) = (key.to_string(), record.state);
        let not = match wanted {
            RecordState::Approved => idem::ResolveError::NotApproved { key, state },
            _ => idem::ResolveError::NotAwaiting { key, state },
        };
        return Err(Refused::Conflict(not.to_string()));
    }
    if record
        .about
        .as_deref()
        .is_some_and(|a| a.starts_with("idem-sealed:"))
    {
        return Err(Refused::Invalid(format!(
            "{key}'s records are sealed (the registry encrypts results), and a decision written \
             here would not be: decide it with Registry::approve, deny or revoke in the \
             application, which has the keys"
        )));
    }
    record.holder.ok_or_else(|| {
        Refused::Store(format!(
            "{key} is {} without the token that asked",
            record.state
        ))
    })
}

/// The terms a decision on `record` is written on, as the record keeps
/// them: the awaiting record's request, or the approval's; the tenant the
/// record names.
fn terms(record: &RecordInfo) -> ApprovalAsked {
    let about = record.about.as_deref().and_then(About::parse);
    let tenant = about.as_ref().and_then(|a| a.tenant.clone());
    let mut terms = match record.state {
        RecordState::Awaiting => record.payload.as_deref().and_then(ApprovalAsked::parse),
        _ => None,
    }
    .unwrap_or_else(|| ApprovalAsked::new(tenant.as_deref(), ""));
    if let Some(approved) = about.and_then(|a| a.approved)
        && record.state == RecordState::Approved
    {
        (terms.window, terms.ttl) = (approved.window, approved.ttl);
    }
    terms
}
