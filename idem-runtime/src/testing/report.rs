//! What a [`RetryCheck`](super::RetryCheck) found: a [`Row`] per scenario,
//! each with its [`Verdict`], in a [`RetryReport`] that prints as a table;
//! and the rules a scenario's row is judged by.

use std::fmt;

use serde_json::Value;

use crate::error::ToolError;
use crate::key::IdemKey;

pub(super) fn unsafe_(why: &str) -> Verdict {
    Verdict::Unsafe(why.to_owned())
}

/// A call that should have succeeded on a fresh state failed: the body's
/// own error is the fake downstream (or the tool) refusing it; any other
/// is the arguments or the setup. Either way, not the retries' doing.
pub(super) fn refused(what: &str, error: &ToolError) -> Verdict {
    Verdict::CouldNotPlay(match error {
        ToolError::Failed { message, .. } => {
            format!("the fake downstream refused {what}, on a fresh state: {message}")
        }
        other => format!("{what} failed before the body ran: {other}"),
    })
}

/// A passed scenario whose downstream counted other than `expected`
/// effects (when told how to count them) is unsafe: the rule of
/// [`RetryCheck::effects`](super::RetryCheck::effects), for every scenario.
pub(super) fn counted(row: &mut Row, expected: usize) {
    match row.effects {
        Some(n) if n != expected && row.verdict == Verdict::Passed => {
            row.verdict = Verdict::Unsafe(format!(
                "the downstream recorded {n} effects, not {expected}: pass ctx.idem_key() downstream, and deduplicate on it there"
            ));
        }
        _ => {}
    }
}

/// Passed if the body ran `expected` times, else what is wrong.
pub(super) fn once(row: &Row, expected: usize) -> Verdict {
    if row.runs == expected {
        Verdict::Passed
    } else {
        Verdict::Unsafe(format!("the body ran {} times, not {expected}", row.runs))
    }
}

pub(super) fn answer(outcome: &Result<Value, ToolError>) -> String {
    match outcome {
        Ok(value) => {
            let text = value.to_string();
            if text.chars().count() > 24 {
                format!("ok {}…", text.chars().take(24).collect::<String>())
            } else {
                format!("ok {text}")
            }
        }
        Err(ToolError::Failed { permanent, .. }) => {
            format!(
                "error failed ({})",
                if *permanent { "permanent" } else { "transient" }
            )
        }
        Err(e) => format!("error {}", e.kind()),
    }
}

/// One scenario: what the tool did, what the callers got, and what is
/// wrong, if anything.
#[derive(Debug, Clone)]
pub struct Row {
    /// The scenario.
    pub scenario: &'static str,
    /// How many times the body ran.
    pub runs: usize,
    /// The key the body saw each time.
    pub keys: Vec<IdemKey>,
    /// The attempt the body saw each time.
    pub attempts: Vec<u32>,
    /// What each caller got.
    pub callers: Vec<String>,
    /// Effects the downstream recorded, when told how to count them.
    pub effects: Option<usize>,
    /// How many times the check approved an operation that waited for a
    /// person's approval, as a person would (recorded as approved by
    /// `retry-check`): a tool with `approval` is played approved.
    pub approved: usize,
    /// How the scenario went.
    pub verdict: Verdict,
}

/// How a scenario went: the tool's faults apart from scenarios the check
/// could not play as meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// As it must.
    Passed,
    /// Not played: the check was not told how to make the downstream fail.
    NotPlayed,
    /// The tool is not safe to retry: what went wrong, and what to change.
    Unsafe(String),
    /// A call that should have succeeded on a fresh state failed (the fake
    /// downstream refused it, or the arguments were refused), or a crash
    /// could not be staged: no verdict on the tool until the fake or the
    /// arguments are fixed.
    CouldNotPlay(String),
}

impl Verdict {
    /// Whether the scenario found nothing wrong (played and passed, or not
    /// played).
    pub fn is_ok(&self) -> bool {
        matches!(self, Verdict::Passed | Verdict::NotPlayed)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Passed => f.write_str("ok"),
            Verdict::NotPlayed => f.write_str("not played"),
            Verdict::Unsafe(why) => write!(f, "UNSAFE: {why}"),
            Verdict::CouldNotPlay(why) => write!(f, "could not play: {why}"),
        }
    }
}

/// What [`RetryCheck::run`](super::RetryCheck::run) found: one row a scenario.
#[derive(Debug, Clone)]
pub struct RetryReport {
    /// The scenarios, in the order played.
    pub rows: Vec<Row>,
}

impl RetryReport {
    pub(super) fn unregistrable(message: String) -> RetryReport {
        RetryReport {
            rows: vec![Row {
                scenario: "registering the tool",
                runs: 0,
                keys: Vec::new(),
                attempts: Vec::new(),
                callers: Vec::new(),
                effects: None,
                approved: 0,
                verdict: Verdict::CouldNotPlay(message),
            }],
        }
    }

    /// Whether every scenario went as it must.
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.verdict.is_ok())
    }

    /// Panics with the report if a scenario did not go as it must, saying
    /// first whether the tool is at fault or the check could not play.
    #[track_caller]
    pub fn assert_ok(&self) {
        let unsafe_ = self
            .rows
            .iter()
            .any(|r| matches!(r.verdict, Verdict::Unsafe(_)));
        if unsafe_ {
            panic!("the tool is not safe to retry:\n{self}");
        }
        if !self.passed() {
            panic!(
                "the check could not play every scenario: a call that should succeed failed \
                 (each scenario starts from a fresh state the factory makes; a fake downstream \
                 must accept a first call and answer a repeat under the same key with what it \
                 did):\n{self}"
            );
        }
    }
}

impl fmt::Display for RetryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "| scenario | body runs | keys | attempts | effects | approved by the check | callers got | verdict |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|")?;
        for r in &self.rows {
            let keys: Vec<String> = r.keys.iter().map(|k| short(k.as_str())).collect();
            let distinct = if keys.windows(2).all(|w| w[0] == w[1]) && !keys.is_empty() {
                format!("{} (same)", keys[0])
            } else {
                keys.join(", ")
            };
            let attempts: Vec<String> = r.attempts.iter().map(u32::to_string).collect();
            let effects = r.effects.map_or("-".to_owned(), |n| n.to_string());
            let verdict = &r.verdict;
            writeln!(
                f,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                r.scenario,
                r.runs,
                distinct,
                attempts.join(", "),
                effects,
                r.approved,
                r.callers.join("; "),
                verdict
            )?;
        }
        Ok(())
    }
}

/// A key's last 8 hex digits.
fn short(key: &str) -> String {
    format!("…{}", &key[key.len().saturating_sub(8)..])
}
