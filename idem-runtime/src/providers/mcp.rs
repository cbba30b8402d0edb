//! MCP's format: a `Tool` (the schema as it is, and annotations saying
//! what a call does: read-only, or idempotent and maybe destructive),
//! `tools/call`'s params, and the `CallToolResult` answering them.

use serde_json::{Value, json};

use super::call::{Call, MalformedCall, result_text, string};
use crate::error::ToolError;
use crate::key::ScopeKind;
use crate::tool::{ToolDef, ToolKind};

/// `tools/call`'s params, `{"name", "arguments"}`; the JSON-RPC request's
/// id is outside them.
pub(super) fn read<'a>(
    params: &'a Value,
    shape: &'static str,
) -> Result<(Call<'a>, Value), MalformedCall> {
    let name = string(params, &["name"], shape)?;
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    Ok((
        Call {
            raw: params,
            id: None,
            name,
        },
        args,
    ))
}

/// The `_meta` member of a `tools/call` result whose operation waits for a
/// person's approval: `{"key": KEY, "tool": NAME, "approval_window_secs":
/// N}`, the key the approver approves (`idem approve KEY`,
/// `Registry::approve`), for a client that shows it or passes it on, and
/// how long an approval stays good. Public through `idem::mcp` (feature
/// `mcp`); without it, used here only.
#[cfg_attr(not(feature = "mcp"), allow(unreachable_pub))]
pub const AWAITING_APPROVAL_META: &str = "idem/awaiting_approval";

/// The `_meta` of a `tools/call` result answering `error`: where its
/// operation awaits approval, [`AWAITING_APPROVAL_META`] with what the
/// approver needs to find it; `None` for other errors. The library's MCP
/// server adds it, and `idem gateway` does.
#[cfg_attr(not(feature = "mcp"), allow(unreachable_pub))]
pub fn error_meta(error: &ToolError) -> Option<Value> {
    match error {
        ToolError::ApprovalRequired {
            tool, key, window, ..
        } => Some(json!({
            AWAITING_APPROVAL_META: {
                "key": key.as_str(), "tool": tool, "approval_window_secs": window.as_secs(),
            },
        })),
        _ => None,
    }
}

/// The `CallToolResult` answering a call: the result's JSON as text, and as
/// `structuredContent` when it is an object (the only shape MCP's
/// `structuredContent` takes); a failure as text with `isError: true`.
/// `resultType` is the protocol's of 2026-07-28; an MCP server drops it for
/// a client of an older version.
pub(crate) fn answer(outcome: &Result<Value, ToolError>) -> Value {
    match outcome {
        Ok(value) => {
            let mut result = json!({
                "resultType": "complete",
                "content": [{ "type": "text", "text": result_text(value) }],
                "isError": false,
            });
            if value.is_object() {
                result["structuredContent"] = value.clone();
            }
            result
        }
        Err(e) => {
            let mut result = json!({
                "resultType": "complete",
                "content": [{ "type": "text", "text": e.model_message() }],
                "isError": true,
            });
            if let Some(meta) = error_meta(e) {
                result["_meta"] = meta;
            }
            result
        }
    }
}

impl ToolDef {
    /// An MCP `Tool`: `{name, description, inputSchema, annotations}`. Read
    /// tools are `readOnlyHint: true`; write tools `readOnlyHint: false`,
    /// `destructiveHint` / `openWorldHint` from their settings, and
    /// `idempotentHint` only where it holds for any caller: a `global`
    /// tool's repeat is replayed whatever run it comes in, a run-scoped
    /// tool's only within its run (a client that reconnects into a new
    /// session runs it again).
    pub(crate) fn mcp(&self) -> Value {
        let annotations = match self.kind {
            ToolKind::Read => json!({ "readOnlyHint": true }),
            ToolKind::Write => json!({
                "readOnlyHint": false,
                "destructiveHint": self.destructive,
                "idempotentHint": self.scope == Some(ScopeKind::Global),
                "openWorldHint": self.open_world,
            }),
        };
        let mut tool = json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": annotations,
        });
        if let Some(schema) = &self.output_schema {
            tool["outputSchema"] = schema.clone();
        }
        tool
    }
}
