//! Many MCP sessions at once through `idem gateway --http`: S clients
//! (rmcp, streamable HTTP), each in a session of its own and so with an
//! upstream process of its own, all open at once, each making C writes
//! and a duplicate of each. Prints one JSON line (latencies of first calls
//! and of duplicates, errors, the ledger's lines, the memory of the
//! gateway and of its upstreams per session), and fails unless what must
//! hold did: every operation ran exactly once (one ledger line each), and
//! no client saw an error.
//!
//! ```text
//! cargo build --release -p idem-cli --bins --examples
//! target/release/examples/gateway_load [--sessions 200] [--calls 10] [--store URL]
//! ```
//!
//! The upstream is `cli/tests/upstream/ledger.py` (the official Python
//! SDK), whose `append` appends a line to a ledger file and syncs it. The
//! store is a SQLite file of the run's own unless `--store` names one
//! (then under a namespace of the run's own). `.ci/run` runs it with a few
//! sessions, so that it cannot rot.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Barrier;

type Client = RunningService<RoleClient, ()>;

/// The upstream server's script.
const LEDGER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/ledger.py");

/// What one session saw.
#[derive(Default)]
struct Seen {
    /// Latencies of first calls and of duplicates, in µs.
    unique: Vec<u64>,
    duplicate: Vec<u64>,
    /// Calls answered an error, or a duplicate answered otherwise than
    /// its first call, with what they said.
    errors: Vec<String>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let sessions: usize = flag("--sessions").map_or(Ok(200), |n| n.parse())?;
    let calls: usize = flag("--calls").map_or(Ok(10), |n| n.parse())?;
    let dir = std::env::temp_dir().join(format!("idem-gateway-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ledger = dir.join("ledger.txt");
    let store = flag("--store").unwrap_or_else(|| dir.join("records.sqlite").display().to_string());
    let mut gateway = start_gateway(&store, &ledger, sessions).await?;

    let opening = Instant::now();
    let clients = open_sessions(&gateway.url, sessions).await?;
    let opened_in = opening.elapsed();
    let calling = Instant::now();
    let (seen, clients) = call_all(clients, calls).await;
    let called_in = calling.elapsed();
    // With every session still open, and each having called.
    let (gateway_kib, upstreams_kib, upstreams) = memory(gateway.pid);
    for client in clients {
        let _ = client.cancel().await;
    }

    let lines = std::fs::read_to_string(&ledger).unwrap_or_default();
    let mut entries: Vec<&str> = lines.lines().collect();
    let written = entries.len();
    entries.sort_unstable();
    entries.dedup();
    let mut unique: Vec<u64> = seen.iter().flat_map(|s| s.unique.clone()).collect();
    let mut duplicate: Vec<u64> = seen.iter().flat_map(|s| s.duplicate.clone()).collect();
    let errors: Vec<&String> = seen.iter().flat_map(|s| &s.errors).collect();
    let line = json!({
        "sessions": sessions,
        "calls_per_session": calls,
        "opened_s": opened_in.as_secs_f64(),
        "called_s": called_in.as_secs_f64(),
        "unique_p50_us": percentile(&mut unique, 50),
        "unique_p99_us": percentile(&mut unique, 99),
        "duplicate_p50_us": percentile(&mut duplicate, 50),
        "duplicate_p99_us": percentile(&mut duplicate, 99),
        "errors": errors.len(),
        "ledger_lines": written,
        "operations": sessions * calls,
        "upstream_processes": upstreams,
        "gateway_kib_per_session": gateway_kib / sessions.max(1) as u64,
        "upstreams_kib_per_session": upstreams_kib / sessions.max(1) as u64,
    });
    println!("{line}");
    let _ = gateway.child.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
    for error in errors.iter().take(5) {
        eprintln!("error: {error}");
    }
    if !errors.is_empty() {
        return Err(format!("{} calls were answered an error", errors.len()).into());
    }
    if written != sessions * calls || entries.len() != written {
        return Err(format!(
            "{} operations, {written} ledger lines ({} distinct): an operation ran twice or not at all",
            sessions * calls,
            entries.len()
        )
        .into());
    }
    Ok(())
}

/// The gateway under load.
struct Gateway {
    child: tokio::process::Child,
    pid: u32,
    url: String,
}

/// Starts the `idem` beside this example on `store`, serving HTTP, in
/// front of `ledger.py` keeping `ledger`, with room for `sessions`.
async fn start_gateway(
    store: &str,
    ledger: &Path,
    sessions: usize,
) -> Result<Gateway, Box<dyn std::error::Error>> {
    let namespace = format!("load-{}", std::process::id());
    let mut child = tokio::process::Command::new(idem())
        .args(["gateway", "--store", store, "--namespace", &namespace])
        .args([
            "--http",
            "127.0.0.1:0",
            "--max-sessions",
            &sessions.to_string(),
        ])
        // Many Python servers starting at once on a small machine.
        .args(["--timeout", "10m", "--", "python3", LEDGER])
        .arg(ledger)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("the gateway exited")?;
    let mut lines = tokio::io::BufReader::new(child.stderr.take().ok_or("no stderr")?).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await?
            .ok_or("the gateway exited before listening")?;
        if let Some(url) = line.strip_prefix("idem gateway: listening on ") {
            break url.to_owned();
        }
        eprintln!("{line}");
    };
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
        }
    });
    Ok(Gateway { child, pid, url })
}

/// `sessions` clients, each in a session of its own, all open.
async fn open_sessions(url: &str, sessions: usize) -> Result<Vec<Client>, String> {
    let mut opening = tokio::task::JoinSet::new();
    for _ in 0..sessions {
        let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
        opening.spawn(async move { ().serve(transport).await.map_err(|e| e.to_string()) });
    }
    let mut clients = Vec::with_capacity(sessions);
    while let Some(opened) = opening.join_next().await {
        clients.push(opened.map_err(|e| e.to_string())??);
    }
    Ok(clients)
}

/// Every client makes `calls` writes and a duplicate of each, all clients
/// at once (they start together): what each saw, and the clients.
async fn call_all(clients: Vec<Client>, calls: usize) -> (Vec<Seen>, Vec<Client>) {
    let start = Arc::new(Barrier::new(clients.len()));
    let mut calling = tokio::task::JoinSet::new();
    for (n, client) in clients.into_iter().enumerate() {
        let start = start.clone();
        calling.spawn(async move {
            start.wait().await;
            let seen = session_calls(&client, n, calls).await;
            (seen, client)
        });
    }
    let (mut seen, mut clients) = (Vec::new(), Vec::new());
    while let Some(done) = calling.join_next().await {
        match done {
            Ok((saw, client)) => {
                seen.push(saw);
                clients.push(client);
            }
            Err(e) => seen.push(Seen {
                errors: vec![e.to_string()],
                ..Seen::default()
            }),
        }
    }
    (seen, clients)
}

/// Session `n`'s calls.
async fn session_calls(client: &Client, n: usize, calls: usize) -> Seen {
    let mut seen = Seen::default();
    for i in 0..calls {
        let entry = format!("s{n}-c{i}");
        let first = timed(client, &entry).await;
        let again = timed(client, &entry).await;
        match (first, again) {
            (Ok((took, first)), Ok((again_took, again))) => {
                seen.unique.push(took);
                seen.duplicate.push(again_took);
                if first != again {
                    seen.errors.push(format!("{entry}: {first} then {again}"));
                }
            }
            (Err(e), _) | (_, Err(e)) => seen.errors.push(format!("{entry}: {e}")),
        }
    }
    seen
}

/// One `append` of `entry`: how long it took (µs) and its structured
/// result, or what went wrong.
async fn timed(client: &Client, entry: &str) -> Result<(u64, Value), String> {
    let mut arguments = Map::new();
    arguments.insert("entry".into(), json!(entry));
    let request = CallToolRequestParams::new("append").with_arguments(arguments);
    let started = Instant::now();
    let result = client.call_tool(request).await.map_err(|e| e.to_string())?;
    let took = started.elapsed().as_micros() as u64;
    if result.is_error == Some(true) {
        return Err(format!("an error result: {:?}", result.content));
    }
    Ok((took, result.structured_content.unwrap_or(Value::Null)))
}

/// The resident memory of process `pid` and of all its descendants, in
/// KiB, and how many descendants there are.
fn memory(pid: u32) -> (u64, u64, usize) {
    let mut parents = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(parent) = parent_of(child) {
                parents.push((child, parent));
            }
        }
    }
    let mut family = vec![pid];
    let mut grew = true;
    while grew {
        grew = false;
        for (child, parent) in &parents {
            if family.contains(parent) && !family.contains(child) {
                family.push(*child);
                grew = true;
            }
        }
    }
    let descendants: u64 = family[1..].iter().map(|p| rss_kib(*p)).sum();
    (rss_kib(pid), descendants, family.len() - 1)
}

/// Process `pid`'s parent, from `/proc/PID/stat` (after the command's
/// closing parenthesis: the state, then the parent).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn percentile(values: &mut [u64], p: usize) -> u64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    values[((values.len() - 1) * p) / 100]
}

/// The `idem` binary beside this example's.
fn idem() -> PathBuf {
    let exe = std::env::current_exe().expect("this program's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples");
    dir.join(format!("idem{}", std::env::consts::EXE_SUFFIX))
}
