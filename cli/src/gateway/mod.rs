//! `idem gateway`: idem in front of any MCP server. To its clients it is
//! the upstream MCP server (a child process it starts, or a URL), on stdio
//! or streamable HTTP: every message is relayed as it came, both ways,
//! except the few idem owns. Read tools (the upstream says `readOnlyHint`)
//! pass through; every other tool is a write, claimed in the store before
//! it is called upstream, its result recorded and replayed to duplicates
//! (docs/gateway.md).
//!
//! `config` reads the per-tool settings; `jsonrpc` reads messages; `link`
//! is a connection to the upstream, which routes what it sends to the
//! client it belongs to; `catalog` makes the registry and the listed
//! tools from the upstream's; `start` is the check at start (the tools
//! fitted to the configuration, the unannotated ones said); `review` says
//! what the gateway makes of them instead of serving (`idem gateway
//! init`, `idem gateway check`); `repeat` is the argument that repeats a
//! write on purpose; `proxy` is a write tool that calls upstream;
//! `session` is one client's session, relayed to its link, and `answer`
//! what a write is answered; `stdio` and `http` serve clients.

mod answer;
mod ask;
mod catalog;
mod condition;
mod config;
mod drain;
mod health;
mod http;
mod jsonrpc;
mod link;
mod metrics;
mod progress;
mod proxy;
mod repeat;
mod review;
mod session;
mod spelling;
mod start;
mod stdio;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use idem::mcp::{Binding, StatelessWrites};

use self::catalog::Settings;
pub(crate) use self::config::Config;
use self::config::parse_duration;
use self::drain::Drain;
use self::link::Source;
use self::session::Shared;
use crate::guard::GuardArgs;
use crate::store::StoreUrl;

/// What `idem gateway` is given.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct GatewayArgs {
    /// Instead of serving: `init` prints a configuration to start from,
    /// `check` says what each tool will be.
    #[command(subcommand)]
    review: Option<Review>,
    #[command(flatten)]
    store: Option<StoreUrl>,
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
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (calls by tool and
    /// outcome, their durations, the store's and the upstream's, open
    /// sessions and upstreams; docs/gateway.md, "Metrics").
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Over HTTP, accept `Authorization: Bearer TOKEN` as USER, the
    /// principal and tenant of its calls (repeatable); other requests are
    /// refused. `ps` shows it to every user of the host: on a shared host,
    /// give tokens with --token-file or IDEM_TOKENS (`USER=TOKEN` entries
    /// separated by commas or spaces) instead.
    #[arg(long, value_name = "USER=TOKEN", value_parser = crate::tokens::user_token, requires = "http")]
    token: Vec<(String, String)>,
    /// Over HTTP, the tokens of a file as well: a `USER=TOKEN` line each
    /// (blank lines and `#` comments skipped).
    #[arg(long, value_name = "FILE", env = "IDEM_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// Over HTTP without --token, serve an address other than loopback
    /// all the same (behind a proxy that authenticates its clients).
    #[arg(long, requires = "http", conflicts_with = "token")]
    allow_anonymous: bool,
    /// Over HTTP, end an MCP session whose client sent nothing for this
    /// long (and that waits for no answer), and its upstream connection.
    #[arg(long, default_value = "5m", value_parser = parse_duration, requires = "http")]
    session_idle: Duration,
    /// Over HTTP, on SIGTERM or SIGINT: how long writes in flight have to
    /// be answered and recorded before they are given up as uncertain
    /// (new sessions and writes are refused meanwhile).
    #[arg(long, default_value = "30s", value_parser = parse_duration, requires = "http")]
    drain: Duration,
    /// Over HTTP, serve at most this many MCP sessions at once (each has
    /// an upstream connection of its own: a process, for a command); an
    /// `initialize` past it is answered 503 with `Retry-After`.
    #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: Option<u32>,
    #[command(flatten)]
    guard: GuardArgs,
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
    #[command(flatten)]
    upstream: UpstreamArgs,
}

/// What the gateway says of an upstream's tools, instead of serving them.
#[derive(clap::Subcommand)]
enum Review {
    /// Print a configuration for the upstream's tools to start from: a
    /// table per tool, its kind as annotated, the unannotated ones (taken
    /// as writes) marked for review, `kind = "read"` suggested (commented
    /// out) for those whose name reads as a query:
    /// `idem gateway init -- npx some-mcp-server > gateway.toml`.
    Init {
        #[command(flatten)]
        upstream: UpstreamArgs,
    },
    /// Say what each of the upstream's tools will be with a configuration
    /// (a read, or a write: its scope, key and approval), or why the
    /// gateway would refuse to start with it:
    /// `idem gateway check --config gateway.toml -- npx some-mcp-server`.
    Check {
        /// The configuration to check (none: the defaults).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        upstream: UpstreamArgs,
    },
}

/// The upstream MCP server, and how long it has to answer.
#[derive(Args)]
struct UpstreamArgs {
    /// How long the upstream has to answer a call (500ms, 30s, 10m, ..);
    /// past it, a write's outcome is uncertain. Also how long it has to
    /// start.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: Duration,
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

impl UpstreamArgs {
    fn source(self) -> Source {
        match self.upstream_url {
            Some(url) => Source::Url(url),
            None => Source::Command(self.upstream),
        }
    }
}

/// Serves the gateway until its client goes (stdio) or it is stopped
/// (HTTP).
pub(crate) async fn serve(args: GatewayArgs) -> Result<(), String> {
    log_to_stderr();
    match args.review {
        Some(Review::Init { upstream }) => {
            let (patience, source) = (upstream.timeout, upstream.source());
            return review::init(&source, patience).await;
        }
        Some(Review::Check { config, upstream }) => {
            let (patience, source) = (upstream.timeout, upstream.source());
            return review::check(config.as_deref(), &source, patience).await;
        }
        None => {}
    }
    let Some(store) = args.store else {
        return Err("the gateway needs a store: --store URL (or IDEM_STORE)".into());
    };
    let store = store.open_to_serve().await?;
    if let Some(addr) = &args.metrics {
        let waiting = metrics::Waiting::new(store.clone(), args.namespace.clone());
        metrics::serve(addr, waiting).await?;
    }
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let patience = args.upstream.timeout;
    let settings = Settings {
        config,
        store,
        namespace: args.namespace,
        timeout: patience,
    };
    let source = args.upstream.source();
    // On stdio the client's first request makes the check, on the one
    // upstream connection (`stdio`); over HTTP, before serving.
    if args.http.is_some() {
        start::probe(&source, &settings, patience).await?;
    }
    let shared = Arc::new(Shared {
        settings,
        patience,
        note_replays: args.note_replays,
        drain: Arc::new(Drain::default()),
    });
    let mut binding = Binding::new();
    if let Some(tenant) = &args.tenant {
        binding = binding.with_tenant(tenant);
    }
    if args.refuse_stateless_writes {
        binding = binding.stateless_writes(StatelessWrites::Refuse);
    }
    match args.http {
        Some(addr) => {
            let options = http::Options {
                addr,
                tokens: crate::tokens::gather(args.token, args.token_file.as_deref())?,
                idle: args.session_idle,
                drain: args.drain,
                max_sessions: args.max_sessions.map(|n| n as usize),
                anonymous: args.allow_anonymous,
                guard: args.guard,
            };
            http::serve(shared, source, binding, options).await
        }
        None => stdio::serve(shared, source, binding).await,
    }
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
