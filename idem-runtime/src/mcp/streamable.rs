//! [`McpServer::streamable_http`]: the server as a streamable HTTP endpoint
//! (feature `mcp-http`), a handler per MCP session.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

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
            move || Ok(self.for_new_session()),
            Arc::new(LocalSessionManager::default()),
            config,
        )
    }
}

impl<S> McpServer<S> {
    /// A handler for another connection (an MCP session over HTTP): the
    /// same registry and settings, and a run of its own for the calls that
    /// name none.
    fn for_new_session(&self) -> Self {
        McpServer {
            registry: self.registry.clone(),
            tools: self.tools.clone(),
            run_scoped: self.run_scoped.clone(),
            asks: self.asks.clone(),
            info: self.info.clone(),
            binding: self.binding.new_session(),
            asking: self.asking.clone(),
        }
    }
}
