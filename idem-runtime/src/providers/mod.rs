//! The model providers' wire formats, one module each (`openai`,
//! `anthropic`, `gemini`, `mcp`): how a provider is told of the tools, how
//! it sends a call, and how it expects the answer. [`Provider`] names a
//! format; a registry reaches every one of them the same two ways,
//! [`Registry::tools`] and [`Registry::reply`]. `walk` holds what the
//! schema rewrites share.
//!
//! | provider | tools | call | reply |
//! |---|---|---|---|
//! | OpenAI Chat Completions | `{"type": "function", "function": {name, description, parameters}}` | a `tool_calls` entry: `{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}` | `{"role": "tool", "tool_call_id", "content"}` |
//! | OpenAI Responses | `{"type": "function", name, description, parameters, "strict"}` | a `function_call` item: `{"type": "function_call", "call_id", "name", "arguments"}` | `{"type": "function_call_output", "call_id", "output"}` |
//! | Anthropic Messages | `{name, description, input_schema}` | a `tool_use` block: `{"type": "tool_use", "id", "name", "input"}` | `{"type": "tool_result", "tool_use_id", "content", "is_error": true}` (the flag only on errors) |
//! | Gemini | `[{"functionDeclarations": [...]}]` | a `functionCall` part: `{"functionCall": {"name", "args", "id"?}}` | `{"functionResponse": {"name", "id"?, "response": {"output"}}}`, or `{"error"}` in `response` |
//! | MCP | a `tools/list` entry: `{name, description, inputSchema, annotations, outputSchema?}` | `tools/call`'s params: `{"name", "arguments"}` | a `CallToolResult`: `{"content": [{"type": "text", "text"}], "isError", "structuredContent"?}` |
//!
//! Results are sent as their JSON text (a string result as itself); a
//! failure as [`ToolError::model_message`]. The run id scopes the keys: use
//! the id of the agent run, the same across its retries and resumptions
//! (docs/spec.md, "Keys"), never the call's id, which changes when the model
//! repeats itself. [`Registry::reply`] takes a run id or a [`CallContext`]
//! (with a tenant, or an operation key), and adds the call's id to it for
//! traces.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use idem_runtime::{Provider, Registry};
//! use serde_json::json;
//! let registry = Registry::builder(()).build().expect("registry");
//! let call = json!({"id": "call_1", "type": "function",
//!                   "function": {"name": "nope", "arguments": "{}"}});
//! let reply = registry
//!     .reply(Provider::OpenAiChat, "run-42", &call)
//!     .await
//!     .expect("a well-formed call");
//! assert_eq!(reply.message["tool_call_id"], "call_1");
//! assert!(reply.outcome.is_err());
//! # }
//! ```

mod anthropic;
mod call;
mod gemini;
pub(crate) mod mcp;
mod openai;
mod walk;

use serde_json::{Value, json};

use self::call::Call;
pub use self::call::MalformedCall;
pub use self::walk::RenderError;
use crate::error::ToolError;
use crate::registry::{CallContext, Registry};
use crate::tool::ToolDef;

/// A model provider's wire format, for the tools it is told of
/// ([`Registry::tools`]) and the calls it sends ([`Registry::reply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI Chat Completions.
    OpenAiChat,
    /// OpenAI Chat Completions with `"strict": true` (structured outputs):
    /// every object closed (`additionalProperties: false`) and every
    /// property required, the optional ones made nullable; `oneOf` becomes
    /// `anyOf` and keywords strict mode rejects are dropped. The tools fail,
    /// naming the tool and field, where strict mode cannot express a
    /// schema: a map with free-form keys, a value of any type, `allOf`.
    OpenAiChatStrict,
    /// The OpenAI Responses API, `"strict": false` (the API's default is
    /// strict, which the plain schema may not meet).
    OpenAiResponses,
    /// The OpenAI Responses API with `"strict": true`: the parameters as
    /// [`OpenAiChatStrict`](Self::OpenAiChatStrict) makes them.
    OpenAiResponsesStrict,
    /// Anthropic Messages: the JSON schema as it is.
    Anthropic,
    /// Gemini, the parameters in the OpenAPI subset Gemini's `parameters`
    /// accepts: `$ref`s inlined, `["T", "null"]` written `nullable`,
    /// `oneOf` as `anyOf`, a tuple of one element type as a sized array,
    /// "no other members" (an enum's data variant) as `maxProperties`,
    /// unsupported keywords removed. The tools fail, naming the field,
    /// where the subset cannot express a schema: a map with free-form keys,
    /// a value of any type (`serde_json::Value`), a recursive type, a tuple
    /// of several element types, a struct that denies unknown fields and
    /// has optional ones ([`GeminiJsonSchema`](Self::GeminiJsonSchema)
    /// takes them all).
    Gemini,
    /// Gemini with the JSON Schemas as they are, under
    /// `parametersJsonSchema`: every schema fits.
    GeminiJsonSchema,
    /// MCP: `tools/list` entries, with annotations saying what a call does
    /// (read tools `readOnlyHint: true`; write tools `destructiveHint` and
    /// `openWorldHint` from their settings, and `idempotentHint` only for a
    /// `global` tool, whose repeat is replayed whatever run it comes in);
    /// calls are `tools/call`'s params, answered with a `CallToolResult`
    /// (an unknown tool too, as an error result: an MCP server answers that
    /// one with a protocol error instead). `idem::mcp` serves a registry
    /// over MCP's transports.
    Mcp,
}

impl Provider {
    /// How the format's call is named in a [`MalformedCall`].
    fn shape(self) -> &'static str {
        match self {
            Provider::OpenAiChat | Provider::OpenAiChatStrict => "an OpenAI tool_calls entry",
            Provider::OpenAiResponses | Provider::OpenAiResponsesStrict => {
                "an OpenAI Responses function_call item"
            }
            Provider::Anthropic => "an Anthropic tool_use block",
            Provider::Gemini | Provider::GeminiJsonSchema => "a Gemini functionCall part",
            Provider::Mcp => "MCP tools/call params",
        }
    }

    /// One tool's definition in this format.
    fn define(self, def: &ToolDef) -> Result<Value, RenderError> {
        match self {
            Provider::OpenAiChat => Ok(def.openai()),
            Provider::OpenAiChatStrict => def.openai_strict(),
            Provider::OpenAiResponses => Ok(def.openai_responses()),
            Provider::OpenAiResponsesStrict => def.openai_responses_strict(),
            Provider::Anthropic => Ok(def.anthropic()),
            Provider::Gemini => def.gemini(),
            Provider::GeminiJsonSchema => Ok(def.gemini_json_schema()),
            Provider::Mcp => Ok(def.mcp()),
        }
    }

    /// Reads a call of this format, and its arguments (`null` when it has
    /// none: the tool then refuses them as its arguments).
    fn read(self, call: &Value) -> Result<(Call<'_>, Value), MalformedCall> {
        let shape = self.shape();
        match self {
            Provider::OpenAiChat | Provider::OpenAiChatStrict => openai::read_chat(call, shape),
            Provider::OpenAiResponses | Provider::OpenAiResponsesStrict => {
                openai::read_responses(call, shape)
            }
            Provider::Anthropic => anthropic::read(call, shape),
            Provider::Gemini | Provider::GeminiJsonSchema => gemini::read(call, shape),
            Provider::Mcp => mcp::read(call, shape),
        }
    }

    /// The message answering `call` with `outcome`.
    fn answer(self, call: &Call<'_>, outcome: &Result<Value, ToolError>) -> Value {
        match self {
            Provider::OpenAiChat | Provider::OpenAiChatStrict => openai::answer_chat(call, outcome),
            Provider::OpenAiResponses | Provider::OpenAiResponsesStrict => {
                openai::answer_responses(call, outcome)
            }
            Provider::Anthropic => anthropic::answer(call, outcome),
            Provider::Gemini | Provider::GeminiJsonSchema => gemini::answer(call, outcome),
            Provider::Mcp => mcp::answer(outcome),
        }
    }
}

impl<S: Send + Sync + 'static> Registry<S> {
    /// The registered tools as `provider` is told of them: the array for
    /// its `tools` (Gemini's: one entry holding every
    /// `functionDeclarations`). Fails only for a format stricter than JSON
    /// Schema ([`Provider::OpenAiChatStrict`], [`Provider::Gemini`], ...),
    /// naming the tool and the field it cannot express.
    ///
    /// ```
    /// use idem_runtime::{Provider, Registry};
    /// let registry = Registry::builder(()).build().expect("registry");
    /// let tools = registry.tools(Provider::Anthropic).expect("plain JSON Schema always fits");
    /// assert_eq!(tools, serde_json::json!([]));
    /// ```
    pub fn tools(&self, provider: Provider) -> Result<Value, RenderError> {
        let defs = self
            .definitions()
            .iter()
            .map(|def| provider.define(def))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(match provider {
            Provider::Gemini | Provider::GeminiJsonSchema => {
                json!([{ "functionDeclarations": defs }])
            }
            _ => Value::Array(defs),
        })
    }

    /// Dispatches one tool call in `provider`'s shape through
    /// [`Registry::call`] (so write tools run once per operation), and
    /// builds the message that answers it, with the error flag the
    /// provider reads when the call failed; the typed outcome comes along
    /// for logging and retry decisions. `context` is the run id, or a
    /// [`CallContext`]; the call's own id is added to it for traces.
    pub async fn reply<'a>(
        &self,
        provider: Provider,
        context: impl Into<CallContext<'a>>,
        call: &'a Value,
    ) -> Result<ToolReply, MalformedCall> {
        let (read, args) = provider.read(call)?;
        let mut context = context.into();
        if let Some(id) = read.id {
            context = context.tool_call_id(id);
        }
        let outcome = self.call(context, read.name, args).await;
        Ok(ToolReply {
            message: provider.answer(&read, &outcome),
            outcome,
        })
    }
}

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
