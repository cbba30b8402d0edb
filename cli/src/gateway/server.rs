//! The MCP server the gateway is to its client: `tools/list` from the
//! catalog; `tools/call` of a read passed to the upstream as it came, of a
//! write through the registry (claimed, run once upstream, recorded,
//! replayed), answered with the upstream's result as it came, marked in
//! `_meta` when it is a replay.

use std::cell::RefCell;
use std::sync::Arc;

use idem::mcp::{OPERATION_KEY_META, REPLAYED_META, RUN_ID_META};
use idem::{Answer, CallContext, ToolError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ResultType, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::catalog::Catalog;
use super::proxy::{UNRECORDED, Unrecorded};
use super::upstream::{Failure, Upstream};

/// The gateway, as one client's MCP server.
pub(crate) struct Gateway {
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) upstream: Arc<Upstream>,
    /// The run of calls that name none: one per connection.
    pub(crate) run_id: String,
    /// The tenant of every call.
    pub(crate) tenant: Option<String>,
    pub(crate) info: ServerConfig,
    /// How long the upstream has to answer a read.
    pub(crate) timeout: std::time::Duration,
}

impl Gateway {
    /// What `initialize` answers: tools, and the upstream's instructions.
    pub(crate) fn server_info(instructions: Option<String>) -> ServerConfig {
        let info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "idem-gateway",
                env!("CARGO_PKG_VERSION"),
            ));
        match instructions {
            Some(instructions) => info.with_instructions(instructions),
            None => info,
        }
    }

    /// A read: the request goes upstream as it came.
    async fn read(&self, request: CallToolRequestParams) -> Result<CallToolResult, ErrorData> {
        match self.upstream.call(request, self.timeout).await {
            Ok(result) => Ok(result),
            Err(Failure::Refused(e)) => Err(e),
            Err(failure) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "Error: {failure}"
            ))])),
        }
    }

    /// A write, through the registry in the run the request names (or the
    /// connection's), for the gateway's tenant, keyed on the operation key
    /// the request carries if any.
    async fn write(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // rmcp leaves the request's `_meta` in the params or in the
        // context, by protocol version.
        let metas = [
            request.meta.as_ref().map(|m| &m.0.0),
            Some(&context.meta.0.0),
        ];
        let named = |name| {
            metas
                .iter()
                .flatten()
                .find_map(|m| m.get(name).and_then(Value::as_str))
                .filter(|s| !s.is_empty())
        };
        let mut context = CallContext::run(named(RUN_ID_META).unwrap_or(&self.run_id));
        if let Some(tenant) = &self.tenant {
            context = context.tenant(tenant);
        }
        if let Some(key) = named(OPERATION_KEY_META) {
            context = context.operation_key(key);
        }
        let args = request.arguments.clone().map_or(Value::Null, Value::Object);
        let registry = &self.catalog.registry;
        let (answer, unrecorded) = UNRECORDED
            .scope(RefCell::new(None), async {
                let answer = registry.answer(context, &request.name, args).await;
                (answer, UNRECORDED.with(|slot| slot.borrow_mut().take()))
            })
            .await;
        answered(answer, unrecorded)
    }
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
        self.info.clone()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.catalog.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.catalog.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let answer = if self.catalog.writes.contains(request.name.as_ref()) {
            self.write(request, &context).await
        } else if self.catalog.reads.contains(request.name.as_ref()) {
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
