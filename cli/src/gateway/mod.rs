//! `idem gateway`: idem in front of any MCP server. To its clients it is
//! an MCP server, on stdio or streamable HTTP; to the upstream server (a
//! child process it starts, or a URL), an MCP client. Read tools (the upstream says
//! `readOnlyHint`) pass through; every other tool is a write, claimed in
//! the store before it is called upstream, its result recorded and
//! replayed to duplicates (docs/gateway.md).
//!
//! `config` reads the per-tool settings; `upstream` is the client to the
//! upstream server; `catalog` makes the registry and the tool list from
//! its tools; `proxy` is a write tool that calls upstream; `server` is the
//! MCP server a client talks to; `http` serves it over HTTP.

mod catalog;
mod config;
mod http;
mod proxy;
mod server;
mod upstream;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use idem::mcp::{Binding, StatelessWrites};
use rmcp::ServiceExt;

use self::catalog::{Catalog, Settings};
use self::config::{Config, parse_duration};
use self::server::{Gateway, Shared};
use self::upstream::{Source, Upstream};
use crate::store::StoreUrl;

/// What `idem gateway` is given.
#[derive(Args)]
pub(crate) struct GatewayArgs {
    #[command(flatten)]
    store: StoreUrl,
    /// Per-tool settings: a TOML file with a `[tools.NAME]` table for each
    /// tool whose kind, key fields, scope, lease, TTL or policies differ
    /// from the defaults.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The tenant of every call no principal names (part of every key).
    #[arg(long)]
    tenant: Option<String>,
    /// The namespace of the records, as a registry's.
    #[arg(long)]
    namespace: Option<String>,
    /// How long the upstream has to answer a call (500ms, 30s, 10m, ..);
    /// past it, a write's outcome is uncertain. Also how long it has to
    /// start.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: Duration,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Over HTTP, accept `Authorization: Bearer TOKEN` as USER, the
    /// principal and tenant of its calls (repeatable); other requests are
    /// refused.
    #[arg(long, value_name = "USER=TOKEN", value_parser = http::user_token, requires = "http")]
    token: Vec<(String, String)>,
    /// Over HTTP, refuse writes that come without a session or a run id,
    /// instead of scoping them to their caller.
    #[arg(long, requires = "http")]
    refuse_stateless_writes: bool,
    /// End every replayed result with a short text saying that it is one,
    /// for clients that show the model only a result's content (the mark
    /// in `_meta` is always there; without this the content is the
    /// upstream's, byte for byte).
    #[arg(long)]
    note_replays: bool,
    /// The upstream MCP server, if it serves streamable HTTP: its URL
    /// (`http://host:port/mcp`).
    #[arg(long, value_name = "URL", conflicts_with = "upstream")]
    upstream_url: Option<String>,
    /// The upstream MCP server, started as a child process: its command
    /// and arguments, after `--`.
    #[arg(
        last = true,
        required_unless_present = "upstream_url",
        value_name = "COMMAND"
    )]
    upstream: Vec<String>,
}

/// Serves the gateway until its client goes (stdio) or it is stopped
/// (HTTP).
pub(crate) async fn serve(args: GatewayArgs) -> Result<(), String> {
    log_to_stderr();
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let settings = Settings {
        config,
        store: args.store.open_to_serve().await?,
        namespace: args.namespace,
        timeout: args.timeout,
    };
    let source = match args.upstream_url {
        Some(url) => Source::Url(url),
        None => Source::Command(args.upstream),
    };
    let upstream = Arc::new(Upstream::new(source, args.timeout));
    let tools = upstream.tools().await?;
    let catalog = Catalog::build(&tools, &settings, upstream.clone())?;
    let info = Gateway::server_info(upstream.instructions().await);
    let mut shared = Shared::new(catalog, upstream, info, args.timeout);
    shared.note_replays = args.note_replays;
    let shared = Arc::new(shared);
    tokio::spawn(follow(shared.clone(), settings));
    let mut binding = Binding::new();
    if let Some(tenant) = &args.tenant {
        binding = binding.with_tenant(tenant);
    }
    if args.refuse_stateless_writes {
        binding = binding.stateless_writes(StatelessWrites::Refuse);
    }
    let gateway = Gateway { shared, binding };
    match args.http {
        Some(addr) => http::serve(gateway, &addr, args.token).await,
        None => stdio(gateway).await,
    }
}

/// Follows the upstream's tools: whenever they may have changed, lists
/// them again and, if they did, serves a catalog of the new list (a list
/// the registry refuses leaves the old one served, and says why).
async fn follow(shared: Arc<Shared>, settings: Settings) {
    loop {
        shared.upstream.changed().await;
        let tools = match shared.upstream.tools().await {
            Ok(tools) => tools,
            Err(e) => {
                tracing::warn!(error = %e, "the upstream's tools could not be listed again");
                continue;
            }
        };
        if tools == shared.catalog().upstream_tools {
            continue;
        }
        match Catalog::build(&tools, &settings, shared.upstream.clone()) {
            Ok(catalog) => {
                tracing::info!(tools = tools.len(), "the upstream's tools changed");
                shared.replace(catalog).await;
            }
            Err(e) => tracing::error!(error = %e, "the upstream's new tools are not served"),
        }
    }
}

/// Serves one client on stdio, until it goes.
async fn stdio(gateway: Gateway) -> Result<(), String> {
    let running = gateway
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the client did not initialize: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("the gateway stopped: {e}"))?;
    Ok(())
}

/// The gateway's log, on stderr (stdout is the protocol's on stdio):
/// warnings and errors, or what `IDEM_LOG` asks for (`info`,
/// `idem=debug`, ..).
fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("IDEM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
