//! How the tool prints records: one record in full (`show`), a record as a
//! row of a table (`list`), and either as one JSON object; durations for
//! people (`3m20s`).

use std::time::Duration;

use crate::output::say;
use crate::refused::Refused;
use idem::store::{About, RecordInfo, RecordState, Refusal};
use serde_json::{Value, json};

/// The record under `key`, or why there is none to show.
pub(crate) async fn inspected(
    store: &dyn idem::IdemStore,
    key: &idem::IdemKey,
) -> Result<RecordInfo, Refused> {
    store
        .inspect(key)
        .await
        .map_err(|e| Refused::Store(format!("cannot read {key}: {e}")))?
        .ok_or_else(|| {
            Refused::NotFound(format!(
                "no record under {key} (expired, never written, or mistyped)"
            ))
        })
}

/// A record as one JSON object; the payload only if read.
pub(crate) fn to_json(record: &RecordInfo) -> Value {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let mut out = json!({
        "key": record.key.as_str(),
        "state": record.state.as_str(),
        "tool": record.tool,
        "attempt": record.attempt,
        "fingerprint": record.fingerprint.to_hex(),
        "age_ms": record.age.map(ms),
        "expires_in_ms": ms(record.expires_in),
    });
    if record.state == RecordState::Running {
        out["lease_left_ms"] = record.lease_left.map(ms).into();
    }
    if has_holder(record.state) {
        out["holder"] = record.holder.map(|t| t.id_hex()).into();
    }
    if let Some(payload) = &record.payload {
        let name = payload_name(record.state, payload);
        out[name] = payload_value(record.state, payload);
    }
    match record.about.as_deref().map(about) {
        Some(Ok(about)) => {
            out["tenant"] = about.tenant.into();
            out["run"] = about.run.into();
            out["arguments"] = about.arguments;
            if let Some(approved) = about.approved {
                out["approved"] = serde_json::to_value(approved).unwrap_or_default();
            }
        }
        Some(Err(shown)) => out["about"] = shown.into(),
        None => {}
    }
    out
}

/// What a record says of its operation: an [`About`], or how to show text
/// that is none (sealed, or written by other code).
pub(crate) fn about(text: &str) -> Result<About, String> {
    match About::parse(text) {
        Some(about) => Ok(about),
        None if text.starts_with("idem-sealed:") => {
            Err("(sealed: the application's keys read it)".to_owned())
        }
        None => Err(text.to_owned()),
    }
}

/// The arguments a record shows on one line: compact JSON, or why not.
pub(crate) fn arguments_line(record: &RecordInfo) -> String {
    match arguments_json(record) {
        Value::Null => "-".to_owned(),
        Value::String(shown) => shown,
        arguments => arguments.to_string(),
    }
}

/// The arguments of a record's operation as JSON, as `idem show --json`
/// gives them: an object (hidden fields replaced), a string saying why
/// they cannot be read (sealed), or null when the record says nothing of
/// its operation.
pub(crate) fn arguments_json(record: &RecordInfo) -> Value {
    match record.about.as_deref().map(about) {
        Some(Ok(about)) => about.arguments,
        Some(Err(shown)) => Value::String(shown),
        None => Value::Null,
    }
}

/// How long until the store forgets the record: `-` for an unknown one,
/// which is kept until it is resolved.
fn expires(record: &RecordInfo) -> String {
    match record.state {
        RecordState::Unknown => "-".to_owned(),
        _ => human(record.expires_in),
    }
}

/// A record in full, one field a line.
pub(crate) fn print_full(record: &RecordInfo) {
    let line = |name: &str, value: &str| say!("{name:<12} {value}");
    line("key", record.key.as_str());
    line("state", record.state.as_str());
    line("tool", record.tool.as_deref().unwrap_or("-"));
    line("attempt", &record.attempt.to_string());
    line("age", &record.age.map_or("-".into(), human));
    if record.state == RecordState::Running {
        line("lease", &lease(record));
    }
    if has_holder(record.state) {
        line("holder", &record.holder.map_or("-".into(), |t| t.id_hex()));
    }
    match record.state {
        RecordState::Unknown => line("kept until", "resolved"),
        _ => line("expires in", &expires(record)),
    }
    line("fingerprint", &record.fingerprint.to_hex());
    match record.about.as_deref().map(about) {
        Some(Ok(about)) => {
            line("tenant", about.tenant.as_deref().unwrap_or("-"));
            line("run", about.run.as_deref().unwrap_or("-"));
            line("arguments", &about.arguments.to_string());
            if let Some(approved) = about.approved {
                let then = match record.state {
                    RecordState::Awaiting => ", then revoked",
                    _ => "",
                };
                line(
                    "approved",
                    &format!("by {} at {}{then}", approved.by, approved.at),
                );
            }
        }
        Some(Err(shown)) => line("arguments", &shown),
        None => line("arguments", "- (the record does not say)"),
    }
    if let Some(payload) = &record.payload {
        let shown = match payload_value(record.state, payload) {
            Value::String(s) => s,
            other => serde_json::to_string_pretty(&other).unwrap_or_else(|_| payload.clone()),
        };
        line(
            payload_name(record.state, payload),
            &shown.replace('\n', "\n             "),
        );
    }
}

/// The header of [`row`]'s table.
pub(crate) const HEADER: &str = "STATE     ATTEMPT  AGE      LEASE    EXPIRES  TOOL                 TENANT       RUN              KEY  ARGUMENTS";

/// A record as a row under [`HEADER`].
pub(crate) fn row(record: &RecordInfo) -> String {
    let lease = if record.state == RecordState::Running {
        lease(record)
    } else {
        "-".into()
    };
    let about = record.about.as_deref().and_then(About::parse);
    let (tenant, run) = about.map_or((None, None), |a| (a.tenant, a.run));
    // A run-scoped tool's run; `-` for a global one, or a record that
    // does not say.
    let (tenant, run) = (
        tenant.unwrap_or_else(|| "-".into()),
        run.unwrap_or_else(|| "-".into()),
    );
    format!(
        "{:<9} {:<8} {:<8} {:<8} {:<8} {:<20} {:<12} {:<16} {}  {}",
        record.state.as_str(),
        record.attempt,
        record.age.map_or("-".into(), human),
        lease,
        expires(record),
        record.tool.as_deref().unwrap_or("-"),
        tenant,
        run,
        record.key,
        arguments_line(record),
    )
}

/// A running record's lease: what it has left, or `lapsed`.
fn lease(record: &RecordInfo) -> String {
    match record.lease_left {
        Some(left) if !left.is_zero() => human(left),
        Some(_) => "lapsed".into(),
        None => "-".into(),
    }
}

/// Whether a record in `state` shows the token that holds it (running) or
/// that a decision is made with (unknown, awaiting, approved).
fn has_holder(state: RecordState) -> bool {
    matches!(
        state,
        RecordState::Running | RecordState::Unknown | RecordState::Awaiting | RecordState::Approved
    )
}

/// What a record's payload is called: a person's refusal, an error, why
/// (unknown, awaiting) or a result.
fn payload_name(state: RecordState, text: &str) -> &'static str {
    match state {
        RecordState::Failed if Refusal::parse(text).is_some() => "refused",
        RecordState::Failed => "error",
        RecordState::Unknown | RecordState::Awaiting => "why",
        _ => "result",
    }
}

/// A result or an unknown record's note as the JSON it is (an error, or a
/// sealed payload, as text).
fn payload_value(state: RecordState, text: &str) -> Value {
    if state == RecordState::Failed
        && let Some(refusal) = Refusal::parse(text)
    {
        return serde_json::to_value(refusal).unwrap_or_default();
    }
    if matches!(
        state,
        RecordState::Done | RecordState::Unknown | RecordState::Awaiting
    ) && !text.starts_with("idem-sealed:")
        && let Ok(value) = serde_json::from_str(text)
    {
        return value;
    }
    Value::String(text.to_owned())
}

/// A duration for people, in its two largest units: `850ms`, `12s`,
/// `3m20s`, `2h05m`, `4d03h`.
pub(crate) fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{}ms", d.as_millis()),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86400, s % 86400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_their_two_largest_units() {
        let cases = [
            (Duration::from_millis(850), "850ms"),
            (Duration::from_secs(12), "12s"),
            (Duration::from_secs(200), "3m20s"),
            (Duration::from_secs(7500), "2h05m"),
            (Duration::from_secs(4 * 86400 + 3 * 3600 + 59), "4d03h"),
        ];
        for (d, want) in cases {
            assert_eq!(human(d), want);
        }
    }
}
