//! `approval = "ask"` over MCP: a write whose operation awaits a person's
//! approval puts the question to the person at the client, where the
//! client can ask its person (it declared `elicitation`), and the answer
//! approves or refuses that very operation:
//!
//! - on a session (MCP up to 2025-11-25) the server sends
//!   `elicitation/create` while the call waits, and the call goes on with
//!   the answer;
//! - on MCP 2026-07-28, which has no requests from server to client, the
//!   call is answered `input_required` with the question, and the
//!   operation's key as its `requestState`; the client asks its person and
//!   calls again with the answer. An answer is taken only for the
//!   operation it was asked about: the retried call's own key, made again
//!   from its arguments and binding, must be the state it brings.
//!
//! Accepted approves (`Registry::approve`, by the person at the named
//! client), declined refuses (`Registry::deny`), dismissed decides nothing:
//! the operation keeps waiting for an approval, which `idem approve` may
//! still give.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, InputRequest, InputRequests,
    InputRequiredResult, ProtocolVersion, ServerRequest,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use crate::error::ResolveError;
use crate::key::IdemKey;
use crate::registry::Registry;

/// The name of the approval question among the requests of an
/// `input_required` result (MCP 2026-07-28), and of its answer among a
/// retried call's `inputResponses`.
pub const APPROVAL_QUESTION: &str = "idem/approval";

/// What a call whose operation awaits approval comes to once asked.
pub(super) enum Asked {
    /// The person answered and it is recorded: the call is answered anew.
    Answered,
    /// The client is to ask its person and call again with the answer.
    InputRequired(InputRequiredResult),
    /// Nobody answered (the client cannot ask, or the person dismissed the
    /// question): the operation still waits.
    Waits,
}

/// What the person at an MCP client answered the approval question
/// ([`approval_question`]): for a server of your own that asks as
/// [`McpServer`](super::McpServer) does (as `idem gateway` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Accepted: the operation is approved.
    Approve,
    /// Declined: the operation is refused.
    Refuse,
    /// Dismissed, or no answer: nothing is decided.
    Dismissed,
}

impl ApprovalAnswer {
    /// The answer an `ElicitResult` (`{"action": ..}`) gives.
    pub fn read(result: &Value) -> ApprovalAnswer {
        match result.get("action").and_then(Value::as_str) {
            Some("accept") => ApprovalAnswer::Approve,
            Some("decline") => ApprovalAnswer::Refuse,
            _ => ApprovalAnswer::Dismissed,
        }
    }

    /// Records the answer for the operation under `key`, which awaits
    /// approval: approved by "the person at MCP client `NAME`" (`client`,
    /// its `clientInfo` name), or refused by that person, who declined it.
    /// `None` for a dismissal, which records nothing.
    pub async fn record<S: Send + Sync + 'static>(
        self,
        registry: &Registry<S>,
        key: &IdemKey,
        client: Option<&str>,
    ) -> Option<Result<(), ResolveError>> {
        let by = match client {
            Some(name) => format!("the person at MCP client `{name}`"),
            None => "the person at the MCP client".to_owned(),
        };
        match self {
            ApprovalAnswer::Approve => Some(registry.approve(key, &by).await),
            ApprovalAnswer::Refuse => {
                let reason = "they declined it when asked";
                Some(registry.deny(key, &by, reason).await)
            }
            ApprovalAnswer::Dismissed => None,
        }
    }
}

/// The operations whose question is out on a session, so that a duplicate
/// call meanwhile is not asked again. Shared by a server's clones.
#[derive(Debug, Clone, Default)]
pub(super) struct Out(Arc<Mutex<HashSet<String>>>);

/// An operation's question out, until dropped.
struct OutGuard<'a>(&'a Out, String);

impl Drop for OutGuard<'_> {
    fn drop(&mut self) {
        self.0.lock().remove(&self.1);
    }
}

impl Out {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes the question about `key` as out, unless it already is.
    fn take(&self, key: &str) -> Option<OutGuard<'_>> {
        self.lock()
            .insert(key.to_owned())
            .then(|| OutGuard(self, key.to_owned()))
    }
}

/// The operation under `key`, of tool `tool` (`description`), awaits an
/// approval: asks the person at the client, where it can, and records
/// their answer. `shown` is its arguments as a person reads them.
pub(super) async fn ask<S: Send + Sync + 'static>(
    registry: &Registry<S>,
    out: &Out,
    (request, context): (&CallToolRequestParams, &RequestContext<RoleServer>),
    (key, description, shown): (&str, &str, &Value),
) -> Asked {
    let reply = match brought(request, key) {
        Some(reply) => reply,
        None => {
            if !can_ask(context) {
                return Asked::Waits;
            }
            let Some(question) = question(&request.name, description, shown) else {
                return Asked::Waits;
            };
            if at_least_2026(context) {
                return Asked::InputRequired(input_required(question, key));
            }
            let Some(_out) = out.take(key) else {
                // The question is out for a duplicate of this call.
                return Asked::Waits;
            };
            elicit(context, question).await
        }
    };
    let key = IdemKey::from_raw(key);
    let client = context.client_info().map(|c| c.name);
    let Some(decided) = reply.record(registry, &key, client.as_deref()).await else {
        return Asked::Waits;
    };
    if let Err(e) = decided {
        // Decided elsewhere first, or expired: the call is answered what
        // the record says now.
        tracing::info!(key = %key, error = %e, "the answer of the person at the MCP client was not recorded");
    }
    Asked::Answered
}

/// Whether the client can put a question to its person: it declared
/// elicitation, in form mode (or without naming a mode).
fn can_ask(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|caps| caps.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// Whether the call is on MCP 2026-07-28 or later, which asks by
/// `input_required`.
fn at_least_2026(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// The approval question's `elicitation/create` params: what tool `tool`
/// (`description`) will do, with its arguments as a person reads them
/// (`shown`: [`Registry::shown_arguments`]). A form with no fields: accept
/// approves, decline refuses ([`ApprovalAnswer`]).
pub fn approval_question(tool: &str, description: &str, shown: &Value) -> Value {
    let summary = description.lines().next().unwrap_or_default().trim();
    let what = if summary.is_empty() {
        format!("`{tool}`")
    } else {
        format!("`{tool}` ({summary})")
    };
    let args = serde_json::to_string_pretty(shown).unwrap_or_else(|_| shown.to_string());
    let message = format!(
        "Approve this operation? {what} will run once with these arguments:\n{args}\n\
         Accept to approve it; decline to refuse it."
    );
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {}},
    })
}

/// [`approval_question`] as rmcp reads it; `None` if it cannot (never,
/// for a form with no fields).
fn question(tool: &str, description: &str, shown: &Value) -> Option<ElicitRequestParams> {
    serde_json::from_value(approval_question(tool, description, shown))
        .inspect_err(|e| tracing::error!(error = %e, "an approval question rmcp does not read"))
        .ok()
}

/// The call's answer as `input_required`: the question, and the key of the
/// operation it is about.
fn input_required(question: ElicitRequestParams, key: &str) -> InputRequiredResult {
    let mut requests = InputRequests::new();
    let question = InputRequest::Elicitation(ElicitRequest::new(question));
    requests.insert(APPROVAL_QUESTION.to_owned(), question);
    InputRequiredResult::new(Some(requests), Some(key.to_owned()))
}

/// The answer a retried call brings to the question about operation `key`;
/// `None` when it brings none, or one about another operation.
fn brought(request: &CallToolRequestParams, key: &str) -> Option<ApprovalAnswer> {
    if request.request_state.as_deref() != Some(key) {
        return None;
    }
    let answer = request.input_responses.as_ref()?.get(APPROVAL_QUESTION)?;
    Some(ApprovalAnswer::read(answer))
}

/// Asks the person at the client over the session, until the client
/// answers or cancels the call.
async fn elicit(
    context: &RequestContext<RoleServer>,
    question: ElicitRequestParams,
) -> ApprovalAnswer {
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(question));
    let sent = context.peer.send_request(request);
    match context.ct.run_until_cancelled(sent).await {
        Some(Ok(answer)) => ApprovalAnswer::read(&serde_json::to_value(answer).unwrap_or_default()),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "asking the person at the MCP client failed");
            ApprovalAnswer::Dismissed
        }
        None => ApprovalAnswer::Dismissed,
    }
}
