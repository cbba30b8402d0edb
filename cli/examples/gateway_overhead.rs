//! What `idem gateway` adds to a call: the latency of one write, called by
//! one rmcp client over stdio, directly on the upstream and through the
//! gateway on each store, in rounds that alternate between them so that
//! every configuration sees the same machine.
//!
//! ```text
//! cargo build --release -p idem-cli
//! cargo run --release -p idem-cli --example gateway_overhead -- [--calls N] [--rounds R] [--redis URL] [--baseline IDEM]
//! ```
//!
//! The upstream is `cli/tests/upstream/ledger.py` (the official Python SDK);
//! its tool `note` keeps a note in memory, so that the upstream's own work
//! is as small as a Python MCP server's can be. Each round makes N unique
//! calls (each a first call: claimed, run upstream, recorded), N
//! duplicates of one call (replayed from the store; directly, they run
//! again) and N calls of the read `count` (passed through). One JSON line
//! per configuration and kind of call gives the
//! median over the rounds of each round's p50 and p99, in µs. `--baseline
//! IDEM` adds another `idem` binary's gateway on SQLite to each round (a
//! build of another commit), to compare two gateways in one run.

use std::path::PathBuf;
use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value, json};
use tokio::process::Command;

type Client = RunningService<RoleClient, ()>;

/// The upstream server's script.
const LEDGER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/ledger.py");

/// One way of reaching the upstream.
struct Setup {
    name: &'static str,
    /// The gateway's store, or `None` to call the upstream directly.
    store: Option<String>,
    /// The `idem` binary of the gateway.
    idem: PathBuf,
}

/// The p50 and p99 of each round, in µs, for unique and duplicate calls
/// of the write and for calls of the read.
#[derive(Default)]
struct Figures {
    unique: Vec<(u64, u64)>,
    duplicate: Vec<(u64, u64)>,
    read: Vec<(u64, u64)>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let calls: usize = flag("--calls").map_or(Ok(2000), |n| n.parse())?;
    let rounds: usize = flag("--rounds").map_or(Ok(5), |n| n.parse())?;
    let redis = flag("--redis").unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let dir = std::env::temp_dir().join(format!("idem-gateway-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut setups = vec![
        Setup {
            name: "direct",
            store: None,
            idem: gateway(),
        },
        Setup {
            name: "gateway-sqlite",
            store: Some(dir.join("records.sqlite").display().to_string()),
            idem: gateway(),
        },
        Setup {
            name: "gateway-redis",
            store: Some(redis),
            idem: gateway(),
        },
    ];
    if let Some(baseline) = flag("--baseline") {
        setups.push(Setup {
            name: "baseline-gateway-sqlite",
            store: Some(dir.join("baseline.sqlite").display().to_string()),
            idem: PathBuf::from(baseline),
        });
    }
    let mut figures: Vec<Figures> = setups.iter().map(|_| Figures::default()).collect();
    for round in 0..rounds {
        for (setup, figures) in setups.iter().zip(&mut figures) {
            let client = start(setup, &dir, round).await?;
            let prefix = format!("{}-{round}", setup.name);
            figures
                .unique
                .push(measure(&client, calls, |i| note(format!("{prefix}-{i}"))).await?);
            figures
                .duplicate
                .push(measure(&client, calls, |_| note(format!("{prefix}-dup"))).await?);
            figures
                .read
                .push(measure(&client, calls, |_| CallToolRequestParams::new("count")).await?);
            client.cancel().await?;
            eprintln!("round {round}: {} done", setup.name);
        }
    }
    for (setup, figures) in setups.iter().zip(&figures) {
        for (kind, rounds) in [
            ("unique", &figures.unique),
            ("duplicate", &figures.duplicate),
            ("read", &figures.read),
        ] {
            let p50 = median(rounds.iter().map(|r| r.0).collect());
            let p99 = median(rounds.iter().map(|r| r.1).collect());
            let line = json!({"setup": setup.name, "calls": kind, "p50_us": p50, "p99_us": p99});
            println!("{line}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// An rmcp client of the upstream, directly or through the gateway.
async fn start(setup: &Setup, dir: &std::path::Path, round: usize) -> Result<Client, String> {
    let ledger = dir.join("ledger.txt");
    let mut command = match &setup.store {
        None => Command::new("python3"),
        Some(store) => {
            // Results kept two minutes, not the default day: a run leaves
            // tens of thousands of records in the Redis it is given.
            let config = dir.join("gateway.toml");
            std::fs::write(&config, "[tools.note]\nttl = \"2m\"\n").map_err(|e| e.to_string())?;
            let mut command = Command::new(&setup.idem);
            command.args(["gateway", "--store", store, "--config"]);
            command.arg(config).arg("--namespace");
            command.arg(format!("overhead-{}-{round}", std::process::id()));
            command.args(["--", "python3"]);
            command
        }
    };
    command.arg(LEDGER).arg(ledger);
    let transport = TokioChildProcess::new(command).map_err(|e| e.to_string())?;
    ().serve(transport).await.map_err(|e| e.to_string())
}

/// The `idem` binary beside this example's (`cargo build --release -p idem-cli`).
fn gateway() -> PathBuf {
    let exe = std::env::current_exe().expect("this program's path");
    let dir = exe
        .parent()
        .and_then(|examples| examples.parent())
        .expect("target dir");
    dir.join("idem")
}

/// A call of the write `note` with `text`.
fn note(text: String) -> CallToolRequestParams {
    let mut args = Map::new();
    args.insert("text".into(), Value::String(text));
    CallToolRequestParams::new("note").with_arguments(args)
}

/// Makes `calls` calls, the i-th `call(i)`, and gives their p50 and p99
/// in µs.
async fn measure(
    client: &Client,
    calls: usize,
    call: impl Fn(usize) -> CallToolRequestParams,
) -> Result<(u64, u64), Box<dyn std::error::Error>> {
    let mut latencies = Vec::with_capacity(calls);
    for i in 0..calls {
        let params = call(i);
        let started = Instant::now();
        let result = client.call_tool(params).await?;
        latencies.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        if result.is_error == Some(true) {
            return Err(format!("the call failed: {result:?}").into());
        }
    }
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Ok((at(0.5), at(0.99)))
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}
