//! Serving a [`Registry`] over the Model Context Protocol (feature `mcp`),
//! on the official Rust SDK, [`rmcp`].
//!
//! [`Registry::into_mcp_server`] gives an [`McpServer`]: an
//! [`rmcp::ServerHandler`] that answers `tools/list` from the registry's
//! definitions (input schemas, and the annotations
//! [`ToolDef::mcp`](crate::ToolDef::mcp) writes) and `tools/call` through
//! [`Registry::call`], so write tools keep their once-only guarantee
//! whichever MCP client calls them.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use idem_runtime::mcp::rmcp::{self, ServiceExt};
//! let registry = idem_runtime::Registry::builder(()).build()?;
//! // stdio: the client started this process; the connection is one run.
//! registry
//!     .into_mcp_server()
//!     .serve(rmcp::transport::stdio())
//!     .await?
//!     .waiting()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! # Runs
//!
//! Keys are scoped to a run (docs/spec.md, "Keys"). A call's run is, first,
//! the string under [`RUN_ID_META`] in the request's `_meta`, when the client
//! sends one (an agent that resumes a run after a crash sends the same id,
//! and its repeated writes are replayed); else the MCP session: over
//! streamable HTTP the `Mcp-Session-Id` the client sends with every
//! request, over stdio (or any byte stream) the connection, one run per
//! `McpServer` value. A request over HTTP outside any session (the
//! stateless protocol of MCP 2026-07-28) has no run to share with its
//! duplicates: a write tool called that way without a run id in `_meta` is
//! refused with an error result saying so, and does not run; read tools
//! run.
//!
//! # Errors
//!
//! A tool that is not registered is a protocol error (`-32602`, invalid
//! params). Everything else comes back as a tool result with `isError:
//! true` and [`ToolError::model_message`] as its text, which the model
//! reads: bad arguments (naming the field), a duplicate still in flight, a
//! failure of the tool itself, an unreachable store (the write did not
//! run).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use crate::error::ToolError;
use crate::registry::Registry;

/// The MCP SDK this module is built on, for its transports and
/// `ServiceExt::serve`, at the version this crate uses.
pub use rmcp;

/// The `_meta` key under which a client may name the run a call belongs
/// to: `{"_meta": {"idem/run_id": "run-42"}}`.
pub const RUN_ID_META: &str = "idem/run_id";

/// An MCP server over a [`Registry`]: see the [module docs](self).
pub struct McpServer<S> {
    registry: Registry<S>,
    tools: Arc<[Tool]>,
    info: ServerConfig,
    /// The run of calls that name none.
    run_id: Arc<str>,
}

impl<S> Clone for McpServer<S> {
    /// A handler serving the same registry in a new run of its own.
    fn clone(&self) -> Self {
        McpServer {
            registry: self.registry.clone(),
            tools: self.tools.clone(),
            info: self.info.clone(),
            run_id: new_run_id(),
        }
    }
}

impl<S> std::fmt::Debug for McpServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("tools", &self.tools.len())
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> Registry<S> {
    /// This registry as an MCP server: see [`McpServer`].
    pub fn into_mcp_server(self) -> McpServer<S> {
        let tools = self
            .definitions()
            .iter()
            .filter_map(|def| match serde_json::from_value::<Tool>(def.mcp()) {
                Ok(tool) => Some(tool),
                Err(e) => {
                    // `ToolDef::mcp` writes what `Tool` reads; say so if not.
                    tracing::error!(tool = %def.name, error = %e, "tool left out of tools/list");
                    None
                }
            })
            .collect();
        let info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("idem", env!("CARGO_PKG_VERSION")));
        McpServer {
            registry: self,
            tools,
            info,
            run_id: new_run_id(),
        }
    }
}

impl<S: Send + Sync + 'static> McpServer<S> {
    /// Names this server to clients (`serverInfo`; default `idem` and this
    /// crate's version).
    pub fn with_server_info(mut self, name: &str, version: &str) -> Self {
        self.info = self
            .info
            .with_server_info(Implementation::new(name, version));
        self
    }

    /// Instructions for the client's model (`instructions`).
    pub fn with_instructions(mut self, instructions: &str) -> Self {
        self.info = self.info.with_instructions(instructions);
        self
    }

    /// The run of calls that do not name one in their `_meta`.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The registry served.
    pub fn registry(&self) -> &Registry<S> {
        &self.registry
    }

    /// Answers one `tools/call`: the registry's outcome as an MCP tool
    /// result, or a protocol error for an unknown tool.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        run_id: Option<&str>,
    ) -> Result<CallToolResult, ErrorData> {
        let args = arguments.map_or(Value::Null, Value::Object);
        let run = run_id.unwrap_or(&self.run_id);
        match self.registry.call(run, name, args).await {
            Ok(value) => Ok(success(value)),
            Err(ToolError::UnknownTool { name }) => Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                None,
            )),
            Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(
                e.model_message(),
            )])),
        }
    }
}

/// A tool's result: its JSON as text, and as structured content when it is
/// an object (the only shape MCP's `structuredContent` takes).
fn success(value: Value) -> CallToolResult {
    let text = crate::providers::result_text(&value);
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if value.is_object() {
        result.structured_content = Some(value);
    }
    result
}

/// A fresh run id for a handler: `mcp-` and a 128-bit id unique across
/// processes, in hex.
fn new_run_id() -> Arc<str> {
    format!("mcp-{:032x}", crate::unique::unique_id()).into()
}

/// The run a request names in its `_meta`, if it names one.
fn meta_run_id(meta: Option<&serde_json::Map<String, Value>>) -> Option<&str> {
    meta?
        .get(RUN_ID_META)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

impl<S: Send + Sync + 'static> ServerHandler for McpServer<S> {
    fn get_info(&self) -> ServerConfig {
        self.info.clone()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let named = meta_run_id(request.meta.as_ref().map(|m| &m.0.0))
            .or_else(|| meta_run_id(Some(&context.meta.0.0)))
            .map(str::to_owned);
        let run = match (named, http_session(&context)) {
            (Some(run), _) => Some(run),
            (None, Some(Some(session))) => Some(session),
            (None, Some(None)) if self.is_write(&request.name) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "Error: `{}` changes things and this request belongs to no MCP session, \
                     so a repeat of it could not be recognised. Send the agent run's id in \
                     `_meta[\"{RUN_ID_META}\"]`, or use a session.",
                    request.name
                ))])
                .into());
            }
            (None, _) => None,
        };
        self.call(&request.name, request.arguments, run.as_deref())
            .await
            .map(CallToolResponse::from)
    }
}

impl<S: Send + Sync + 'static> McpServer<S> {
    fn is_write(&self, name: &str) -> bool {
        self.registry
            .definitions()
            .iter()
            .any(|d| d.name == name && d.kind == crate::tool::ToolKind::Write)
    }
}

/// Over streamable HTTP, the run of the request's MCP session
/// (`Some(None)`: a request outside any session); `None` off HTTP.
#[cfg(feature = "mcp-http")]
fn http_session(context: &RequestContext<RoleServer>) -> Option<Option<String>> {
    let parts = context.extensions.get::<::http::request::Parts>()?;
    Some(
        parts
            .headers
            .get("mcp-session-id")
            .and_then(|id| id.to_str().ok())
            .filter(|id| !id.is_empty())
            .map(|id| format!("mcp-session-{id}")),
    )
}

#[cfg(not(feature = "mcp-http"))]
fn http_session(_: &RequestContext<RoleServer>) -> Option<Option<String>> {
    None
}

#[cfg(feature = "mcp-http")]
mod streamable {
    use std::sync::Arc;

    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    use super::McpServer;

    impl<S: Send + Sync + 'static> McpServer<S> {
        /// This server as a streamable HTTP endpoint (feature `mcp-http`):
        /// a `tower` service to mount in axum, hyper or any tower stack.
        /// Calls run in their MCP session's run unless they name one (see
        /// the [module docs](super)).
        pub fn streamable_http(
            self,
            config: StreamableHttpServerConfig,
        ) -> StreamableHttpService<McpServer<S>, LocalSessionManager> {
            StreamableHttpService::new(
                move || Ok(self.clone()),
                Arc::new(LocalSessionManager::default()),
                config,
            )
        }
    }
}
