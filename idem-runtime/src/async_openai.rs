//! Tool calls as async-openai types them (feature `async-openai`;
//! async-openai 0.43 with only its `chat-completion-types`, so no HTTP
//! client comes with it; built and tested on rustc 1.95).
//!
//! [`Registry::async_openai_tool_call`] takes an entry of an assistant
//! message's `tool_calls` as async-openai deserializes it and answers with
//! the `tool` message to send back, the same way
//! [`Registry::reply`] does for raw JSON ([`Provider::OpenAiChat`]):
//!
//! ```ignore
//! let message = response.choices[0].message.clone();
//! for call in message.tool_calls.iter().flatten() {
//!     let reply = registry.async_openai_tool_call("run-42", call).await?;
//!     messages.push(reply.message.into());
//! }
//! ```

use async_openai::types::chat::{ChatCompletionMessageToolCalls, ChatCompletionRequestToolMessage};
use serde_json::Value;

use crate::error::ToolError;
use crate::providers::{MalformedCall, Provider};
use crate::registry::Registry;

/// The async-openai version this module is built on, for its types.
pub use async_openai;

/// A dispatched async-openai tool call.
#[derive(Debug)]
#[non_exhaustive]
pub struct ToolMessage {
    /// The `tool` message answering the call.
    pub message: ChatCompletionRequestToolMessage,
    /// What the tool call came to.
    pub outcome: Result<Value, ToolError>,
}

impl<S: Send + Sync + 'static> Registry<S> {
    /// Dispatches one entry of an assistant message's `tool_calls` (a
    /// function call; a custom tool call is [`MalformedCall`] and runs
    /// nothing) and builds the `tool` message answering it.
    pub async fn async_openai_tool_call(
        &self,
        run_id: &str,
        call: &ChatCompletionMessageToolCalls,
    ) -> Result<ToolMessage, MalformedCall> {
        // One reading of a Chat Completions call: the JSON one's.
        let as_json = serde_json::to_value(call).map_err(|e| MalformedCall {
            shape: "an async-openai tool call",
            problem: e.to_string(),
        })?;
        let reply = self.reply(Provider::OpenAiChat, run_id, &as_json).await?;
        let message = serde_json::from_value(reply.message).map_err(|e| MalformedCall {
            shape: "an async-openai tool message",
            problem: e.to_string(),
        })?;
        Ok(ToolMessage {
            message,
            outcome: reply.outcome,
        })
    }
}
