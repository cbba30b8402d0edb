//! Tool definitions in the formats users send to models, one file per
//! format, all rendered from one [`ToolDef`]: `openai` (plain and strict),
//! `anthropic`, `gemini` and `mcp`; `walk` holds what their schema walks
//! share.

mod anthropic;
mod gemini;
mod mcp;
mod openai;
mod walk;

/// Why a schema could not be rendered in a stricter dialect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}`: field `{field}` cannot be rendered in OpenAI strict mode: {reason}")]
#[non_exhaustive]
pub struct RenderError {
    /// The tool.
    pub tool: String,
    /// The offending field as a path (`lines[].sku`), `.` for the root.
    pub field: String,
    /// What strict mode cannot express, and what to do.
    pub reason: String,
}
