//! Anthropic Messages' tool format: the JSON schema as it is.

use serde_json::{Value, json};

use crate::tool::ToolDef;

impl ToolDef {
    /// Anthropic Messages: `{name, description, input_schema}`.
    pub fn anthropic(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        })
    }
}
