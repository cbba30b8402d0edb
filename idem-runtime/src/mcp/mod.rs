//! Serving a [`Registry`] over the Model Context Protocol (feature `mcp`),
//! on the official Rust SDK, [`rmcp`].
//!
//! [`Registry::into_mcp_server`] gives an [`McpServer`]: an
//! [`rmcp::ServerHandler`] that answers `tools/list` from the registry's
//! definitions (input schemas, and the annotations
//! [`Provider::Mcp`](crate::Provider::Mcp) writes) and `tools/call` through
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
//! # Runs and callers
//!
//! Keys are scoped to a run (docs/spec.md, "Keys") and, when the call has
//! one, to its tenant. Which run and tenant a call gets depends on what the
//! transport can vouch for:
//!
//! - **stdio, or any byte stream**: the client started this process, or
//!   holds its only connection. A call belongs to the run it names under
//!   [`RUN_ID_META`] in `_meta` (an agent that resumes a run after a crash
//!   sends the same id, and its repeated writes are replayed), else to the
//!   connection: one run per `McpServer` value. The tenant is the one
//!   [`McpServer::with_tenant`] sets, if any.
//! - **streamable HTTP, with a principal**: [`McpServer::with_principal`]
//!   installs a hook that names the caller from the HTTP request (typically
//!   an identity your authentication middleware put in the request's
//!   extensions). The principal is the call's tenant, so a run id named in
//!   `_meta` belongs to that principal alone: two principals naming the same
//!   run never see each other's records, and one principal resumes its run
//!   from any session. Without a run id the call belongs to its MCP session.
//! - **streamable HTTP, no principal**: the caller is its MCP session (the
//!   `Mcp-Session-Id` the server issued). A run id named in `_meta` is scoped
//!   under that session, so naming another client's run (or its session's
//!   run) reaches nothing of theirs. A sessionless request naming a run is
//!   refused (nobody vouches whose run it is). Only a request on the
//!   session protocol, which rmcp routes to its session once it checked
//!   that this server issued the id and that the session is live, belongs
//!   to a session: a request served statelessly that carries an
//!   `Mcp-Session-Id` (another client's, or one made up) is sessionless.
//! - **streamable HTTP without a session or a run id** (the stateless
//!   protocol of MCP 2026-07-28, which generic clients such as the Python
//!   SDK speak by default): the caller is the scope ([`StatelessWrites`]).
//!   The call belongs to one run of its caller's, the principal's, or, for
//!   requests no principal names, the one run all anonymous callers share.
//!   So a repeat by the same caller with the same arguments is replayed
//!   within the result's TTL. The trade-off: a caller that means to do the
//!   same thing twice (a second identical order) gets the first result
//!   back; and without authentication, anonymous clients replay each
//!   other's identical calls. [`McpServer::stateless_writes`] with
//!   [`StatelessWrites::Refuse`] refuses such writes instead.
//!
//! Read tools and `global` write tools (whose key ignores the run) never
//! need a run.
//!
//! [`Binding`] is these rules on their own, for a server of your own that
//! serves tools beside a registry's (as `idem gateway` does) and binds its
//! calls as this one does.
//!
//! A client that has its own key for an operation (an upstream
//! `Idempotency-Key`, a workflow step id) sends it under
//! [`OPERATION_KEY_META`]: the write is keyed on it, within the run and
//! tenant above, instead of on its arguments, which are then checked.
//!
//! A registry built with
//! [`require_tenant`](crate::RegistryBuilder::require_tenant) refuses
//! calls for which neither a principal nor [`McpServer::with_tenant`] names
//! a tenant.
//!
//! A result replayed to a duplicate says so: `true` under
//! [`REPLAYED_META`] in its `_meta`.
//!
//! # Errors
//!
//! A tool that is not registered is a protocol error (`-32602`, invalid
//! params). Everything else comes back as a tool result with `isError:
//! true` and [`ToolError::model_message`] as its text, which the model
//! reads: bad arguments (naming the field), a duplicate still in flight, a
//! failure of the tool itself, an unreachable store (the write did not
//! run), an operation that waits for a person's approval.
//!
//! # Approval at the client
//!
//! A write tool with `approval = "ask"` ([`Approval::Ask`])
//! whose operation awaits a person's approval asks the person at the
//! client, where the client declared `elicitation`: on a session, by an
//! `elicitation/create` request while the call waits; on MCP 2026-07-28, by
//! an `input_required` result the client answers by calling again. The
//! question says what the operation will do, with its arguments (hidden
//! fields replaced); accepting approves it ([`Registry::approve`]) and the
//! call runs it, declining refuses it ([`Registry::deny`]), dismissing
//! leaves it waiting. An answer is taken only for the operation it was
//! asked about. A client that cannot ask is answered
//! [`ToolError::ApprovalRequired`], as for `approval = "required"`.

mod approval;
mod binding;
mod caller;
mod progress;
#[cfg(feature = "mcp-http")]
mod streamable;

use std::collections::HashSet;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

pub use self::approval::{APPROVAL_QUESTION, ApprovalAnswer, approval_question};
pub use self::binding::{Binding, BoundCall, OPERATION_KEY_META, RUN_ID_META};
pub use self::caller::{Caller, StatelessWrites};
use self::progress::Progress;
use crate::error::ToolError;
use crate::key::ScopeKind;
pub use crate::providers::mcp::{AWAITING_APPROVAL_META, error_meta};
use crate::registry::{Answer, CallContext, Registry, Waiting};
use crate::tool::Approval;

/// The MCP SDK this module is built on, for its transports and
/// `ServiceExt::serve`, at the version this crate uses.
pub use rmcp;

/// The `_meta` member of a `tools/call` result that is `true` when the
/// result is the one an earlier call of the same operation recorded,
/// replayed: the tool did not run for this call.
/// `{"_meta": {"idem/replayed": true}}`.
pub const REPLAYED_META: &str = "idem/replayed";

/// An MCP server over a [`Registry`]: see the [module docs](self).
pub struct McpServer<S> {
    registry: Registry<S>,
    tools: Arc<[Tool]>,
    /// The run-scoped write tools: those a call without a run refuses.
    run_scoped: Arc<HashSet<String>>,
    /// The write tools with `approval = "ask"`.
    asks: Arc<HashSet<String>>,
    info: ServerConfig,
    /// How calls are bound to runs and tenants.
    binding: Binding,
    /// The operations an `approval = "ask"` question is out for.
    asking: approval::Out,
}

impl<S> std::fmt::Debug for McpServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("tools", &self.tools.len())
            .field("binding", &self.binding)
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
                    // `Provider::Mcp` writes what `Tool` reads; say so if not.
                    tracing::error!(tool = %def.name, error = %e, "tool left out of tools/list");
                    None
                }
            })
            .collect();
        let run_scoped = self
            .definitions()
            .iter()
            .filter(|d| d.scope == Some(ScopeKind::Run))
            .map(|d| d.name.clone())
            .collect();
        let asks = self
            .definitions()
            .iter()
            .filter(|d| self.approval_of(&d.name) == Approval::Ask)
            .map(|d| d.name.clone())
            .collect();
        let info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("idem", env!("CARGO_PKG_VERSION")));
        McpServer {
            registry: self,
            tools,
            run_scoped: Arc::new(run_scoped),
            asks: Arc::new(asks),
            info,
            binding: Binding::new(),
            asking: approval::Out::default(),
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

    /// Calls are made for `tenant` unless a principal names another (see
    /// [Runs and callers](self#runs-and-callers)): for a server that serves
    /// one customer, such as a stdio server started per customer.
    pub fn with_tenant(mut self, tenant: &str) -> Self {
        self.binding = self.binding.with_tenant(tenant);
        self
    }

    /// Over streamable HTTP (feature `mcp-http`), `principal` names the
    /// caller of each request, or `None` for an anonymous one; the principal
    /// is the call's tenant (see [Runs and callers](self#runs-and-callers)).
    /// The hook sees the request's [`http::request::Parts`]: its headers, and
    /// the extensions your authentication middleware inserted.
    ///
    /// ```no_run
    /// # fn f(registry: idem_runtime::Registry<()>) {
    /// /// What the authentication middleware puts in the request's extensions.
    /// #[derive(Clone)]
    /// struct User {
    ///     id: String,
    /// }
    ///
    /// let service = registry
    ///     .into_mcp_server()
    ///     .with_principal(|request| request.extensions.get::<User>().map(|u| u.id.clone()))
    ///     .streamable_http(Default::default());
    /// # }
    /// ```
    #[cfg(feature = "mcp-http")]
    pub fn with_principal(
        mut self,
        principal: impl Fn(&::http::request::Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.binding = self.binding.with_principal(principal);
        self
    }

    /// What a run-scoped write called over HTTP without a session or a run
    /// id does (default [`StatelessWrites::CallerScope`]).
    pub fn stateless_writes(mut self, policy: StatelessWrites) -> Self {
        self.binding = self.binding.stateless_writes(policy);
        self
    }

    /// The run of calls that do not name one in their `_meta`.
    pub fn run_id(&self) -> &str {
        self.binding.run_id()
    }

    /// The registry served.
    pub fn registry(&self) -> &Registry<S> {
        &self.registry
    }

    /// Answers one `tools/call` in run `run_id` (the server's own when
    /// `None`), for the tenant [`with_tenant`](Self::with_tenant) set: the
    /// registry's outcome as an MCP tool result, or a protocol error for an
    /// unknown tool.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        run_id: Option<&str>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut context = CallContext::run(run_id.unwrap_or(self.binding.run_id()));
        if let Some(tenant) = self.binding.tenant() {
            context = context.tenant(tenant);
        }
        let args = arguments.map_or(Value::Null, Value::Object);
        respond(self.registry.answer(context, name, args).await)
    }

    /// A `tools/call` of a client's, bound to its run and tenant: the
    /// registry's answer, after asking the person at the client where the
    /// operation awaits an approval it may be asked for
    /// (`approval = "ask"`).
    async fn answer(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        call: CallContext<'_>,
        args: Value,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = &request.name;
        let progress = Progress::of(request, context);
        let told = |waiting: &Waiting<'_>| progress.as_ref().map_or((), |p| p.tell(waiting));
        // The client's cancellation ends a wait for a person (never a
        // running body): the operation waits on, as it would have.
        let cancelled = || context.ct.is_cancelled();
        let call = call.on_wait(&told).stop_waiting_when(&cancelled);
        if !self.asks.contains(name.as_ref()) {
            let answer = self.registry.answer(call, name, args).await;
            return respond(answer).map(CallToolResponse::from);
        }
        // The person at the client is asked first; the tool's wait is for
        // a client that cannot ask, or a person who did not answer.
        let answer = self
            .registry
            .answer(call.without_waiting(), name, args.clone())
            .await;
        let Err(ToolError::ApprovalRequired { key, .. }) = &answer.result else {
            return respond(answer).map(CallToolResponse::from);
        };
        let shown = self.registry.shown_arguments(name, args.clone());
        let shown = shown.unwrap_or_else(|_| args.clone());
        let description = self.get_tool(name).and_then(|t| t.description);
        let about = (
            key.as_str(),
            description.as_deref().unwrap_or_default(),
            &shown,
        );
        match approval::ask(&self.registry, &self.asking, (request, context), about).await {
            approval::Asked::Answered => {
                let answer = self.registry.answer(call, name, args).await;
                respond(answer).map(CallToolResponse::from)
            }
            approval::Asked::InputRequired(asked) => Ok(asked.into()),
            approval::Asked::Waits => {
                let answer = self.registry.answer(call, name, args).await;
                respond(answer).map(CallToolResponse::from)
            }
        }
    }
}

/// The registry's `answer` as an MCP tool result (marked when replayed),
/// or a protocol error for an unknown tool.
fn respond(answer: Answer) -> Result<CallToolResult, ErrorData> {
    match answer.result {
        Err(ToolError::UnknownTool { name }) => Err(ErrorData::invalid_params(
            format!("unknown tool `{name}`"),
            None,
        )),
        outcome => {
            let mut result = tool_result(&outcome)?;
            if answer.replayed {
                mark_replayed(&mut result);
            }
            Ok(result)
        }
    }
}

/// Marks `result` as a recorded one, replayed: [`REPLAYED_META`] is
/// `true` in its `_meta`.
fn mark_replayed(result: &mut CallToolResult) {
    result
        .meta
        .get_or_insert_with(Default::default)
        .0
        .insert(REPLAYED_META.to_owned(), Value::Bool(true));
}

/// The `CallToolResult` of `outcome`, as [`Provider::Mcp`](crate::Provider::Mcp)
/// writes it.
fn tool_result(outcome: &Result<Value, ToolError>) -> Result<CallToolResult, ErrorData> {
    serde_json::from_value(crate::providers::mcp::answer(outcome)).map_err(|e| {
        ErrorData::internal_error(format!("a tool result MCP does not read: {e}"), None)
    })
}

impl<S: Send + Sync + 'static> ServerHandler for McpServer<S> {
    fn get_info(&self) -> ServerConfig {
        self.info.clone()
    }

    /// As rmcp's own, and notes that this handler serves a session.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.binding.initialized();
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
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
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let run_scoped = self.run_scoped.contains(request.name.as_ref());
        let call = match self.binding.bind(&request, &context, run_scoped) {
            Ok(call) => call,
            Err(refused) => return Ok((*refused).into()),
        };
        let args = request.arguments.take().map_or(Value::Null, Value::Object);
        self.answer(&request, &context, call.context(), args).await
    }
}
