//! Approval in [`RetryCheck`](super::RetryCheck): the check approves what a
//! scenario asks, as a person would, and for a tool that needs approval
//! plays the approval itself: asked once whatever the duplicates, one
//! approval for one run, used up by it.

use serde_json::Value;

use super::Play;
use crate::error::{ResolveError, ToolError};
use crate::key::IdemKey;
use crate::testing::report::{Row, Verdict, answer, once, unsafe_};
use crate::tool::WriteTool;

/// Who the check approves as, in the records.
const APPROVER: &str = "retry-check";

impl<S: Send + Sync + 'static, T: WriteTool<S>> Play<'_, S, T> {
    /// Approves the operation under `key` as a person would; another
    /// duplicate of the scenario may have approved it first, which is
    /// fine: the record then no longer awaits one.
    pub(super) async fn approve(&self, key: &IdemKey) {
        match self.approved(key).await {
            Ok(()) | Err(ResolveError::NotAwaiting { .. } | ResolveError::Raced { .. }) => {}
            Err(e) => tracing::warn!(key = %key, error = %e, "the check could not approve"),
        }
    }

    /// Approves the operation under `key` as `retry-check`, counting the
    /// approval in the scenario's row.
    async fn approved(&self, key: &IdemKey) -> Result<(), ResolveError> {
        let approved = self.registry.approve(key, APPROVER).await;
        if approved.is_ok() {
            self.approvals
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        approved
    }

    /// Two calls before any approval are told the operation waits, under
    /// one key, and run nothing; one approval lets exactly one of four
    /// concurrent duplicates run, and all four get its result; the
    /// approval is then used up.
    pub(super) async fn approved_once(&self) -> Row {
        const SCENARIO: &str = "asked twice, approved once, 4 duplicates";
        let start = self.start();
        let asked = [self.ask(SCENARIO).await, self.ask(SCENARIO).await];
        let waits: Vec<&IdemKey> = asked.iter().filter_map(awaited).collect();
        let ran_before = self.row(SCENARIO, start).runs;
        let approved = match waits[..] {
            [a, b] if a == b => Some(self.approved(a).await),
            _ => None,
        };
        let (a, b, c, d) = tokio::join!(
            self.ask(SCENARIO),
            self.ask(SCENARIO),
            self.ask(SCENARIO),
            self.ask(SCENARIO)
        );
        let answers = [a, b, c, d];
        let again = match waits.first() {
            Some(key) => Some(self.approved(key).await),
            None => None,
        };
        let mut row = self.row(SCENARIO, start);
        row.verdict = match (&approved, &again) {
            (None, _) if waits.is_empty() => Verdict::CouldNotPlay(
                "these arguments need no approval (the tool's needs_approval said so)".into(),
            ),
            (None, _) => unsafe_("two calls of one operation were asked for two approvals"),
            _ if ran_before > 0 => unsafe_("the body ran before a person approved"),
            (Some(Err(e)), _) => Verdict::CouldNotPlay(format!("the approval failed: {e}")),
            (_, Some(Ok(()))) => unsafe_("an approval was used, and could be given again"),
            _ => duplicates_answered(&row, &answers),
        };
        row.callers = asked.iter().chain(&answers).map(answer).collect();
        row
    }
}

/// The key of an answer that the operation waits for a person's approval.
fn awaited(outcome: &Result<Value, ToolError>) -> Option<&IdemKey> {
    match outcome {
        Err(ToolError::ApprovalRequired { key, .. }) => Some(key),
        _ => None,
    }
}

/// Passed if every duplicate after the approval got the one run's result
/// (or was told it was in flight), and the body ran once.
fn duplicates_answered(row: &Row, answers: &[Result<Value, ToolError>]) -> Verdict {
    let results: Vec<&Value> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
    match answers
        .iter()
        .find(|a| !matches!(a, Ok(_) | Err(ToolError::InFlight { .. })))
    {
        Some(Err(e)) => Verdict::Unsafe(format!("a duplicate after the approval failed: {e}")),
        _ if results.iter().any(|r| *r != results[0]) => {
            unsafe_("duplicates after the approval got different results")
        }
        _ => once(row, 1),
    }
}
