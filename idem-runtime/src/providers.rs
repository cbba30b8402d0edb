//! Tool calls as the model providers send them, and the tool results they
//! expect back.
//!
//! Each helper takes one call in its provider's wire shape, dispatches it
//! through [`Registry::call`] (so write tools run once per operation), and
//! builds the message that answers it, with the error flag the provider
//! reads when the call failed. The typed outcome comes along for logging
//! and retry decisions.
//!
//! | provider | call | reply |
//! |---|---|---|
//! | OpenAI Chat Completions | a `tool_calls` entry: `{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}` | `{"role": "tool", "tool_call_id", "content"}` |
//! | OpenAI Responses | a `function_call` item: `{"type": "function_call", "call_id", "name", "arguments"}` | `{"type": "function_call_output", "call_id", "output"}` |
//! | Anthropic Messages | a `tool_use` block: `{"type": "tool_use", "id", "name", "input"}` | `{"type": "tool_result", "tool_use_id", "content", "is_error": true}` (the flag only on errors) |
//! | Gemini | a `functionCall` part: `{"functionCall": {"name", "args", "id"?}}` | `{"functionResponse": {"name", "id"?, "response": {"output"}}}`, or `{"error"}` in `response` |
//!
//! Results are sent as their JSON text (a string result as itself); a
//! failure as [`ToolError::model_message`]. The run id scopes the keys: use
//! the id of the agent run, the same across its retries and resumptions
//! (docs/spec.md, "Keys"), never the call's id, which changes when the model
//! repeats itself. Each helper takes a run id or a [`CallContext`] (with a
//! tenant, or an operation key), and adds the call's id to it for traces.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use idem_runtime::Registry;
//! use serde_json::json;
//! let registry = Registry::builder(()).build().expect("registry");
//! let call = json!({"id": "call_1", "type": "function",
//!                   "function": {"name": "nope", "arguments": "{}"}});
//! let reply = registry.openai_tool_call("run-42", &call).await.expect("a well-formed call");
//! assert_eq!(reply.message["tool_call_id"], "call_1");
//! assert!(reply.outcome.is_err());
//! # }
//! ```

use serde_json::{Map, Value, json};

use crate::error::ToolError;
use crate::registry::{CallContext, Registry};

/// A dispatched provider tool call.
#[derive(Debug)]
#[non_exhaustive]
pub struct ToolReply {
    /// The message (or content block, or part) answering the call, in the
    /// provider's shape, ready to append to the conversation.
    pub message: Value,
    /// What the tool call came to.
    pub outcome: Result<Value, ToolError>,
}

/// A provider payload that is not a tool call of the expected shape: it
/// lacks the id to answer it under, or the tool's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not {shape}: {problem}")]
pub struct MalformedCall {
    /// The shape expected (`an OpenAI tool_calls entry`, ...).
    pub shape: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

/// A required string member of `value` at `path`.
fn string<'a>(
    value: &'a Value,
    path: &[&str],
    shape: &'static str,
) -> Result<&'a str, MalformedCall> {
    let found = path.iter().try_fold(value, |v, key| v.get(key));
    match found {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(_) => Err(MalformedCall {
            shape,
            problem: format!("`{}` is not a non-empty string", path.join(".")),
        }),
        None => Err(MalformedCall {
            shape,
            problem: format!("`{}` is missing", path.join(".")),
        }),
    }
}

/// Refuses a payload whose `type` names another kind of block than
/// `expected` (an Anthropic `server_tool_use`, an OpenAI `custom` tool
/// call): answering it as a tool call would run a tool nobody called. A
/// payload without a `type` is taken as what the helper reads.
fn kind(value: &Value, expected: &str, shape: &'static str) -> Result<(), MalformedCall> {
    match value.get("type") {
        None => Ok(()),
        Some(Value::String(found)) if found == expected => Ok(()),
        Some(found) => Err(MalformedCall {
            shape,
            problem: format!("its `type` is {found}, not \"{expected}\""),
        }),
    }
}

/// A result as the text providers (and MCP's text content) carry: a
/// string as itself, anything else as JSON.
pub(crate) fn result_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The text of an outcome, and whether it is an error.
fn outcome_text(outcome: &Result<Value, ToolError>) -> (String, bool) {
    match outcome {
        Ok(value) => (result_text(value), false),
        Err(e) => (e.model_message(), true),
    }
}

const OPENAI_CHAT: &str = "an OpenAI tool_calls entry";
const OPENAI_RESPONSES: &str = "an OpenAI Responses function_call item";
const ANTHROPIC: &str = "an Anthropic tool_use block";
const GEMINI: &str = "a Gemini functionCall part";

impl<S: Send + Sync + 'static> Registry<S> {
    /// Dispatches one entry of an OpenAI Chat Completions message's
    /// `tool_calls` and builds the `role: "tool"` message answering it.
    /// The arguments arrive as JSON text, as OpenAI sends them.
    pub async fn openai_tool_call<'a>(
        &self,
        context: impl Into<CallContext<'a>>,
        call: &'a Value,
    ) -> Result<ToolReply, MalformedCall> {
        kind(call, "function", OPENAI_CHAT)?;
        let id = string(call, &["id"], OPENAI_CHAT)?;
        let name = string(call, &["function", "name"], OPENAI_CHAT)?;
        let args = call
            .pointer("/function/arguments")
            .cloned()
            .unwrap_or(Value::Null);
        let outcome = self.call(context.into().tool_call_id(id), name, args).await;
        let (content, _) = outcome_text(&outcome);
        Ok(ToolReply {
            message: json!({ "role": "tool", "tool_call_id": id, "content": content }),
            outcome,
        })
    }

    /// Dispatches an OpenAI Responses API `function_call` output item and
    /// builds the `function_call_output` input item answering it.
    pub async fn openai_function_call<'a>(
        &self,
        context: impl Into<CallContext<'a>>,
        item: &'a Value,
    ) -> Result<ToolReply, MalformedCall> {
        kind(item, "function_call", OPENAI_RESPONSES)?;
        let call_id = string(item, &["call_id"], OPENAI_RESPONSES)?;
        let name = string(item, &["name"], OPENAI_RESPONSES)?;
        let args = item.get("arguments").cloned().unwrap_or(Value::Null);
        let outcome = self
            .call(context.into().tool_call_id(call_id), name, args)
            .await;
        let (output, _) = outcome_text(&outcome);
        Ok(ToolReply {
            message: json!({ "type": "function_call_output", "call_id": call_id, "output": output }),
            outcome,
        })
    }

    /// Dispatches an Anthropic `tool_use` content block and builds the
    /// `tool_result` block answering it (`is_error: true` on failure), to
    /// send in the next user message.
    pub async fn anthropic_tool_use<'a>(
        &self,
        context: impl Into<CallContext<'a>>,
        block: &'a Value,
    ) -> Result<ToolReply, MalformedCall> {
        kind(block, "tool_use", ANTHROPIC)?;
        let id = string(block, &["id"], ANTHROPIC)?;
        let name = string(block, &["name"], ANTHROPIC)?;
        let input = block.get("input").cloned().unwrap_or(Value::Null);
        let outcome = self
            .call(context.into().tool_call_id(id), name, input)
            .await;
        let (content, is_error) = outcome_text(&outcome);
        let mut message = json!({ "type": "tool_result", "tool_use_id": id, "content": content });
        if is_error {
            message["is_error"] = Value::Bool(true);
        }
        Ok(ToolReply { message, outcome })
    }

    /// Dispatches a Gemini `functionCall` part and builds the
    /// `functionResponse` part answering it: `response.output` holds the
    /// result, `response.error` the failure. The call's `id`, when it has
    /// one, is echoed.
    pub async fn gemini_function_call<'a>(
        &self,
        context: impl Into<CallContext<'a>>,
        part: &'a Value,
    ) -> Result<ToolReply, MalformedCall> {
        let name = string(part, &["functionCall", "name"], GEMINI)?;
        let args = part
            .pointer("/functionCall/args")
            .cloned()
            .unwrap_or(Value::Null);
        let mut context = context.into();
        if let Some(id) = part.pointer("/functionCall/id").and_then(Value::as_str) {
            context = context.tool_call_id(id);
        }
        let outcome = self.call(context, name, args).await;
        let response = match &outcome {
            Ok(value) => json!({ "output": value }),
            Err(e) => json!({ "error": e.model_message() }),
        };
        let mut reply = Map::new();
        reply.insert("name".into(), Value::String(name.to_owned()));
        if let Some(id) = part.pointer("/functionCall/id").filter(|id| !id.is_null()) {
            reply.insert("id".into(), id.clone());
        }
        reply.insert("response".into(), response);
        Ok(ToolReply {
            message: json!({ "functionResponse": reply }),
            outcome,
        })
    }
}
