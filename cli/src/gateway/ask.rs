//! `approval = "ask"` in the gateway: a write whose operation awaits a
//! person's approval puts the question to the person at the client, where
//! the client can ask its person (it declared `elicitation`), and their
//! answer approves or refuses that very operation, as the library's MCP
//! server does (`idem::mcp`):
//!
//! - on a session (MCP up to 2025-11-25) the gateway sends the client
//!   `elicitation/create` while the call waits, under an id of its own
//!   whose response it keeps (it never goes upstream);
//! - on MCP 2026-07-28 the call is answered `input_required`, the question
//!   under `idem/approval` and the operation's key as its `requestState`. The
//!   retried call's answer is taken out of it before anything goes
//!   upstream, and taken only when the state it brings is the retried
//!   call's own key, made again from its arguments and binding.
//!
//! Accepted approves, declined refuses, dismissed decides nothing: the
//! operation keeps waiting for an approval (`idem approve`).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Mutex, PoisonError};

use idem::mcp::{APPROVAL_QUESTION, ApprovalAnswer};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::jsonrpc::{self, CAPABILITIES_META, CLIENT_INFO_META, PROTOCOL_META};
use super::link::Route;
use super::proxy::Asked;

/// The first protocol that asks by `input_required`.
const INPUT_REQUIRED_SINCE: &str = "2026-07-28";

/// What a write whose operation awaits approval comes to once asked.
pub(crate) enum Person {
    /// The person answered and it is recorded: the call is answered anew.
    Answered,
    /// This `input_required` result asks the client to ask its person.
    Asks(Value),
    /// Nobody answered (the client cannot ask, the question about it is
    /// already out, or the person dismissed it): the operation still waits.
    Waits,
}

/// How a call can put the question to the person at its client.
pub(crate) enum Asking {
    /// `elicitation/create`, on the session.
    Session,
    /// An `input_required` result.
    InputRequired,
    /// It cannot.
    Cannot,
}

/// A session's questions to its client: what it declared at `initialize`,
/// and the questions out, by the id the gateway sent them under.
#[derive(Default)]
pub(crate) struct Questions {
    /// The client's `initialize` params.
    initialize: Mutex<Option<Value>>,
    /// By the id they were sent under: `idem-approval-` and the key.
    out: Mutex<HashMap<String, oneshot::Sender<Value>>>,
}

impl Questions {
    /// Notes what the client declared in its `initialize` request.
    pub(crate) fn initialized(&self, request: &Value) {
        *lock(&self.initialize) = request.get("params").cloned();
    }

    /// Takes a client's response to a question of the gateway's; gives back
    /// any other response, which belongs upstream.
    pub(crate) fn answered(&self, response: Value) -> Option<Value> {
        let Some(id) = jsonrpc::id(&response).and_then(Value::as_str) else {
            return Some(response);
        };
        let Some(waiting) = lock(&self.out).remove(id) else {
            return Some(response);
        };
        let _ = waiting.send(response);
        None
    }

    /// How `request`, a `tools/call`, can ask the person at its client:
    /// by the protocol and capabilities it names, else the session's.
    pub(crate) fn asking(&self, request: &Value) -> Asking {
        let meta = jsonrpc::meta(request);
        let named = |key| meta.and_then(|m| m.get(key));
        let initialize = lock(&self.initialize).clone().unwrap_or_default();
        let protocol = named(PROTOCOL_META)
            .or_else(|| initialize.get("protocolVersion"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let capabilities = named(CAPABILITIES_META).or_else(|| initialize.get("capabilities"));
        let elicitation = capabilities.and_then(|c| c.get("elicitation"));
        let form = elicitation.is_some_and(|e| e.get("form").is_some() || e.get("url").is_none());
        match (form, protocol >= INPUT_REQUIRED_SINCE) {
            (false, _) => Asking::Cannot,
            (true, true) => Asking::InputRequired,
            (true, false) => Asking::Session,
        }
    }

    /// Asks the person at the client of `route` over the session about
    /// the operation under `key`, until the client answers or cancels the
    /// call (`asked`). Not again while the question is out for a
    /// duplicate of the call.
    pub(crate) async fn elicit(
        &self,
        route: &Route,
        asked: &Asked,
        key: &str,
        question: Value,
    ) -> ApprovalAnswer {
        let id = format!("idem-approval-{key}");
        let (tell, answer) = oneshot::channel();
        match lock(&self.out).entry(id.clone()) {
            Entry::Occupied(_) => return ApprovalAnswer::Dismissed,
            Entry::Vacant(out) => out.insert(tell),
        };
        let request = jsonrpc::request(id.clone().into(), "elicitation/create", question);
        route.sink.deliver(request, Some(&route.id));
        let reply = tokio::select! {
            answer = answer => answer.ok().and_then(|a| a.get("result").cloned()),
            () = asked.cancellation() => None,
        };
        lock(&self.out).remove(&id);
        reply.map_or(ApprovalAnswer::Dismissed, |result| {
            ApprovalAnswer::read(&result)
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The `input_required` result that asks `question` about the operation
/// under `key`.
pub(crate) fn input_required(question: Value, key: &str) -> Value {
    json!({
        "resultType": "input_required",
        "inputRequests": {APPROVAL_QUESTION: {"method": "elicitation/create", "params": question}},
        "requestState": key,
    })
}

/// Takes the answer to the gateway's question out of a retried call's
/// `request` (so that it does not go upstream): the state it brings, and
/// the answer. `None` when it brings none.
pub(crate) fn take_brought(request: &mut Value) -> Option<(Option<String>, ApprovalAnswer)> {
    let params = jsonrpc::params_mut(request)?;
    let responses = params.get_mut("inputResponses")?.as_object_mut()?;
    let answer = responses.remove(APPROVAL_QUESTION)?;
    if responses.is_empty() {
        params.remove("inputResponses");
    }
    let state = params.remove("requestState");
    let state = state.and_then(|s| s.as_str().map(str::to_owned));
    Some((state, ApprovalAnswer::read(&answer)))
}

/// The name of the client of `request` (its `clientInfo`, or its
/// session's), for who approved.
pub(crate) fn client_name(questions: &Questions, request: &Value) -> Option<String> {
    let meta = jsonrpc::meta(request).and_then(|m| m.get(CLIENT_INFO_META));
    let initialize = lock(&questions.initialize).clone().unwrap_or_default();
    let client = meta.or_else(|| initialize.get("clientInfo")).cloned()?;
    client
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The description of tool `name` among the upstream's `tools`.
pub(crate) fn description<'a>(tools: &'a [Value], name: &str) -> &'a str {
    tools
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
        .and_then(|t| t.get("description"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_taken_out_of_the_retried_call_and_the_rest_goes_up() {
        let mut request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "append", "arguments": {"entry": "a"},
            "inputResponses": {APPROVAL_QUESTION: {"action": "accept", "content": {}}},
            "requestState": "k1"}});
        let brought = take_brought(&mut request);
        assert_eq!(
            brought,
            Some((Some("k1".to_owned()), ApprovalAnswer::Approve))
        );
        assert_eq!(
            request["params"],
            json!({"name": "append", "arguments": {"entry": "a"}})
        );
        // The upstream's own answers stay, with its state.
        let mut theirs = json!({"params": {"inputResponses": {"confirm": {"action": "accept"}},
            "requestState": "theirs"}});
        assert_eq!(take_brought(&mut theirs), None);
        assert_eq!(theirs["params"]["requestState"], "theirs");
    }

    #[test]
    fn a_client_is_asked_by_what_its_request_or_session_declares() {
        let questions = Questions::default();
        let call = json!({"method": "tools/call", "params": {"_meta": {
            PROTOCOL_META: "2026-07-28", CAPABILITIES_META: {"elicitation": {}}}}});
        assert!(matches!(questions.asking(&call), Asking::InputRequired));
        let plain = json!({"method": "tools/call", "params": {}});
        assert!(matches!(questions.asking(&plain), Asking::Cannot));
        questions.initialized(&json!({"params": {"protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}}}}));
        assert!(matches!(questions.asking(&plain), Asking::Session));
        questions.initialized(&json!({"params": {"protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"url": {}}}}}));
        assert!(matches!(questions.asking(&plain), Asking::Cannot));
    }
}
