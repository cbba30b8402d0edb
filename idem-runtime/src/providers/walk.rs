//! What every schema dialect's walk shares: the error naming a field it
//! cannot express, the path of a field for that error, and what a `type`
//! keyword allows.

use serde_json::Value;

/// The path of `name` inside the field at `path` (`.` is the root; `[]`
/// names an array's items): `lines[].sku`.
pub(super) fn join(path: &str, name: &str) -> String {
    if path == "." {
        name.to_owned()
    } else if name == "[]" {
        format!("{path}[]")
    } else {
        format!("{path}.{name}")
    }
}

/// Whether a `type` keyword (one name or a list) allows `name`.
pub(super) fn type_includes(t: &Value, name: &str) -> bool {
    match t {
        Value::String(s) => s == name,
        Value::Array(a) => a.iter().any(|v| v.as_str() == Some(name)),
        _ => false,
    }
}

/// Why a schema could not be rendered in a stricter dialect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}`: field `{field}` cannot be rendered in {dialect}: {reason}")]
#[non_exhaustive]
pub struct RenderError {
    /// The tool.
    pub tool: String,
    /// The offending field as a path (`lines[].sku`), `.` for the root.
    pub field: String,
    /// What the dialect cannot express, and what to do.
    pub reason: String,
    /// The dialect: `OpenAI strict mode`, or Gemini's.
    dialect: &'static str,
}

impl RenderError {
    /// `field` of `tool` cannot be written in `dialect`, for `reason`.
    pub(super) fn new(
        dialect: &'static str,
        tool: &str,
        (field, reason): (String, String),
    ) -> Self {
        RenderError {
            tool: tool.to_owned(),
            field,
            reason,
            dialect,
        }
    }
}
