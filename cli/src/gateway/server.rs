//! The MCP server the gateway is to its clients, one handler per
//! connection (per MCP session over HTTP): `tools/list` from the catalog;
//! `tools/call` of a read passed to the upstream as it came, of a write
//! bound to its run and tenant as the library's MCP server binds it, then
//! through the registry (claimed, run once upstream, recorded, replayed),
//! answered with the upstream's result as it came, marked in `_meta` when
//! it is a replay.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use idem::mcp::{Binding, REPLAYED_META};
use idem::{Answer, ToolError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams, ResultType,
    ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{Peer, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::watch;

use super::catalog::Catalog;
use super::proxy::{UNRECORDED, Unrecorded};
use super::upstream::{Failure, Upstream};

/// What every connection's handler shares.
pub(crate) struct Shared {
    /// What is served now: replaced when the upstream's tools change.
    catalog: RwLock<Arc<Catalog>>,
    /// Counts the catalogs served, for the clients that listen for a
    /// change of the tool list (MCP 2026-07-28).
    generation: watch::Sender<u64>,
    /// The clients on an older protocol, told of a change unasked; those
    /// gone are dropped at the next change or the next session.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) info: ServerConfig,
    /// How long the upstream has to answer a read.
    pub(crate) timeout: Duration,
    /// Replayed results end with a text saying so (`--note-replays`).
    pub(crate) note_replays: bool,
}

impl Shared {
    pub(crate) fn new(
        catalog: Catalog,
        upstream: Arc<Upstream>,
        info: ServerConfig,
        timeout: Duration,
    ) -> Shared {
        Shared {
            catalog: RwLock::new(Arc::new(catalog)),
            generation: watch::Sender::new(0),
            peers: Mutex::new(Vec::new()),
            upstream,
            info,
            timeout,
            note_replays: false,
        }
    }

    /// What is served now.
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Serves `catalog` from now on, and tells the clients that the tool
    /// list changed.
    pub(crate) async fn replace(&self, catalog: Catalog) {
        *self.catalog.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(catalog);
        self.generation.send_modify(|g| *g += 1);
        let peers = std::mem::take(&mut *self.peers.lock().unwrap_or_else(PoisonError::into_inner));
        let mut live = Vec::with_capacity(peers.len());
        for peer in peers {
            if peer.notify_tool_list_changed().await.is_ok() {
                live.push(peer);
            }
        }
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(live);
    }
}

/// The gateway, as one connection's MCP server.
pub(crate) struct Gateway {
    pub(crate) shared: Arc<Shared>,
    /// How this connection's calls are bound to runs and tenants.
    pub(crate) binding: Binding,
}

impl Gateway {
    /// What `initialize` answers: tools, and the upstream's instructions.
    pub(crate) fn server_info(instructions: Option<String>) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "idem-gateway",
            env!("CARGO_PKG_VERSION"),
        ));
        match instructions {
            Some(instructions) => info.with_instructions(instructions),
            None => info,
        }
    }

    /// The handler of another connection: the same catalog, a binding of
    /// its own.
    pub(crate) fn new_session(&self) -> Gateway {
        Gateway {
            shared: self.shared.clone(),
            binding: self.binding.new_session(),
        }
    }

    /// A read: the request goes upstream as it came.
    async fn read(&self, request: CallToolRequestParams) -> Result<CallToolResult, ErrorData> {
        match self
            .shared
            .upstream
            .call(request, self.shared.timeout)
            .await
        {
            Ok(result) => Ok(result),
            Err(Failure::Refused(e)) => Err(e),
            Err(failure) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "Error: {failure}"
            ))])),
        }
    }

    /// A write, through the registry in the run, tenant and operation key
    /// the binding gives it.
    async fn write(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let catalog = self.shared.catalog();
        let run_scoped = catalog.run_scoped.contains(request.name.as_ref());
        let call = match self.binding.bind(&request, context, run_scoped) {
            Ok(call) => call,
            Err(refused) => return Ok(*refused),
        };
        let args = request.arguments.map_or(Value::Null, Value::Object);
        let (answer, unrecorded) = UNRECORDED
            .scope(RefCell::new(None), async {
                let answer = catalog.registry.answer(call.context(), &request.name, args);
                let answer = answer.await;
                (answer, UNRECORDED.with(|slot| slot.borrow_mut().take()))
            })
            .await;
        let mut result = answered(answer, unrecorded)?;
        if self.shared.note_replays && is_replay(&result) {
            result.content.push(ContentBlock::text(REPLAY_NOTE));
        }
        Ok(result)
    }
}

/// What `--note-replays` adds to a replayed result, for the model.
const REPLAY_NOTE: &str = "(This is the recorded result of an identical earlier call: the \
                           operation was done once and was not done again.)";

/// Whether `result` is marked as a replay.
fn is_replay(result: &CallToolResult) -> bool {
    let mark = result.meta.as_ref().and_then(|m| m.0.get(REPLAYED_META));
    mark == Some(&Value::Bool(true))
}

/// The client's answer to a write: the upstream's result as it came
/// (marked when replayed), its JSON-RPC error, or idem's own error as a
/// result the model reads.
fn answered(answer: Answer, unrecorded: Option<Unrecorded>) -> Result<CallToolResult, ErrorData> {
    match (answer.result, unrecorded) {
        (Ok(value), _) => {
            let mut result: CallToolResult = serde_json::from_value(value).map_err(|e| {
                ErrorData::internal_error(format!("a recorded result MCP does not read: {e}"), None)
            })?;
            if answer.replayed {
                let meta = result.meta.get_or_insert_with(Default::default);
                meta.0.insert(REPLAYED_META.to_owned(), Value::Bool(true));
            }
            Ok(result)
        }
        (Err(ToolError::Failed { .. }), Some(Unrecorded::ErrorResult(result))) => Ok(result),
        (Err(ToolError::Failed { .. }), Some(Unrecorded::Refused(e))) => Err(e),
        (Err(ToolError::UnknownTool { name }), _) => Err(ErrorData::invalid_params(
            format!("unknown tool `{name}`"),
            None,
        )),
        (Err(e), _) => Ok(CallToolResult::error(vec![ContentBlock::text(
            e.model_message(),
        )])),
    }
}

/// `result` with its `resultType`, which an upstream on an older protocol
/// leaves out and a client on MCP 2026-07-28 requires (rmcp drops it again
/// for a client on an older protocol).
fn complete(mut result: CallToolResult) -> CallToolResult {
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        self.shared.info.clone()
    }

    /// As rmcp's own, and notes that this connection is an MCP session.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.binding.initialized();
        context.peer.set_peer_info(request.clone());
        let peers = &self.shared.peers;
        let mut peers = peers.lock().unwrap_or_else(PoisonError::into_inner);
        // Sessions that ended are dropped here too, not only at a change
        // of the tool list: a long-lived gateway whose tools never change
        // keeps only the sessions still open.
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(context.peer.clone());
        drop(peers);
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.shared.catalog().tools.clone(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let catalog = self.shared.catalog();
        catalog.tools.iter().find(|t| t.name == name).cloned()
    }

    /// A client may listen for changes of the tool list (MCP 2026-07-28).
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// Tells the subscriber of every change of the tool list, until it
    /// cancels.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut generation = self.shared.generation.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = generation.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if let Err(e) = context.sink().notify_tool_list_changed().await {
                        tracing::debug!(error = %e, "a client's subscription is gone");
                        return Ok(());
                    }
                }
            }
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let catalog = self.shared.catalog();
        let answer = if catalog.writes.contains(request.name.as_ref()) {
            self.write(request, &context).await
        } else if catalog.reads.contains(request.name.as_ref()) {
            self.read(request).await
        } else {
            Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            ))
        };
        answer.map(|result| CallToolResponse::from(complete(result)))
    }
}
