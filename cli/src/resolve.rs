//! `pending` and `resolve`: the operations whose outcome is unknown (a
//! tool with `on_uncertain = "refuse"` whose earlier attempt's claim
//! lapsed), oldest first, and an operator's answer for one: it happened
//! (`--done` with the result duplicates are to get), it failed
//! (`--failed`), or it did not happen and may run again (`--rerun`). A
//! resolution is the store's fenced settle on the token that made the
//! record unknown, so of two at once one lands and the other is told; it
//! is logged on stderr.

use std::time::Duration;

use idem::notify::{EventKind, Webhooks};
use idem::store::{Outcome, RecordInfo, RecordState, ScanFilter, UnknownNote};
use idem::{IdemKey, IdemStore, StoreError};
use serde_json::{Value, json};

use crate::notify;
use crate::output::say;
use crate::record::{human, inspected};
use crate::refused::Refused;

/// What an operator found out (one of `--done`, `--failed`, `--rerun`).
pub(crate) enum Answer {
    /// It happened, with this result (JSON text).
    Done(String),
    /// It failed, with this error.
    Failed(String),
    /// It did not happen: the next duplicate runs it.
    Rerun,
}

/// `pending`: every unknown record of the namespace `filter` names, oldest
/// first, with its tool, tenant, age and reason; `json`, one object a line.
pub(crate) async fn pending(
    store: &dyn IdemStore,
    filter: ScanFilter,
    json: bool,
) -> Result<(), String> {
    let filter = filter.state(RecordState::Unknown);
    let records = crate::scan::oldest_first(store, &filter, |_| true).await?;
    if !json {
        say!(
            "{:<8} {:<20} {:<16} {:<7} {:<60} REASON",
            "AGE",
            "TOOL",
            "TENANT",
            "ATTEMPT",
            "KEY"
        );
    }
    for record in &records {
        // The scan reads no payloads: the note is read record by record.
        let note = store
            .inspect(&record.key)
            .await
            .map_err(|e| format!("cannot read {}: {e}", record.key))?
            .map(|full| (full.payload, full.about));
        let (payload, about) = note.unwrap_or_default();
        let note = payload.map(|payload| UnknownNote::parse(&payload).ok_or(payload));
        let mut record = record.clone();
        record.about = about.or(record.about);
        print_pending(&record, note, json);
    }
    if !json {
        let n = records.len();
        eprintln!("{n} unknown outcome{}", if n == 1 { "" } else { "s" });
    }
    Ok(())
}

/// One pending record: its note, or the payload that is none (sealed),
/// and what it says of its operation.
fn print_pending(record: &RecordInfo, note: Option<Result<UnknownNote, String>>, json: bool) {
    let about = record
        .about
        .as_deref()
        .and_then(|a| crate::record::about(a).ok());
    let (tenant, reason) = match &note {
        Some(Ok(note)) => (note.tenant.clone(), note.reason.clone()),
        Some(Err(payload)) if payload.starts_with("idem-sealed:") => {
            (None, "(sealed: the application's keys read it)".to_owned())
        }
        Some(Err(payload)) => (None, payload.clone()),
        None => (None, "(gone since the scan)".to_owned()),
    };
    let tenant = tenant.or_else(|| about.as_ref().and_then(|a| a.tenant.clone()));
    let age = record
        .age
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    if json {
        let line = json!({
            "key": record.key.as_str(), "tool": record.tool, "tenant": tenant,
            "run": about.and_then(|a| a.run), "attempt": record.attempt, "age_ms": age,
            "reason": reason, "arguments": crate::record::arguments_json(record),
        });
        say!("{line}");
        return;
    }
    let arguments = crate::record::arguments_line(record);
    say!(
        "{:<8} {:<20} {:<16} {:<7} {:<60} {reason}",
        record.age.map_or("-".into(), human),
        record.tool.as_deref().unwrap_or("-"),
        tenant.as_deref().unwrap_or("-"),
        record.attempt,
        record.key,
    );
    say!("{:<8} arguments: {arguments}", "");
}

/// `result` (JSON text) as the tool would have given it, for an unknown
/// record whose note is `note`: fitted to the tool's output schema when
/// the note keeps one ([`crate::fits::shaped`]), else as it came.
fn as_the_tool_gives_it(result: &str, note: Option<&str>) -> Result<String, Refused> {
    let value = serde_json::from_str::<Value>(result)
        .map_err(|e| Refused::Invalid(format!("the result is not JSON: {e}")))?;
    let schema = note
        .and_then(UnknownNote::parse)
        .and_then(|note| note.output_schema);
    match schema {
        Some(schema) => crate::fits::shaped(value, &schema)
            .map(|shaped| shaped.to_string())
            .map_err(Refused::Invalid),
        None => Ok(result.to_owned()),
    }
}

/// `resolve`: settles the unknown record under `key` with `answer`, kept
/// for `ttl` (done or failed), on the token that made it unknown.
pub(crate) async fn resolve(
    store: &dyn IdemStore,
    key: &IdemKey,
    answer: Answer,
    ttl: Duration,
    webhooks: Option<&Webhooks>,
) -> Result<(), Refused> {
    let record = inspected(store, key).await?;
    if record.state != RecordState::Unknown {
        return Err(Refused::Conflict(format!(
            "{key} is {}, not unknown: only an unknown outcome is resolved",
            record.state
        )));
    }
    let token = record.holder.ok_or_else(|| {
        Refused::Store(format!(
            "{key} is unknown without the token that made it so"
        ))
    })?;
    if !matches!(answer, Answer::Rerun)
        && record
            .payload
            .as_deref()
            .is_some_and(|p| p.starts_with("idem-sealed:"))
    {
        return Err(Refused::Invalid(format!(
            "{key}'s records are sealed (the registry encrypts results), and a result or error \
             written here would not be: resolve it with Registry::resolve in the application, \
             which has the keys, or give --rerun"
        )));
    }
    let recorded = match &answer {
        Answer::Done(result) => as_the_tool_gives_it(result, record.payload.as_deref())?,
        _ => String::new(),
    };
    let (outcome, what) = match &answer {
        Answer::Done(_) => (
            Outcome::Done {
                result: &recorded,
                ttl,
            },
            "done",
        ),
        Answer::Failed(error) => (Outcome::Failed { error, ttl }, "failed"),
        Answer::Rerun => (Outcome::Released, "to run again"),
    };
    match store.settle(key, &token, outcome).await {
        Ok(()) => {
            eprintln!(
                "idem: resolved {key} {what} (tool {}, attempt {}, unknown for {})",
                record.tool.as_deref().unwrap_or("-"),
                record.attempt,
                record.age.map_or("-".into(), human),
            );
            let resolution = match answer {
                Answer::Done(_) => "done",
                Answer::Failed(_) => "failed",
                Answer::Rerun => "rerun",
            };
            notify::tell(webhooks, &record, EventKind::OutcomeResolved, |e| {
                e.with("resolution", resolution)
            });
            crate::store::announce(store, key).await;
            Ok(())
        }
        Err(StoreError::LeaseLost) => Err(Refused::Conflict(format!(
            "{key} was not resolved: it changed meanwhile (another resolution came first); \
             look at it again with `idem show`"
        ))),
        Err(e) => Err(Refused::Store(format!("cannot resolve {key}: {e}"))),
    }
}
