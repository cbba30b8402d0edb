//! `approvals`, `approve` and `deny`: the operations that wait for a
//! person's approval (a tool with `approval = "required"`), oldest first,
//! with what each would do; and a person's decision on one, bound to that
//! very operation: approved, its next call runs it once; refused, every
//! call of it is answered the refusal. A decision is the store's fenced
//! settle on the token that asked, so of two at once one lands and the
//! other is told; it is logged on stderr.

use std::time::Duration;

use idem::store::{About, ApprovalAsked, Outcome, RecordInfo, RecordState, ScanFilter, refusal};
use idem::{APPROVAL_WINDOW, IdemKey, IdemStore, StoreError};
use serde_json::json;

use crate::output::say;
use crate::record::{arguments_json, arguments_line, human, inspected};

/// `approvals`: every awaiting record of the namespace `filter` names,
/// oldest first, with its tool, tenant, run, age and arguments; `json`,
/// one object a line.
pub(crate) async fn approvals(
    store: &dyn IdemStore,
    filter: ScanFilter,
    json: bool,
) -> Result<(), String> {
    let mut records = Vec::new();
    let filter = filter.state(RecordState::Awaiting);
    crate::scan::scan(store, &filter, None, |record| records.push(record)).await?;
    records.sort_by_key(|r| std::cmp::Reverse(r.age.unwrap_or(Duration::ZERO)));
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

/// A person's decision on an awaiting operation.
pub(crate) enum Decision {
    /// Approved by this person.
    Approve { by: String },
    /// Refused, for this reason, the refusal kept this long (by default,
    /// the tool's TTL, as the awaiting record keeps it).
    Deny {
        reason: String,
        ttl: Option<Duration>,
    },
}

/// The refusal's keeping when neither the person nor the record says: the
/// registry's default TTL.
const DEFAULT_TTL: Duration = Duration::from_secs(86_400);

/// `approve` and `deny`: settles the awaiting record under `key` as
/// `decision` says, on the token that asked.
pub(crate) async fn decide(
    store: &dyn IdemStore,
    key: &IdemKey,
    decision: Decision,
) -> Result<(), String> {
    let record = inspected(store, key).await?;
    if record.state != RecordState::Awaiting {
        return Err(format!(
            "{key} is {}, not awaiting approval: only an operation awaiting a person's \
             approval is approved or refused",
            record.state
        ));
    }
    let asked = record
        .holder
        .ok_or_else(|| format!("{key} awaits approval without the token that asked"))?;
    if record
        .about
        .as_deref()
        .is_some_and(|a| a.starts_with("idem-sealed:"))
    {
        return Err(format!(
            "{key}'s records are sealed (the registry encrypts results), and a decision written \
             here would not be: decide it with Registry::approve or Registry::deny in the \
             application, which has the keys"
        ));
    }
    // The tool's terms, as the record asking for the decision keeps them.
    let terms = record.payload.as_deref().and_then(ApprovalAsked::parse);
    let (text, what) = match &decision {
        Decision::Approve { by } => (About::approval(record.about.as_deref(), by), "approved"),
        Decision::Deny { reason, .. } => (refusal(reason), "refused"),
    };
    let (outcome, kept) = match &decision {
        Decision::Approve { .. } => {
            let window = terms.and_then(|t| t.window).unwrap_or(APPROVAL_WINDOW);
            let outcome = Outcome::Approved {
                about: &text,
                window,
            };
            (
                outcome,
                format!("the approval is good for {}", human(window)),
            )
        }
        Decision::Deny { ttl, .. } => {
            let ttl = ttl.or(terms.and_then(|t| t.ttl)).unwrap_or(DEFAULT_TTL);
            let outcome = Outcome::Failed { error: &text, ttl };
            (outcome, format!("the refusal is kept for {}", human(ttl)))
        }
    };
    match store.settle(key, &asked, outcome).await {
        Ok(()) => {
            eprintln!(
                "idem: {what} {key} (tool {}, awaiting for {}); {kept}",
                record.tool.as_deref().unwrap_or("-"),
                record.age.map_or("-".into(), human),
            );
            Ok(())
        }
        Err(StoreError::LeaseLost) => Err(format!(
            "{key} was not {what}: it changed meanwhile (another decision came first); \
             look at it again with `idem show`"
        )),
        Err(e) => Err(format!("cannot decide {key}: {e}")),
    }
}
