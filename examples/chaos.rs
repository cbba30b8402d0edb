//! A chaos run: worker processes call a write tool through a TCP proxy in
//! front of the store while faults are injected at random, and a
//! downstream ledger records every run of the tool's body. At the end it
//! checks what idem promises and prints a table and one JSON line.
//!
//! ```text
//! cargo run --release --example chaos -- --store redis|postgres|sqlite [--seconds 30] [--workers 4] [--verify]
//! ```
//!
//! `REDIS_SERVER=/path/to/valkey-server` runs the Redis store's run on
//! another server program than `redis-server` (one with `SET .. IFEQ`,
//! where a settle needs no script).
//!
//! - **Operations.** Work comes in rounds of eight operations; every worker
//!   calls every operation of a round (duplicates from several places at
//!   once), retrying each call until it answers. A worker restarted after a
//!   SIGKILL starts again from the first round, as an agent resumed from an
//!   old checkpoint would.
//! - **Faults** (one at a time, every half to one and a half seconds):
//!   `cut` every connection through the proxy; `stall` it for longer than
//!   the one-second lease; `black_hole` it (a partition: the connections
//!   open during it do not survive); `freeze` the connections open through
//!   it, silently and for good, while new ones go through (half-open TCP,
//!   as a failover behind a virtual IP leaves); `restart` the server (Redis, private,
//!   AOF `appendfsync always`) or terminate the store's backends
//!   (PostgreSQL); `sigstop` a worker past its lease; `sigkill` a worker
//!   and start it again. SQLite has no network: only the worker faults,
//!   and a worker paused inside a write transaction keeps the database
//!   locked, so a `sigstop` there is the store away for every worker.
//! - **Verdict.** Operations never completed, operations whose callers got
//!   different results, and body runs beyond the first that no injected
//!   fault explains (a lease can lapse only while a fault lasts: the
//!   network or server was away, or the worker that ran the body before
//!   was paused or killed) must all be 0; the run exits non-zero
//!   otherwise. No two runs of an operation may share an attempt (two
//!   claims would have held one lease). Runs are compared in claim order:
//!   a worker frozen between its claim and its side effect writes its line
//!   after the next attempt's, once it wakes.
//!
//! - **`--verify`**: the tool verifies an uncertain operation
//!   (`verify = path`) against the downstream itself, which keeps, per
//!   operation, its effect (and the result it answered) and the fencing
//!   token of the latest attempt that asked: `verify` answers the recorded
//!   result, or fences the operation for its attempt and answers "not done";
//!   the body's effect is refused once a later attempt has fenced or made
//!   it (a worker frozen before its side effect and woken after a takeover).
//!   Then no operation may have a second effect at all, fault or not.
//!
//! `IDEM_CHAOS_LOG=DIR` keeps each worker's log (idem's `tracing`
//! events at `info`, or as `RUST_LOG` says) in `DIR/worker-N.log`, appended
//! to across its restarts: what a worker was doing when a run fails.
//!
//! RELIABILITY.md has the figures per store.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use idem::prelude::*;
use idem::testing::Proxy;
use serde_json::{Value, json};

/// The tool's lease: faults that outlast it make leases lapse.
const LEASE: Duration = Duration::from_secs(1);
/// Operations per round.
const ROUND: u64 = 8;
/// How long workers may take to finish their last round after the faults.
const DRAIN: Duration = Duration::from_secs(120);
/// The environment variable naming where workers' logs are kept.
const LOG_DIR: &str = "IDEM_CHAOS_LOG";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    Redis,
    Postgres,
    Sqlite,
}

/// A chaos run against one store.
#[derive(Debug, Parser)]
#[command(
    about = "Worker processes call a write tool while faults are injected; checks that nothing runs twice unexplained, nothing is lost, and every caller agrees"
)]
struct Cli {
    /// The store under test.
    #[arg(long, value_enum)]
    store: StoreKind,
    /// How long faults are injected.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// How many worker processes.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Seed of the fault schedule (random by default; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// The tool verifies an uncertain operation against the downstream:
    /// every second effect is then a violation, whatever the faults.
    #[arg(long)]
    verify: bool,
    /// Redis only: run the server without AOF, so that a restart forgets
    /// every claim and result. A broken setup, to see that the run reports
    /// what it costs (operations run again at the same attempt).
    #[arg(long)]
    no_persistence: bool,
    /// Internal: run as this worker.
    #[arg(long, hide = true)]
    worker: Option<usize>,
    /// Internal: the store a worker connects to (URL or SQLite path).
    #[arg(long, hide = true)]
    url: Option<String>,
    /// Internal: the PostgreSQL schema a worker uses.
    #[arg(long, hide = true)]
    schema: Option<String>,
    /// Internal: the ledger file.
    #[arg(long, hide = true)]
    ledger: Option<PathBuf>,
    /// Internal: a worker stops starting rounds once this file exists.
    #[arg(long, hide = true)]
    stop_file: Option<PathBuf>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match cli.worker {
        Some(id) => {
            if std::env::var_os(LOG_DIR).is_some() {
                let filter = tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "idem=info".into());
                tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .init();
            }
            runtime.block_on(worker::run(id, &cli))
        }
        None => runtime.block_on(orchestrate(&cli)),
    }
}

/// Milliseconds since the Unix epoch: one clock for every process.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------
// The worker: a registry over the store, the tool, the call loop.

mod worker {
    use super::*;
    use std::fs::File;

    /// What the body sees: the ledger it appends each run to, and with
    /// `--verify` the directory of the downstream's per-operation records.
    pub(super) struct Downstream {
        ledger: Mutex<File>,
        worker: usize,
        ops: Option<PathBuf>,
    }

    /// The body of both tools: the effect, written to the ledger (through
    /// the fencing downstream with `--verify`), then a pause.
    async fn effect(op: u64, ctx: &WriteCtx<Downstream>) -> Result<Value, String> {
        let result = json!({ "op": op, "attempt": ctx.attempt(), "ran_on": ctx.state().worker });
        let line = format!(
            "{op} {} {} {} {}\n",
            ctx.idem_key(),
            ctx.attempt(),
            ctx.state().worker,
            now_ms()
        );
        match &ctx.state().ops {
            Some(dir) => fenced::effect(dir, op, ctx.attempt(), &result, || {
                ctx.state().append(&line)
            })?,
            None => ctx.state().append(&line)?,
        }
        let pause = 10 + fastrand::u64(..40);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        Ok(result)
    }

    impl Downstream {
        /// One write(2) on an O_APPEND file: whole lines, even across
        /// processes killed mid-run.
        fn append(&self, line: &str) -> Result<(), String> {
            if let Ok(mut ledger) = self.ledger.lock() {
                ledger
                    .write_all(line.as_bytes())
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        }
    }

    /// Charge an order, asking the downstream first after an uncertain
    /// outcome.
    #[write_tool(name = "charge", lease = "1s", verify = charged)]
    async fn charge_verified(op: u64, ctx: &WriteCtx<Downstream>) -> Result<Value, String> {
        effect(op, ctx).await
    }

    /// What the downstream says of operation `op`.
    async fn charged(op: u64, ctx: &WriteCtx<Downstream>) -> Result<Verified<Value>, String> {
        let dir = ctx.state().ops.as_ref().ok_or("no downstream records")?;
        fenced::verify(dir, op, ctx.attempt())
    }

    /// Charge an order: the side effect whose every run the ledger records.
    #[write_tool(lease = "1s")]
    async fn charge(op: u64, ctx: &WriteCtx<Downstream>) -> Result<Value, String> {
        effect(op, ctx).await
    }

    /// The store, connected to as a restarted agent would: again and
    /// again while a fault keeps it out of reach (a worker restarted after
    /// a SIGKILL may start in the middle of the next fault), for up to
    /// [`DRAIN`]. A worker that gave up at once left the rounds it had
    /// called unanswered.
    async fn store_reached(cli: &Cli) -> Result<Arc<dyn idem::IdemStore>, BoxError> {
        let deadline = Instant::now() + DRAIN;
        loop {
            match store(cli).await {
                Ok(store) => return Ok(store),
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn store(cli: &Cli) -> Result<Arc<dyn idem::IdemStore>, BoxError> {
        let url = cli.url.as_deref().ok_or("--url")?;
        Ok(match cli.store {
            StoreKind::Redis => Arc::new(idem::RedisStore::connect(url).await?),
            StoreKind::Postgres => {
                let schema = cli.schema.as_deref().ok_or("--schema")?;
                let options = idem::PostgresOptions::new()
                    .schema(schema)
                    .purge_interval(None);
                Arc::new(idem::PostgresStore::connect_with(url, options).await?)
            }
            StoreKind::Sqlite => Arc::new(idem::SqliteStore::open(url).await?),
        })
    }

    /// Calls every operation of round after round until the stop file
    /// appears, then finishes the round it is in. Prints one JSON line per
    /// answered operation.
    ///
    /// A worker restarted after a SIGKILL starts again from the first
    /// round, as an agent resumed from an old checkpoint would, and goes on
    /// at least to the round it was killed in (its checkpoint file), stop or
    /// not: so every operation a killed worker called is called again, and
    /// one that no caller ever sees answered is a real loss, not a call
    /// nobody made again.
    pub(super) async fn run(id: usize, cli: &Cli) -> Result<(), BoxError> {
        let ledger_path = cli.ledger.as_ref().ok_or("--ledger")?;
        let checkpoint = ledger_path.with_file_name(format!("worker-{id}.round"));
        let ledger = OpenOptions::new()
            .append(true)
            .create(true)
            .open(ledger_path)?;
        let stop = cli.stop_file.clone().ok_or("--stop-file")?;
        let ops = cli.verify.then(|| ledger_path.with_file_name("ops"));
        let builder = Registry::builder(Downstream {
            ledger: Mutex::new(ledger),
            worker: id,
            ops,
        })
        .store(store_reached(cli).await?)
        .namespace("chaos");
        let registry = match cli.verify {
            true => builder.tool(charge_verified).build()?,
            false => builder.tool(charge).build()?,
        };
        // The round a killed predecessor had reached, if there was one.
        let reached: Option<u64> = std::fs::read_to_string(&checkpoint)
            .ok()
            .and_then(|text| text.trim().parse().ok());
        let mut round: u64 = 0;
        while reached.is_some_and(|r| round <= r) || !stop.exists() {
            if reached.is_none_or(|r| round > r) {
                std::fs::write(&checkpoint, round.to_string())?;
            }
            let mut ops: Vec<u64> = (round * ROUND..(round + 1) * ROUND).collect();
            fastrand::shuffle(&mut ops);
            let calls = ops.into_iter().map(|op| {
                let registry = registry.clone();
                tokio::spawn(async move { call_until_answered(&registry, op).await })
            });
            for call in calls.collect::<Vec<_>>() {
                let line = call.await?;
                let mut out = std::io::stdout().lock();
                writeln!(out, "{line}")?;
                out.flush()?;
            }
            round += 1;
        }
        Ok(())
    }

    /// One operation, retried until it answers: its report line.
    async fn call_until_answered(registry: &Registry<Downstream>, op: u64) -> Value {
        let started = Instant::now();
        let deadline = started + DRAIN;
        let mut calls = 0;
        loop {
            calls += 1;
            let outcome = registry
                .call("chaos-run", "charge", json!({ "op": op }))
                .await;
            let answer = match outcome {
                Ok(result) => json!({ "result": result }),
                Err(e) if e.is_retryable() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20 + fastrand::u64(..100))).await;
                    continue;
                }
                Err(e) if e.is_retryable() => json!({ "unanswered": e.to_string() }),
                Err(e) => json!({ "error": e.to_string() }),
            };
            let mut line = json!({
                "op": op,
                "calls": calls,
                "ms": started.elapsed().as_secs_f64() * 1000.0,
            });
            if let (Value::Object(line), Value::Object(answer)) = (&mut line, answer) {
                line.extend(answer);
            }
            return line;
        }
    }
}

// ---------------------------------------------------------------------------
// The downstream of `--verify`: one file per operation, read and written
// under an exclusive lock, holding its effect and the attempts that fenced
// it, as a payment provider keyed on the operation keeps them.

mod fenced {
    use std::fs::{File, OpenOptions};
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::path::Path;

    use idem::Verified;
    use serde_json::Value;

    /// The operation's file, locked; its lines: `effect <attempt> <result>`,
    /// `fence <attempt>` (verified not done) and `verified <attempt>`
    /// (verified done).
    fn open(dir: &Path, op: u64) -> Result<(File, String), String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(dir.join(op.to_string()))
            .map_err(|e| e.to_string())?;
        file.lock().map_err(|e| e.to_string())?;
        let mut text = String::new();
        file.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
        file.read_to_string(&mut text).map_err(|e| e.to_string())?;
        Ok((file, text))
    }

    /// The highest attempt that fenced or made the effect.
    fn owner(text: &str) -> Option<u32> {
        text.lines()
            .filter_map(|l| l.split(' ').nth(1).and_then(|a| a.parse().ok()))
            .max()
    }

    /// How many times `verify` answered done, and not done, over every
    /// operation in `dir`.
    pub(super) fn answers(dir: &Path) -> (usize, usize) {
        let lines: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .flat_map(|t| t.lines().map(str::to_owned).collect::<Vec<_>>())
            .collect();
        let count = |tag: &str| lines.iter().filter(|l| l.starts_with(tag)).count();
        (count("verified "), count("fence "))
    }

    /// Makes the effect for `attempt` with `result`, unless a later attempt
    /// fenced the operation or an effect exists: `write` makes it.
    pub(super) fn effect(
        dir: &Path,
        op: u64,
        attempt: u32,
        result: &Value,
        write: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        let (mut file, text) = open(dir, op)?;
        if text.lines().any(|l| l.starts_with("effect "))
            || owner(&text).is_some_and(|o| o > attempt)
        {
            return Err(format!("fenced: a later attempt owns operation {op}"));
        }
        write()?;
        writeln!(file, "effect {attempt} {result}").map_err(|e| e.to_string())
    }

    /// The recorded effect's result (noting `verified <attempt>`), or, for
    /// none, a fence for `attempt` and "not done".
    pub(super) fn verify(dir: &Path, op: u64, attempt: u32) -> Result<Verified<Value>, String> {
        let (mut file, text) = open(dir, op)?;
        if let Some(line) = text.lines().find(|l| l.starts_with("effect ")) {
            let result = line.splitn(3, ' ').nth(2).unwrap_or("null");
            writeln!(file, "verified {attempt}").map_err(|e| e.to_string())?;
            return serde_json::from_str(result)
                .map(Verified::Done)
                .map_err(|e| e.to_string());
        }
        writeln!(file, "fence {attempt}").map_err(|e| e.to_string())?;
        Ok(Verified::NotDone)
    }
}

// ---------------------------------------------------------------------------
// The orchestrator: the server, the proxy, the workers, the faults.

/// An injected fault and when it lasted.
#[derive(Debug, Clone)]
struct FaultEvent {
    kind: &'static str,
    start: u64,
    end: u64,
    /// The worker it hit, for `sigstop` and `sigkill`.
    worker: Option<usize>,
}

/// The server the workers' store talks to.
enum Server {
    Redis {
        child: Child,
        port: u16,
        dir: PathBuf,
        /// AOF on (`appendfsync always`): restarts keep every record.
        aof: bool,
    },
    Postgres {
        url: String,
        schema: String,
        app: String,
    },
    Sqlite {
        path: PathBuf,
    },
}

impl Server {
    fn start(cli: &Cli, dir: &Path) -> Result<Server, BoxError> {
        Ok(match cli.store {
            StoreKind::Redis => {
                let port = std::net::TcpListener::bind("127.0.0.1:0")?
                    .local_addr()?
                    .port();
                let aof = !cli.no_persistence;
                let child = spawn_redis(port, dir, aof)?;
                Server::Redis {
                    child,
                    port,
                    dir: dir.to_owned(),
                    aof,
                }
            }
            StoreKind::Postgres => {
                let url = std::env::var("IDEM_POSTGRES_URL")
                    .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
                let tag = format!("{:x}", idem::store::LeaseToken::generate(0).id() as u64);
                Server::Postgres {
                    url,
                    schema: format!("idem_chaos_{tag}"),
                    app: format!("idem_chaos_{tag}"),
                }
            }
            StoreKind::Sqlite => Server::Sqlite {
                path: dir.join("chaos.db"),
            },
        })
    }

    /// Where a proxy would connect; `None` for SQLite.
    fn addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            Server::Redis { port, .. } => Some(([127, 0, 0, 1], *port).into()),
            Server::Postgres { url, .. } => {
                use std::net::ToSocketAddrs;
                let authority = url.split_once("://")?.1.split('/').next()?;
                authority.rsplit('@').next()?.to_socket_addrs().ok()?.next()
            }
            Server::Sqlite { .. } => None,
        }
    }

    /// The store URL the workers use: through `proxy` where there is one.
    fn worker_url(&self, proxy: Option<&Proxy>) -> String {
        let via = |url: &str| match proxy {
            Some(p) => {
                let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
                let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                let user = authority
                    .rsplit_once('@')
                    .map(|(u, _)| format!("{u}@"))
                    .unwrap_or_default();
                format!("{scheme}://{user}{}{path}", p.addr())
            }
            None => url.to_owned(),
        };
        match self {
            Server::Redis { port, .. } => via(&format!("redis://127.0.0.1:{port}")),
            Server::Postgres { url, app, .. } => format!("{}?application_name={app}", via(url)),
            Server::Sqlite { path } => path.display().to_string(),
        }
    }

    /// Prepares the store (the PostgreSQL table) before the workers start.
    async fn prepare(&self) -> Result<(), BoxError> {
        if let Server::Postgres { url, schema, .. } = self {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
            tokio::spawn(connection);
            client
                .batch_execute(&format!("CREATE SCHEMA {schema}"))
                .await?;
            idem::PostgresStore::connect_with(url, idem::PostgresOptions::new().schema(schema))
                .await?;
        }
        Ok(())
    }

    /// A server restart (Redis, AOF on) or the store's backends terminated
    /// (PostgreSQL). `None` if the store has no server.
    async fn restart(&mut self) -> Result<Option<&'static str>, BoxError> {
        match self {
            Server::Redis {
                child,
                port,
                dir,
                aof,
            } => {
                let _ = child.kill();
                let _ = child.wait();
                *child = spawn_redis(*port, dir, *aof)?;
                Ok(Some("restart"))
            }
            Server::Postgres { url, app, .. } => {
                let (client, connection) =
                    tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
                tokio::spawn(connection);
                client
                    .execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                        &[&app.as_str()],
                    )
                    .await?;
                Ok(Some("terminate"))
            }
            Server::Sqlite { .. } => Ok(None),
        }
    }

    async fn stop(&mut self) {
        match self {
            Server::Redis { child, .. } => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Server::Postgres { url, schema, app } => {
                if let Ok((client, connection)) =
                    tokio_postgres::connect(url, tokio_postgres::NoTls).await
                {
                    tokio::spawn(connection);
                    // The backends of connections the proxy black-holed or
                    // froze outlive their workers until TCP keepalive ends
                    // them (hours): a run that leaves them takes the next
                    // one's connection slots ("too many clients").
                    let _ = client
                        .execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                            &[&app.as_str()],
                        )
                        .await;
                    let _ = client
                        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                        .await;
                }
            }
            Server::Sqlite { .. } => {}
        }
    }
}

fn spawn_redis(port: u16, dir: &Path, aof: bool) -> Result<Child, BoxError> {
    let persistence: &[&str] = if aof {
        &["--appendonly", "yes", "--appendfsync", "always"]
    } else {
        &["--appendonly", "no"]
    };
    let program = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
    let child = Command::new(&program)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(persistence)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {program} (apt-get install redis-server): {e}"))?;
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(child);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err(format!("{program} did not come up").into())
}

/// The worker processes and what they print.
struct Workers {
    children: Vec<Child>,
    args: Vec<String>,
    reports: Arc<Mutex<Vec<Value>>>,
}

impl Workers {
    fn spawn(&mut self, id: usize) -> Result<(), BoxError> {
        let log = match std::env::var_os(LOG_DIR) {
            Some(dir) => {
                let path = Path::new(&dir).join(format!("worker-{id}.log"));
                let file = OpenOptions::new().append(true).create(true).open(path)?;
                Stdio::from(file)
            }
            None => Stdio::null(),
        };
        let mut child = Command::new(std::env::current_exe()?)
            .args(&self.args)
            .args(["--worker", &id.to_string()])
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("worker stdout")?;
        let reports = self.reports.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let (Ok(v), Ok(mut r)) = (serde_json::from_str(&line), reports.lock()) {
                    r.push(v);
                }
            }
        });
        if id < self.children.len() {
            self.children[id] = child;
        } else {
            self.children.push(child);
        }
        Ok(())
    }

    fn signal(&self, id: usize, signal: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.children[id].id().to_string())
            .status();
    }

    /// Waits for every worker to exit, killing those still running after
    /// `limit`.
    fn wait(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        for child in &mut self.children {
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
    }
}

/// Injects one fault at random; returns what it was.
async fn inject(
    server: &mut Server,
    proxy: Option<&Proxy>,
    workers: &mut Workers,
) -> Result<Option<FaultEvent>, BoxError> {
    let start = now_ms();
    let lapse = LEASE + LEASE / 2;
    let network = ["cut", "stall", "black_hole", "freeze", "restart"];
    let kinds: Vec<&str> = match proxy {
        Some(_) => network
            .iter()
            .chain(&["sigstop", "sigkill"])
            .copied()
            .collect(),
        None => vec!["sigstop", "sigkill"],
    };
    let kind = kinds[fastrand::usize(..kinds.len())];
    let mut worker = None;
    let kind: &'static str = match (kind, proxy) {
        ("cut", Some(p)) => {
            p.cut();
            "cut"
        }
        ("stall", Some(p)) => {
            p.stall();
            tokio::time::sleep(lapse).await;
            p.forward();
            "stall"
        }
        ("black_hole", Some(p)) => {
            p.black_hole();
            tokio::time::sleep(lapse).await;
            p.forward();
            "black_hole"
        }
        ("freeze", Some(p)) => {
            // Counted as lasting while the workers' operations time out
            // on the frozen connections and retire them.
            p.freeze();
            tokio::time::sleep(lapse).await;
            "freeze"
        }
        ("restart", _) => match server.restart().await? {
            Some(kind) => kind,
            None => return Ok(None),
        },
        ("sigstop", _) => {
            let id = fastrand::usize(..workers.children.len());
            workers.signal(id, "STOP");
            tokio::time::sleep(lapse).await;
            workers.signal(id, "CONT");
            worker = Some(id);
            "sigstop"
        }
        _ => {
            let id = fastrand::usize(..workers.children.len());
            workers.signal(id, "KILL");
            let _ = workers.children[id].wait();
            workers.spawn(id)?;
            worker = Some(id);
            "sigkill"
        }
    };
    Ok(Some(FaultEvent {
        kind,
        start,
        end: now_ms(),
        worker,
    }))
}

async fn orchestrate(cli: &Cli) -> Result<(), BoxError> {
    let seed = cli.seed.unwrap_or_else(|| fastrand::u64(..));
    fastrand::seed(seed);
    let dir = std::env::temp_dir().join(format!("idem-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut server = Server::start(cli, &dir)?;
    server.prepare().await?;
    let proxy = match server.addr() {
        Some(addr) => Some(Proxy::start(addr).await?),
        None => None,
    };
    let (ledger, stop_file) = (dir.join("ledger"), dir.join("stop"));
    let mut args = vec![
        "--store".to_owned(),
        format!("{:?}", cli.store).to_lowercase(),
        "--url".to_owned(),
        server.worker_url(proxy.as_ref()),
        "--ledger".to_owned(),
        ledger.display().to_string(),
        "--stop-file".to_owned(),
        stop_file.display().to_string(),
    ];
    if cli.verify {
        args.push("--verify".to_owned());
    }
    if let Server::Postgres { schema, .. } = &server {
        args.extend(["--schema".to_owned(), schema.clone()]);
    }
    let mut workers = Workers {
        children: Vec::new(),
        args,
        reports: Arc::default(),
    };
    for id in 0..cli.workers {
        workers.spawn(id)?;
    }
    let mut faults = Vec::new();
    let until = Instant::now() + Duration::from_secs(cli.seconds);
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500 + fastrand::u64(..1000))).await;
        // A fault that cannot be injected (the server, saturated by the
        // faults before, refuses the connection that would terminate its
        // backends) is said and skipped: the run goes on, and its workers
        // are stopped at its end whatever happens.
        match inject(&mut server, proxy.as_ref(), &mut workers).await {
            Ok(Some(fault)) => faults.push(fault),
            Ok(None) => {}
            Err(e) => eprintln!("chaos: a fault could not be injected: {e}"),
        }
    }
    std::fs::write(&stop_file, b"stop")?;
    workers.wait(DRAIN + Duration::from_secs(30));
    let reports = workers
        .reports
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    let ledger = std::fs::read_to_string(&ledger)?;
    let mut verdict = analyse(cli, &ledger, &reports, &faults);
    verdict.verified = fenced::answers(&dir.join("ops"));
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    verdict.print(cli, seed);
    if verdict.violations() > 0 {
        return Err(format!("{} violation(s)", verdict.violations()).into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The verdict: what the ledger and the callers' answers show.

/// One run of the body, from the ledger.
#[derive(Debug, Clone)]
struct Run {
    attempt: u32,
    worker: usize,
    at: u64,
}

#[derive(Debug, Default)]
struct Verdict {
    operations: usize,
    calls: u64,
    faults: BTreeMap<&'static str, usize>,
    never_completed: usize,
    different_results: usize,
    extra_runs: usize,
    extra_runs_explained: usize,
    unexplained: Vec<String>,
    disagreements: Vec<String>,
    latencies: Vec<f64>,
    /// With `--verify`: how many times `verify` answered done, not done.
    verified: (usize, usize),
}

impl Verdict {
    fn violations(&self) -> usize {
        self.never_completed + self.different_results + self.unexplained.len()
    }

    fn percentile(&self, p: f64) -> f64 {
        let mut l = self.latencies.clone();
        l.sort_by(f64::total_cmp);
        match l.len() {
            0 => 0.0,
            n => l[((n as f64 - 1.0) * p).round() as usize],
        }
    }

    fn print(&self, cli: &Cli, seed: u64) {
        let store = format!("{:?}", cli.store).to_lowercase();
        let policy = if cli.verify { "verify" } else { "rerun" };
        println!(
            "chaos run: {store}, {} s, {} workers, on_uncertain {policy}, seed {seed}",
            cli.seconds, cli.workers
        );
        println!("  operations                     {:>8}", self.operations);
        println!("  calls                          {:>8}", self.calls);
        for (kind, n) in &self.faults {
            println!("  faults: {kind:<22} {n:>8}");
        }
        println!(
            "  never completed                {:>8}   (must be 0)",
            self.never_completed
        );
        println!(
            "  callers given different results {:>7}   (must be 0)",
            self.different_results
        );
        let must = if cli.verify {
            "   (must be 0 with --verify)"
        } else {
            ""
        };
        println!(
            "  body runs beyond the first     {:>8}{must}",
            self.extra_runs
        );
        println!(
            "    explained by a lapsing fault {:>8}",
            self.extra_runs_explained
        );
        println!(
            "    unexplained                  {:>8}   (must be 0)",
            self.unexplained.len()
        );
        if cli.verify {
            println!(
                "  verified done / not done       {:>8} / {}",
                self.verified.0, self.verified.1
            );
        }
        println!(
            "  latency p50 / p99              {:>8.1} / {:.1} ms",
            self.percentile(0.5),
            self.percentile(0.99)
        );
        for why in self.unexplained.iter().chain(&self.disagreements) {
            println!("  VIOLATION: {why}");
        }
        let line = json!({
            "store": store, "seconds": cli.seconds, "workers": cli.workers, "seed": seed,
            "on_uncertain": policy,
            "operations": self.operations, "calls": self.calls, "faults": self.faults,
            "never_completed": self.never_completed, "different_results": self.different_results,
            "extra_runs": self.extra_runs, "extra_runs_explained": self.extra_runs_explained,
            "verified_done": self.verified.0, "verified_not_done": self.verified.1,
            "violations": self.violations(),
            "p50_ms": self.percentile(0.5), "p99_ms": self.percentile(0.99),
        });
        println!("{line}");
    }
}

fn analyse(cli: &Cli, ledger: &str, reports: &[Value], faults: &[FaultEvent]) -> Verdict {
    let mut v = Verdict::default();
    for f in faults {
        *v.faults.entry(f.kind).or_default() += 1;
    }
    let mut answered: HashMap<u64, HashSet<String>> = HashMap::new();
    let mut seen: HashSet<u64> = HashSet::new();
    for r in reports {
        let Some(op) = r["op"].as_u64() else { continue };
        seen.insert(op);
        v.calls += r["calls"].as_u64().unwrap_or(0);
        let answer = answered.entry(op).or_default();
        if !r["result"].is_null() {
            answer.insert(r["result"].to_string());
            v.latencies.push(r["ms"].as_f64().unwrap_or(0.0));
        } else if !r["error"].is_null() {
            answer.insert(format!("error: {}", r["error"]));
        }
    }
    let mut runs: HashMap<u64, Vec<Run>> = HashMap::new();
    for line in ledger.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if let [op, _key, attempt, worker, at] = f[..]
            && let (Ok(op), Ok(attempt), Ok(worker), Ok(at)) =
                (op.parse(), attempt.parse(), worker.parse(), at.parse())
        {
            seen.insert(op);
            runs.entry(op).or_default().push(Run {
                attempt,
                worker,
                at,
            });
        }
    }
    v.operations = seen.len();
    let mut never: Vec<u64> = seen
        .iter()
        .copied()
        .filter(|op| answered.get(op).is_none_or(HashSet::is_empty))
        .collect();
    never.sort_unstable();
    v.never_completed = never.len();
    // Say what the callers of an unanswered operation got, if any called.
    for op in never.iter().take(3) {
        let told: Vec<String> = reports
            .iter()
            .filter(|r| r["op"].as_u64() == Some(*op))
            .map(|r| format!("{} after {} calls", r["unanswered"], r["calls"]))
            .collect();
        let ran = runs.get(op).map_or(0, Vec::len);
        v.disagreements.push(format!(
            "op {op}: never answered; its body ran {ran} time(s); callers: {}",
            if told.is_empty() {
                "none reported".to_owned()
            } else {
                told.join(", ")
            }
        ));
    }
    for (op, answers) in &answered {
        if answers.len() > 1 {
            v.different_results += 1;
            let answers: Vec<&str> = answers.iter().map(|a| &a[..a.len().min(160)]).collect();
            v.disagreements
                .push(format!("op {op}: callers got {answers:?}"));
        }
    }
    for (op, mut runs) in runs {
        // In claim order. A body's ledger line can come after a later
        // attempt's: a worker frozen between its claim and its side effect
        // runs on once it wakes, its lease long lost (what fencing tokens
        // are for downstream).
        runs.sort_by_key(|r| (r.attempt, r.at));
        for pair in runs.windows(2) {
            let (earlier, later) = (&pair[0], &pair[1]);
            v.extra_runs += 1;
            if later.attempt == earlier.attempt {
                v.unexplained.push(format!(
                    "op {op}: two runs with attempt {}: two claims held one lease",
                    later.attempt
                ));
            } else if cli.verify {
                v.unexplained.push(format!(
                    "op {op}: a second effect (attempt {} after attempt {}) although the tool verifies",
                    later.attempt, earlier.attempt
                ));
            } else if lapsed(cli.store, faults, earlier, later) {
                v.extra_runs_explained += 1;
            } else {
                v.unexplained.push(format!(
                    "op {op}: attempt {} on worker {} at {} and attempt {} at {} with no lapsing fault between (faults then: {})",
                    earlier.attempt, earlier.worker, earlier.at, later.attempt, later.at,
                    faults_near(faults, earlier, later)
                ));
            }
        }
    }
    v
}

/// The faults that lasted between two runs, whichever they hit: what an
/// unexplained extra run is reported with.
fn faults_near(faults: &[FaultEvent], earlier: &Run, later: &Run) -> String {
    let (from, to) = (earlier.at.min(later.at), earlier.at.max(later.at));
    let slack = LEASE.as_millis() as u64;
    let near: Vec<String> = faults
        .iter()
        .filter(|f| f.start <= to && f.end + slack >= from)
        .map(|f| match f.worker {
            Some(w) => format!("{} of worker {w} {}..{}", f.kind, f.start, f.end),
            None => format!("{} {}..{}", f.kind, f.start, f.end),
        })
        .collect();
    if near.is_empty() {
        "none".to_owned()
    } else {
        near.join(", ")
    }
}

/// Whether a fault that can make a lease lapse lasted between two runs: the
/// network or the server away (not a mere cut, after which the client
/// reconnects at once), or the worker of the earlier run paused or killed.
///
/// On SQLite a paused worker of any id counts: stopped inside a write
/// transaction, it keeps the database's write lock, and every other worker
/// waits for it, unable to settle or extend its lease, until it resumes.
/// (A killed one's lock goes with it.)
fn lapsed(store: StoreKind, faults: &[FaultEvent], earlier: &Run, later: &Run) -> bool {
    let (from, to) = (earlier.at.min(later.at), earlier.at.max(later.at));
    let slack = LEASE.as_millis() as u64;
    let holds_the_store = |f: &FaultEvent| store == StoreKind::Sqlite && f.kind == "sigstop";
    faults.iter().any(|f| {
        f.kind != "cut"
            && f.start <= to
            && f.end + slack >= from
            && (f.worker.is_none_or(|w| w == earlier.worker) || holds_the_store(f))
    })
}
