//! What the providers' calls share: a call as read, the error of one that
//! is not of its format's shape, the readers of its members, and the text
//! an outcome is answered with.

use serde_json::Value;

use crate::error::ToolError;

/// A provider's call, read: the id to answer it under (where the format
/// has one) and the tool; its arguments come beside it.
pub(super) struct Call<'a> {
    /// The whole call as it came, for what the answer echoes.
    pub(super) raw: &'a Value,
    pub(super) id: Option<&'a str>,
    pub(super) name: &'a str,
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
pub(super) fn string<'a>(
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
pub(super) fn kind(
    value: &Value,
    expected: &str,
    shape: &'static str,
) -> Result<(), MalformedCall> {
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
pub(super) fn outcome_text(outcome: &Result<Value, ToolError>) -> (String, bool) {
    match outcome {
        Ok(value) => (result_text(value), false),
        Err(e) => (e.model_message(), true),
    }
}
