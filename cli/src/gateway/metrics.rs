//! `idem gateway --metrics ADDR`: Prometheus's text format at
//! `http://ADDR/metrics`, rendered by `metrics-exporter-prometheus` from
//! what the process records through the `metrics` facade: the library's
//! own metrics (`idem::metrics`: calls by tool and outcome, the call's and
//! the store's durations, leases, webhooks) and the gateway's below, under
//! one naming (Prometheus's text writes each dot as `_`: `idem_calls`).
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `idem.calls` | counter | `gen_ai.tool.name`, `idem.outcome` = `read` | a read passed through (the library counts the writes' outcomes) |
//! | `idem.gateway.sessions` | gauge | | MCP sessions open, each with its upstream connection (over HTTP, the one shared by stateless requests included) |
//! | `idem.gateway.upstreams` | gauge | | upstream connections open: child processes, or MCP sessions at the upstream's URL |
//! | `idem.gateway.upstream.restarts` | counter | | upstream connections made again after one went |
//! | `idem.gateway.upstream.duration` | histogram, seconds | `mcp.method.name` | one request, from sent to answered by the upstream |
//! | `idem.operations` | gauge | `idem.state` = `awaiting_approval`, `unknown` | the store's operations waiting for a person's decision, counted by a scan of the namespace when scraped, at most every 15 s (or ten times as long as a scan takes) |
//!
//! Labels are bounded: a tool name is one of the upstream's listed tools
//! (any other is `other`), a method one of MCP's (any other is `other`).
//! Nothing records arguments, results, tokens, tenants or runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use idem::IdemStore;
use idem::store::{RecordState, ScanFilter};

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

const SESSIONS: &str = "idem.gateway.sessions";
const UPSTREAMS: &str = "idem.gateway.upstreams";
const UPSTREAM_RESTARTS: &str = "idem.gateway.upstream.restarts";
const UPSTREAM_DURATION: &str = "idem.gateway.upstream.duration";
const OPERATIONS: &str = "idem.operations";

/// How often the operations waiting for a decision are counted, at least.
const COUNT_EVERY: Duration = Duration::from_secs(15);

/// The buckets of every duration histogram, in seconds: from a replay
/// (a fraction of a millisecond) to a call that waits for a person.
const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0, 60.0,
];

/// The methods named in `mcp.method.name`; any other is `other`.
const METHODS: [&str; 16] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/result",
    "tasks/cancel",
];

/// Installs the recorder and serves `/metrics` at `addr` (on a task of its
/// own), once it listens; each scrape counts what `waiting` counts.
pub(super) async fn serve(addr: &str, waiting: Waiting) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} for --metrics: {e}"))?;
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("duration".into()), &BUCKETS)
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| format!("cannot record metrics: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    // Histograms are drained into their buckets now and then, as the
    // exporter asks of whoever renders.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(render))
        .with_state((handle, Arc::new(waiting)));
    eprintln!("idem gateway: metrics on http://{bound}/metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the metrics endpoint stopped");
        }
    });
    Ok(())
}

async fn render(
    axum::extract::State((handle, waiting)): axum::extract::State<(PrometheusHandle, Arc<Waiting>)>,
) -> impl axum::response::IntoResponse {
    waiting.refresh().await;
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
}

/// The store's operations that wait for a person (awaiting approval, or
/// an unknown outcome), counted into `idem.operations` when a scrape
/// comes, at most every [`COUNT_EVERY`] or ten times as long as the last
/// count took: a large namespace never keeps the store scanning.
pub(super) struct Waiting {
    store: Arc<dyn IdemStore>,
    namespace: String,
    /// When the last count started, and how long it took.
    last: tokio::sync::Mutex<Option<(Instant, Duration)>>,
}

impl Waiting {
    pub(super) fn new(store: Arc<dyn IdemStore>, namespace: Option<String>) -> Waiting {
        Waiting {
            store,
            namespace: namespace.unwrap_or_default(),
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// Counts again if the last count is old enough; a scan that fails
    /// leaves the last counts.
    async fn refresh(&self) {
        let mut last = self.last.lock().await;
        if let Some((at, took)) = *last
            && at.elapsed() < COUNT_EVERY.max(took * 10)
        {
            return;
        }
        let started = Instant::now();
        for (state, label) in [
            (RecordState::Awaiting, "awaiting_approval"),
            (RecordState::Unknown, "unknown"),
        ] {
            let filter = ScanFilter::namespace(self.namespace.clone()).state(state);
            match count(&*self.store, &filter).await {
                Ok(n) => gauge!(OPERATIONS, "idem.state" => label).set(n as f64),
                Err(e) => tracing::debug!(error = %e, "operations waiting not counted"),
            }
        }
        *last = Some((started, started.elapsed()));
    }
}

/// How many records `filter` admits.
async fn count(store: &dyn IdemStore, filter: &ScanFilter) -> Result<usize, idem::StoreError> {
    let (mut seen, mut cursor) = (0, String::new());
    loop {
        let page = store.scan(filter, &cursor, 500).await?;
        seen += page.records.len();
        match page.next {
            Some(next) => cursor = next,
            None => return Ok(seen),
        }
    }
}

/// A read of `tool` passed through; `listed` says whether the upstream
/// lists it (else it is counted as `other`).
pub(crate) fn read(tool: &str, listed: bool) {
    let tool = if listed { tool } else { "other" };
    let name = idem::metrics::names::CALLS;
    counter!(name, "gen_ai.tool.name" => tool.to_owned(), "idem.outcome" => "read").increment(1);
}

/// The upstream answered a `method` request sent `took` ago.
pub(crate) fn upstream_answered(method: &str, took: Duration) {
    let method = METHODS
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("other");
    histogram!(UPSTREAM_DURATION, "mcp.method.name" => method).record(took.as_secs_f64());
}

/// An upstream connection was made again after one went.
pub(crate) fn upstream_restarted() {
    counter!(UPSTREAM_RESTARTS).increment(1);
}

/// Counted in a gauge while it lives.
pub(crate) struct Open(&'static str);

impl Open {
    /// An MCP session.
    pub(crate) fn session() -> Open {
        Open::new(SESSIONS)
    }

    /// An upstream connection.
    pub(crate) fn upstream() -> Open {
        Open::new(UPSTREAMS)
    }

    fn new(name: &'static str) -> Open {
        gauge!(name).increment(1.0);
        Open(name)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        gauge!(self.0).decrement(1.0);
    }
}
