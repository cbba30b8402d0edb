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
    ///
    /// It is closed to web pages the user happens to visit, as the MCP
    /// transport asks of a server: a request whose `Host` is not one of
    /// `config.allowed_hosts` (loopback names by default) is refused
    /// (403, against DNS rebinding), and so is one with an `Origin` that
    /// `config.allowed_origins` does not list (403: with that list empty,
    /// every browser request; this method turns on
    /// [`StreamableHttpServerConfig::enforce_origin_validation`]). A POST
    /// must send `Content-Type: application/json` (415) and accept both
    /// answer forms (406). To serve a host name, or a web app's origin,
    /// list them in `config`; the CORS headers such an app needs come
    /// from the tower stack the service is mounted in.
    pub fn streamable_http(
        self,
        config: StreamableHttpServerConfig,
    ) -> StreamableHttpService<McpServer<S>, LocalSessionManager> {
        let config = config.enforce_origin_validation();
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
