//! [`Binding`]: how an MCP server binds each `tools/call` to a run, a
//! tenant and an operation key, from what the request shows (the module
//! docs' "Runs and callers"). [`McpServer`](super::McpServer) holds one;
//! a server of your own that puts tools no [`Registry`](crate::Registry)
//! holds beside registry calls (a gateway to another MCP server) holds
//! one too, so that its calls are bound by the same rules.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use serde_json::Value;

use super::caller::{Caller, CallerKind, StatelessWrites};
use crate::registry::CallContext;

/// The `_meta` key under which a client may name the run a call belongs
/// to: `{"_meta": {"idem/run_id": "run-42"}}`.
pub const RUN_ID_META: &str = "idem/run_id";

/// The `_meta` member of a `tools/call` request that carries an operation
/// key its client chose (an upstream `Idempotency-Key`, a workflow step
/// id): a write tool is then keyed on it rather than on its arguments, as
/// with [`CallContext::operation_key`]:
/// `{"_meta": {"idem/operation_key": "order-42-refund"}}`.
pub const OPERATION_KEY_META: &str = "idem/operation_key";

/// What [`Binding::with_principal`] installs.
#[cfg(feature = "mcp-http")]
type PrincipalHook = Arc<dyn Fn(&::http::request::Parts) -> Option<String> + Send + Sync>;

/// How one MCP connection's calls are bound to runs and tenants (see
/// [Runs and callers](super#runs-and-callers)): the connection's own run,
/// the server's tenant, the principal hook, what stateless writes do, and
/// whether this connection is an MCP session.
///
/// One per connection: over HTTP, [`new_session`](Self::new_session)
/// gives each session's handler its own, with a run of its own.
pub struct Binding {
    /// The run of calls that name none.
    run_id: Arc<str>,
    /// The tenant of calls no principal names.
    tenant: Option<Arc<str>>,
    /// What sessionless writes without a run id do.
    stateless: StatelessWrites,
    /// The handler holding this binding serves an MCP session: it was
    /// initialized. Over HTTP, rmcp gives each session a handler of its
    /// own and routes to it only requests carrying the session's id, once
    /// it checked that it issued it and that it is live; a request served
    /// statelessly gets a handler that is never initialized, and the
    /// `Mcp-Session-Id` it carries was never checked.
    in_session: AtomicBool,
    /// Names the caller of an HTTP request.
    #[cfg(feature = "mcp-http")]
    principal: Option<PrincipalHook>,
}

impl std::fmt::Debug for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("run_id", &self.run_id)
            .field("tenant", &self.tenant)
            .field("stateless", &self.stateless)
            .finish_non_exhaustive()
    }
}

impl Default for Binding {
    fn default() -> Self {
        Binding::new()
    }
}

/// A `tools/call` bound to its run, its tenant and the operation key it
/// carries ([`Binding::bind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundCall {
    run_id: String,
    tenant: Option<String>,
    operation_key: Option<String>,
}

impl BoundCall {
    /// The context to call the registry in.
    pub fn context(&self) -> CallContext<'_> {
        let mut context = CallContext::run(&self.run_id);
        if let Some(tenant) = &self.tenant {
            context = context.tenant(tenant);
        }
        if let Some(key) = &self.operation_key {
            context = context.operation_key(key);
        }
        context
    }
}

impl Binding {
    /// A connection with a fresh run of its own, no tenant, no principal
    /// hook and the default [`StatelessWrites`].
    pub fn new() -> Binding {
        Binding {
            run_id: new_run_id(),
            tenant: None,
            stateless: StatelessWrites::default(),
            in_session: AtomicBool::new(false),
            #[cfg(feature = "mcp-http")]
            principal: None,
        }
    }

    /// Calls are made for `tenant` unless a principal names another (see
    /// [`McpServer::with_tenant`](super::McpServer::with_tenant)).
    pub fn with_tenant(mut self, tenant: &str) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// Over streamable HTTP (feature `mcp-http`), `principal` names the
    /// caller of each request (see
    /// [`McpServer::with_principal`](super::McpServer::with_principal)).
    #[cfg(feature = "mcp-http")]
    pub fn with_principal(
        mut self,
        principal: impl Fn(&::http::request::Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.principal = Some(Arc::new(principal));
        self
    }

    /// What a run-scoped write called over HTTP without a session or a run
    /// id does (default [`StatelessWrites::CallerScope`]).
    pub fn stateless_writes(mut self, policy: StatelessWrites) -> Self {
        self.stateless = policy;
        self
    }

    /// The run of calls that do not name one in their `_meta`.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The tenant [`with_tenant`](Self::with_tenant) set.
    pub(crate) fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The binding of another connection (an MCP session over HTTP): the
    /// same tenant, hook and policy, and a run of its own.
    pub fn new_session(&self) -> Binding {
        Binding {
            run_id: new_run_id(),
            tenant: self.tenant.clone(),
            stateless: self.stateless,
            in_session: AtomicBool::new(false),
            #[cfg(feature = "mcp-http")]
            principal: self.principal.clone(),
        }
    }

    /// Notes that the connection is an MCP session: its handler was
    /// initialized. Call it from `ServerHandler::initialize`.
    pub fn initialized(&self) {
        self.in_session.store(true, Ordering::Relaxed);
    }

    /// Binds `request` to its run, tenant and operation key, by what
    /// `context` shows of its caller. `run_scoped`: the tool is a write
    /// whose key holds the run; such a call that has no run its caller can
    /// vouch for gets `Err` with the error result to answer (nothing
    /// runs). Any other call without a run is made in the connection's.
    pub fn bind(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        run_scoped: bool,
    ) -> Result<BoundCall, Box<CallToolResult>> {
        // rmcp moves the protocol's members (the progress token, ..) from
        // the request's `_meta` into the context's: the request's first.
        let metas = [
            request.meta.as_ref().map(|m| &m.0.0),
            Some(&context.meta.0.0),
        ];
        let caller = self.caller(context);
        self.bind_by(&request.name, &metas, &caller, run_scoped)
            .map_err(|text| Box::new(CallToolResult::error(vec![ContentBlock::text(text)])))
    }

    /// [`bind`](Self::bind) for a server that reads the protocol itself:
    /// the call of tool `tool`, whose request's `_meta` is `meta`, made by
    /// `caller`. `Err` is the text of the error result to answer (nothing
    /// runs).
    pub fn bind_parts(
        &self,
        tool: &str,
        meta: Option<&serde_json::Map<String, Value>>,
        caller: &Caller,
        run_scoped: bool,
    ) -> Result<BoundCall, String> {
        self.bind_by(tool, &[meta], &caller.0, run_scoped)
    }

    /// The binding rule: a `_meta` member is the first of `metas` that
    /// holds it.
    fn bind_by(
        &self,
        tool: &str,
        metas: &[Option<&serde_json::Map<String, Value>>],
        caller: &CallerKind,
        run_scoped: bool,
    ) -> Result<BoundCall, String> {
        let meta = |name: &str| metas.iter().find_map(|m| meta_str(*m, name));
        let run_id = match caller.run(meta(RUN_ID_META), &self.run_id, self.stateless) {
            Ok(run) => run,
            Err(why) if run_scoped => {
                return Err(format!(
                    "Error: `{tool}` changes things and {why}, so a repeat of it could not be \
                     recognised; it did not run."
                ));
            }
            // A read tool keeps no record, a global tool's key ignores the
            // run: any run will do.
            Err(_) => self.run_id.to_string(),
        };
        Ok(BoundCall {
            run_id,
            tenant: caller.tenant(self.tenant.as_deref()),
            operation_key: meta(OPERATION_KEY_META).map(str::to_owned),
        })
    }

    /// What the request shows of its caller (see [`CallerKind`]).
    fn caller(&self, context: &RequestContext<RoleServer>) -> CallerKind {
        #[cfg(feature = "mcp-http")]
        if let Some(request) = context.extensions.get::<::http::request::Parts>() {
            return self.http_caller(request);
        }
        #[cfg(not(feature = "mcp-http"))]
        let _ = context;
        CallerKind::Connection
    }

    /// The caller of an HTTP request: its principal, as the hook names it,
    /// and its MCP session, which only a session's own handler trusts
    /// (rmcp checked that it issued the id and that the session is live).
    #[cfg(feature = "mcp-http")]
    fn http_caller(&self, request: &::http::request::Parts) -> CallerKind {
        let session = request
            .headers
            .get("mcp-session-id")
            .filter(|_| self.in_session.load(Ordering::Relaxed))
            .and_then(|id| id.to_str().ok())
            .filter(|id| !id.is_empty())
            .map(|id| format!("mcp-session-{id}"));
        match (
            self.principal.as_ref().and_then(|hook| hook(request)),
            session,
        ) {
            (Some(principal), session) => CallerKind::Principal { principal, session },
            (None, Some(session)) => CallerKind::Session(session),
            (None, None) => CallerKind::Anonymous,
        }
    }
}

/// A fresh run id for a connection: `mcp-` and a 128-bit id unique across
/// processes, in hex.
fn new_run_id() -> Arc<str> {
    format!("mcp-{:032x}", crate::unique::unique_id()).into()
}

/// The non-empty string a request's `_meta` holds under `name`, if any.
fn meta_str<'a>(meta: Option<&'a serde_json::Map<String, Value>>, name: &str) -> Option<&'a str> {
    meta?
        .get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}
