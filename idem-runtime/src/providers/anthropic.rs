//! Anthropic Messages' format: the tools (the JSON schema as it is), a
//! `tool_use` block, and the `tool_result` block answering it.

use serde_json::{Value, json};

use super::call::{Call, MalformedCall, kind, outcome_text, string};
use crate::error::ToolError;
use crate::tool::ToolDef;

/// A `tool_use` content block.
pub(super) fn read<'a>(
    block: &'a Value,
    shape: &'static str,
) -> Result<(Call<'a>, Value), MalformedCall> {
    kind(block, "tool_use", shape)?;
    let id = string(block, &["id"], shape)?;
    let name = string(block, &["name"], shape)?;
    let input = block.get("input").cloned().unwrap_or(Value::Null);
    Ok((
        Call {
            raw: block,
            id: Some(id),
            name,
        },
        input,
    ))
}

/// The `tool_result` block answering a call (`is_error: true` on failure),
/// to send in the next user message.
pub(super) fn answer(call: &Call<'_>, outcome: &Result<Value, ToolError>) -> Value {
    let (content, is_error) = outcome_text(outcome);
    let mut message = json!({ "type": "tool_result", "tool_use_id": call.id, "content": content });
    if is_error {
        message["is_error"] = Value::Bool(true);
    }
    message
}

impl ToolDef {
    /// Anthropic Messages: `{name, description, input_schema}`.
    pub(super) fn anthropic(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        })
    }
}
