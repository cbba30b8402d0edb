//! The gateway's check at start: the upstream started, its tools listed
//! and fitted to the configuration before anything is served, and the
//! tools taken as writes for want of an annotation said, once. Over HTTP
//! (and for a stdio client that asks nothing) on a connection of the
//! gateway's own ([`probe`]); on stdio, on the connection the session
//! then uses (`Session::first_request`), so the upstream starts once.

use std::time::Duration;

use serde_json::{Value, json};

use super::catalog::{Catalog, Settings, list_all_tools, unannotated};
use super::config::Config;
use super::jsonrpc;
use super::link::{Link, Source};

/// Starts the upstream once before serving, as the gateway's own client,
/// to refuse at once an upstream that does not start or initialize, or
/// whose tools the configuration does not fit; warns of the tools taken
/// as writes only because nothing says otherwise.
pub(super) async fn probe(
    source: &Source,
    settings: &Settings,
    patience: Duration,
) -> Result<(), String> {
    let tools = upstream_tools(source, patience).await?;
    let catalog = Catalog::build(&tools, settings)?;
    if let Some(unfit) = catalog.unlisted(&settings.config) {
        return Err(unfit);
    }
    warn_unannotated(&tools, &settings.config, source);
    Ok(())
}

/// How the upstream is named where it failed: its program, or its URL.
pub(super) fn upstream_name(source: &Source) -> String {
    match source {
        Source::Command(command) => format!("`{}`", command.first().map_or("", String::as_str)),
        Source::Url(url) => format!("at {url}"),
    }
}

/// The upstream's tools (every page), listed on a connection of the
/// gateway's own, closed after.
pub(super) async fn upstream_tools(
    source: &Source,
    patience: Duration,
) -> Result<Vec<serde_json::Value>, String> {
    let name = upstream_name(source);
    let link = Link::new(source.clone(), patience, None);
    // Declaring what a client may, so that a server that lists some tools
    // only to such clients lists them all; the probe asks nothing of them.
    let initialize = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}},
        "clientInfo": {"name": "idem-gateway", "version": env!("CARGO_PKG_VERSION")},
    });
    let initialized = link.call("initialize", initialize, patience).await;
    let listed = match initialized {
        Ok(_) => {
            let done = jsonrpc::notification("notifications/initialized", json!({}));
            link.notify(done).await;
            list_all_tools(&link, patience).await
        }
        Err(e) if e.starts_with("no answer") => Err(format!(
            "the upstream server {name} did not initialize within {patience:?}"
        )),
        Err(e) => Err(format!(
            "the upstream server {name} did not initialize: {e}"
        )),
    };
    link.close().await;
    listed
}

/// Logs, once, the tools taken as writes only because the upstream does
/// not annotate them, and how to say what they are.
pub(super) fn warn_unannotated(tools: &[Value], config: &Config, source: &Source) {
    let names = unannotated(tools, config);
    if names.is_empty() {
        return;
    }
    let command = match source {
        Source::Command(command) => format!("-- {}", command.join(" ")),
        Source::Url(url) => format!("--upstream-url {url}"),
    };
    tracing::warn!(
        "{} of the upstream's tools say neither that they only read nor that they write, so they \
         are taken as writes (recorded, and a repeat within its run is replayed, not run): {}. \
         Mark each in --config: `kind = \"read\"` for one that changes nothing, `kind = \"write\"` \
         otherwise; `idem gateway init {command}` prints a file to start from",
        names.len(),
        names.join(", ")
    );
}

/// Whether the client of `request` (its `initialize`, or a request of MCP
/// 2026-07-28 saying in `_meta` what its client can) declares sampling,
/// elicitation and roots: a server shows such a client every tool.
pub(super) fn declares_every_capability(request: &Value) -> bool {
    let params = jsonrpc::params(request);
    let capabilities = match jsonrpc::method(request) {
        Some("initialize") => params.and_then(|p| p.get("capabilities")),
        _ => jsonrpc::meta(request).and_then(|m| m.get(jsonrpc::CAPABILITIES_META)),
    };
    capabilities.is_some_and(|c| {
        ["sampling", "elicitation", "roots"]
            .iter()
            .all(|k| c.get(k).is_some())
    })
}
