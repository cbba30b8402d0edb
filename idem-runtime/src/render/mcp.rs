//! MCP's `Tool`: the schema as it is, and annotations saying what a call
//! does (read-only, or idempotent and maybe destructive).

use serde_json::{Value, json};

use crate::key::ScopeKind;
use crate::tool::{ToolDef, ToolKind};

impl ToolDef {
    /// An MCP `Tool`: `{name, description, inputSchema, annotations}`. Read
    /// tools are `readOnlyHint: true`; write tools `readOnlyHint: false`,
    /// `destructiveHint` / `openWorldHint` from their settings, and
    /// `idempotentHint` only where it holds for any caller: a `global`
    /// tool's repeat is replayed whatever run it comes in, a run-scoped
    /// tool's only within its run (a client that reconnects into a new
    /// session runs it again).
    pub fn mcp(&self) -> Value {
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
