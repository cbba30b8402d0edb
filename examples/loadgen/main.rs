//! Load generator: C concurrent tasks call one write tool through
//! `registry.call`, N calls in all, and one line of JSON reports the run.
//!
//! ```text
//! cargo run --release --example loadgen -- \
//!     --store memory|sqlite|redis|redis-cluster|postgres|redis-floor|postgres-floor|sqlite-floor \
//!     [--url URL] --calls N --concurrency C --mode unique|duplicate|mixed [--threads T]
//! ```
//!
//! A store named `..-floor` is no idem at all, but the floor idem's calls
//! on that store are measured against: the same key and the same
//! statements through the same client library (`floor.rs`).
//!
//! `unique`: every call has distinct arguments; `duplicate`: all calls the
//! same; `mixed`: each call after the first repeats an earlier call's
//! arguments with probability 0.5. Duplicates arriving in flight are
//! rejected (`InFlight`) and counted. The run checks that no arguments ran
//! twice (`executions` equals the distinct arguments executed) and exits 1
//! otherwise. Progress goes to stderr. The JSON gives calls per second and
//! the 50th, 99th and 99.9th percentile latencies of a call in µs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod floor;
mod pipe;

use idem::prelude::*;
use idem::{IdemStore, PostgresOptions, PostgresStore, RedisStore, SqliteStore};
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Counts {
    /// Body runs per distinct argument set.
    runs: Vec<AtomicU8>,
    executions: AtomicUsize,
}

/// The tool under load: records that it ran.
#[write_tool(ttl = "10m")]
async fn work(n: u64, ctx: &WriteCtx<Counts>) -> Result<u64, String> {
    let counts = ctx.state();
    counts.executions.fetch_add(1, Ordering::Relaxed);
    if let Some(slot) = counts.runs.get(n as usize) {
        slot.fetch_add(1, Ordering::Relaxed);
    }
    Ok(n)
}

/// Drives a write tool on a store, and reports throughput and latency.
#[derive(clap::Parser, Clone)]
struct Config {
    /// The store: memory, sqlite, redis, redis-cluster or postgres; or
    /// redis-floor, postgres-floor or sqlite-floor, the same statements
    /// without idem (`floor.rs`).
    #[arg(long, default_value = "memory")]
    store: String,
    /// The store's URL (redis, postgres), the cluster nodes' URLs
    /// separated by commas (redis-cluster), or the file (sqlite).
    #[arg(long)]
    url: Option<String>,
    /// How many calls.
    #[arg(long, default_value_t = 10_000, value_parser = positive)]
    calls: usize,
    /// How many calls in flight at once.
    #[arg(long, default_value_t = 16, value_parser = positive)]
    concurrency: usize,
    /// unique (every call a new operation), duplicate (every call the same)
    /// or mixed (half repeat an earlier call).
    #[arg(long, default_value = "unique", value_parser = ["unique", "duplicate", "mixed"])]
    mode: String,
    /// Tokio worker threads.
    #[arg(long, default_value_t = std::thread::available_parallelism().map_or(2, |n| n.get()))]
    threads: usize,
}

/// A whole number above zero.
fn positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{text:?} is not a whole number above zero")),
    }
}

/// The argument of each call, fixed before the run (xorshift, seeded).
fn plan(mode: &str, calls: usize) -> Vec<u64> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut distinct = 0u64;
    (0..calls)
        .map(|i| match mode {
            "unique" => i as u64,
            "duplicate" => 0,
            _ if i == 0 || next() % 2 == 0 => {
                distinct += 1;
                distinct - 1
            }
            // Repeat an earlier call's arguments.
            _ => next() % distinct,
        })
        .collect()
}

/// The SQLite file: `--url`, or one of the run's own.
fn sqlite_file(config: &Config, run: &str) -> std::path::PathBuf {
    match &config.url {
        Some(p) => p.into(),
        None => std::env::temp_dir().join(format!("idem-loadgen-{run}.db")),
    }
}

async fn store(config: &Config, run: &str) -> Result<Arc<dyn IdemStore>, BoxError> {
    Ok(match config.store.as_str() {
        "memory" => Arc::new(MemoryStore::new()),
        "sqlite" => Arc::new(SqliteStore::open(sqlite_file(config, run)).await?),
        "redis" => Arc::new(
            RedisStore::connect(config.url.as_deref().unwrap_or("redis://127.0.0.1:6379")).await?,
        ),
        // The URLs of the cluster's nodes, comma-separated.
        "redis-cluster" => {
            let urls = config
                .url
                .as_deref()
                .ok_or("--store redis-cluster needs --url")?;
            Arc::new(RedisStore::connect_cluster(urls.split(',')).await?)
        }
        "postgres" => Arc::new(
            PostgresStore::connect_with(
                config
                    .url
                    .as_deref()
                    .unwrap_or("postgres://postgres@127.0.0.1:5432/test"),
                PostgresOptions::new()
                    .table("idem_loadgen")
                    .pool_size(config.concurrency.min(64) as u32),
            )
            .await?,
        ),
        other => return Err(format!("unknown store {other}").into()),
    })
}

/// How a call failed: its duplicate was running, or anything else.
enum Failed {
    InFlight,
    Other(String),
}

/// What each call goes through: idem, or a floor (`floor.rs`).
enum Caller {
    Idem(Registry<Counts>),
    Floor {
        floor: floor::Floor,
        namespace: String,
        counts: Counts,
    },
}

impl Caller {
    async fn new(config: &Config, run: &str, counts: Counts) -> Result<Caller, BoxError> {
        let namespace = format!("loadgen-{run}");
        let floor = config.store.split_once("-floor");
        if let Some((store, _)) = floor {
            // idem's store first: the table or file the floor writes in.
            if store != "redis" {
                let idem = Config {
                    store: store.to_owned(),
                    ..config.clone()
                };
                drop(self::store(&idem, run).await?);
            }
            let conns = config.concurrency.min(64);
            let file = sqlite_file(config, run);
            let floor = floor::Floor::connect(&config.store, config.url.as_deref(), conns, file)
                .await?
                .ok_or_else(|| format!("unknown store {}", config.store))?;
            return Ok(Caller::Floor {
                floor,
                namespace,
                counts,
            });
        }
        let registry = Registry::builder(counts)
            .store(store(config, run).await?)
            .namespace(namespace)
            .tool(work)
            .build()?;
        Ok(Caller::Idem(registry))
    }

    fn counts(&self) -> &Counts {
        match self {
            Caller::Idem(registry) => registry.state(),
            Caller::Floor { counts, .. } => counts,
        }
    }

    async fn call(&self, n: u64) -> Result<(), Failed> {
        let args = json!({ "n": n });
        match self {
            Caller::Idem(registry) => match registry.call("load", "work", args).await {
                Ok(_) => Ok(()),
                Err(ToolError::InFlight { .. }) => Err(Failed::InFlight),
                Err(e) => Err(Failed::Other(e.to_string())),
            },
            Caller::Floor {
                floor,
                namespace,
                counts,
            } => {
                let key = idem::IdemKey::derive(idem::Scope::Run("load"), "work", 1, &args)
                    .with_namespace(namespace);
                if floor.call(key.as_str(), n).await.map_err(Failed::Other)? {
                    counts.executions.fetch_add(1, Ordering::Relaxed);
                    if let Some(slot) = counts.runs.get(n as usize) {
                        slot.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(())
            }
        }
    }
}

fn main() -> Result<(), BoxError> {
    let config = <Config as clap::Parser>::parse();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads.max(1))
        .enable_all()
        .build()?
        .block_on(run(config))
}

async fn run(config: Config) -> Result<(), BoxError> {
    let run_id = format!("{:x}", idem::store::LeaseToken::generate(0).id() as u64);
    let plan = Arc::new(plan(&config.mode, config.calls));
    let distinct = plan.iter().max().map_or(0, |m| m + 1) as usize;
    let counts = Counts {
        runs: (0..distinct).map(|_| AtomicU8::new(0)).collect(),
        executions: AtomicUsize::new(0),
    };
    let caller = Arc::new(Caller::new(&config, &run_id, counts).await?);

    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let inflight = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let progress = {
        let (done, total) = (done.clone(), config.calls as u64);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                eprintln!("{} / {total} calls", done.load(Ordering::Relaxed));
            }
        })
    };
    let tasks: Vec<_> = (0..config.concurrency)
        .map(|_| {
            let (caller, plan, next) = (caller.clone(), plan.clone(), next.clone());
            let (done, inflight, failures) = (done.clone(), inflight.clone(), failures.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&n) = plan.get(i) else { break };
                    let t = Instant::now();
                    match caller.call(n).await {
                        Ok(_) => {}
                        Err(Failed::InFlight) => {
                            inflight.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Failed::Other(e)) => {
                            if failures.fetch_add(1, Ordering::Relaxed) < 5 {
                                eprintln!("call failed: {e}");
                            }
                        }
                    }
                    latencies.push(t.elapsed().as_micros() as u64);
                    done.fetch_add(1, Ordering::Relaxed);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(config.calls);
    for t in tasks {
        latencies.extend(t.await?);
    }
    let wall = started.elapsed().as_secs_f64();
    progress.abort();
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize];

    let counts = caller.counts();
    let executions = counts.executions.load(Ordering::Relaxed);
    let ran: usize = counts
        .runs
        .iter()
        .filter(|r| r.load(Ordering::Relaxed) > 0)
        .count();
    let twice = counts
        .runs
        .iter()
        .filter(|r| r.load(Ordering::Relaxed) > 1)
        .count();
    println!(
        "{}",
        json!({
            "impl": if config.store.contains("-floor") { "floor" } else { "idem" },
            "store": config.store,
            "mode": config.mode,
            "calls": config.calls,
            "concurrency": config.concurrency,
            "wall_s": (wall * 1000.0).round() / 1000.0,
            "ops_per_s": (config.calls as f64 / wall).round() as u64,
            "p50_us": pct(0.50),
            "p99_us": pct(0.99),
            "p999_us": pct(0.999),
            "executions": executions,
            "inflight_errors": inflight.load(Ordering::Relaxed),
        })
    );
    let failed = failures.load(Ordering::Relaxed);
    if executions != ran || twice > 0 || failed > 0 {
        eprintln!(
            "CHECK FAILED: {executions} executions for {ran} distinct arguments executed ({twice} ran more than once), {failed} failed calls"
        );
        std::process::exit(1);
    }
    Ok(())
}
