//! `idem gateway` is transparent: in front of the MCP project's own
//! `server-everything`, which exercises every feature of the protocol, the
//! official Python SDK's client sees through the gateway what it sees
//! directly (capabilities, instructions, tools, prompts, resources,
//! completion, ping, results of every shape, sampling, elicitation and
//! roots asked of it mid-call, progress, logging, resource subscriptions,
//! a task), on both transports and both kinds of upstream; only a write
//! repeated differs: through the gateway it runs once.
//!
//! `tests/upstream/everything.py` makes the checks and prints what it saw.

mod common;

use std::process::Stdio;

use common::servers::{self, TempDir};
use common::{EVERYTHING, PATIENCE, npx, python_sdk};
use serde_json::{Value, json};
use tokio::process::Command;

/// The client's checks.
const CHECKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/everything.py");

/// What the client saw of the server it reaches with `target` (a command
/// line, or `--url URL`).
async fn report(target: &[&str]) -> Value {
    let out = Command::new("python3")
        .arg(CHECKS)
        .args(target)
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(PATIENCE * 3, out)
        .await
        .expect("the checks end")
        .expect("run the checks");
    assert!(out.status.success(), "the checks failed: {target:?}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// What the client must see of `server-everything`, directly: every
/// feature works (so that a comparison of two reports that both failed
/// cannot pass).
fn assert_everything_works(direct: &Value) {
    let capabilities = &direct["capabilities"];
    for capability in [
        "tools",
        "prompts",
        "resources",
        "logging",
        "completions",
        "tasks",
    ] {
        assert!(
            capabilities.get(capability).is_some(),
            "{capability}: {direct}"
        );
    }
    assert!(
        direct["instructions"]
            .as_str()
            .is_some_and(|i| !i.is_empty())
    );
    let tools = direct["tools"].as_array().expect("tools");
    for tool in [
        "trigger-sampling-request",
        "get-roots-list",
        "simulate-research-query",
    ] {
        assert!(tools.contains(&json!(tool)), "{tool} is listed: {direct}");
    }
    assert_eq!(direct["completion"], json!(["Engineering"]), "{direct}");
    assert_eq!(direct["ping"], "pong");
    assert_eq!(direct["results"]["image"], json!(["text", "image", "text"]));
    for feature in ["sampling", "elicitation", "roots", "subscriptions"] {
        assert_eq!(direct[feature], true, "{feature}: {direct}");
    }
    assert_eq!(direct["progress"], 4, "{direct}");
    assert_eq!(direct["logging"]["received"], true, "{direct}");
    assert_eq!(direct["task"]["status"], "completed", "{direct}");
}

/// `through` is `direct` but for the write repeated: directly the toggle
/// runs twice (started, stopped), through the gateway once (the second
/// call is the first's result, replayed).
fn assert_the_same_but_the_repeated_write(direct: &Value, through: &Value) {
    assert_eq!(direct["logging"]["toggles"], json!(["Started", "Stopped"]));
    assert_eq!(through["logging"]["toggles"], json!(["Started", "Started"]));
    let without_toggles = |report: &Value| {
        let mut report = report.clone();
        report["logging"]["toggles"] = Value::Null;
        report
    };
    let (direct, through) = (without_toggles(direct), without_toggles(through));
    for (check, seen) in direct.as_object().expect("a report") {
        assert_eq!(&through[check], seen, "{check} differs through the gateway");
    }
}

#[tokio::test]
async fn on_stdio_in_front_of_a_child_everything_passes_through_and_writes_run_once() {
    if !python_sdk() || !npx() {
        return;
    }
    let dir = TempDir::new("transparency");
    let store = format!("sqlite://{}", dir.0.join("records.sqlite").display());
    let server = ["npx", "-y", EVERYTHING, "stdio"];
    let idem = env!("CARGO_BIN_EXE_idem");
    let gateway = [idem, "gateway", "--store", &store, "--"];
    let through = [&gateway[..], &server[..]].concat();
    let (direct, through) = tokio::join!(report(&server), report(&through));
    assert_everything_works(&direct);
    assert_the_same_but_the_repeated_write(&direct, &through);

    // The writes were recorded; the reads were not.
    let out = std::process::Command::new(idem)
        .args(["stats", "--json", "--store", &store])
        .output()
        .expect("idem stats");
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats");
    let tools = stats["tools"].as_object().expect("tools");
    for write in ["toggle-simulated-logging", "simulate-research-query"] {
        assert!(tools.contains_key(write), "{write}: {stats}");
    }
    assert!(!tools.contains_key("get-sum") && !tools.contains_key("echo"));
}

/// Starts `server-everything` serving streamable HTTP on `port`: the
/// process, killed on drop.
async fn http_everything(port: u16) -> tokio::process::Child {
    let child = Command::new("npx")
        .args(["-y", EVERYTHING, "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start server-everything");
    listening(port).await;
    child
}

/// Waits until something listens on `port`.
async fn listening(port: u16) {
    let started = std::time::Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(started.elapsed() < PATIENCE, "nothing listened on {port}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn over_http_in_front_of_a_url_everything_passes_through_and_writes_run_once() {
    if !python_sdk() || !npx() {
        return;
    }
    let dir = TempDir::new("transparency");
    let store = format!("sqlite:{}", dir.0.join("records.sqlite").display());
    let (upstream_port, gateway_port) = (servers::free_port(), servers::free_port());
    let _upstream = http_everything(upstream_port).await;
    let upstream = format!("http://127.0.0.1:{upstream_port}/mcp");
    let listen = format!("127.0.0.1:{gateway_port}");
    let _gateway = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["gateway", "--store", &store, "--http", &listen])
        .args(["--upstream-url", &upstream])
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the gateway");
    listening(gateway_port).await;
    let through = format!("http://{listen}/mcp");
    let (direct, through) = (["--url", &upstream], ["--url", &through]);
    let (direct, through) = tokio::join!(report(&direct), report(&through));
    assert_everything_works(&direct);
    assert_the_same_but_the_repeated_write(&direct, &through);
}
