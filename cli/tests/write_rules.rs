//! What a write is through `idem gateway` under the protocol's newer
//! shapes (docs/gateway.md, "Writes and the protocol's newer shapes"),
//! against real servers: `tests/upstream/ledger.py` on the official Python
//! SDK, whose writes append to a ledger (its lines count the runs), and the
//! MCP project's `server-everything` for tasks. The client is the official
//! Python SDK's (`tests/upstream/rules.py`) or rmcp's.
//!
//! - a write the client cancels in flight is an uncertain outcome under
//!   its policy, never released for a duplicate to run beside it;
//! - a write whose client goes (its HTTP stream dropped, its stdin closed)
//!   goes on, and its result is recorded;
//! - a result that is not final (`input_required`) is not recorded; the
//!   client's continuation is the same operation;
//! - a write called as a task twice makes one task upstream;
//! - the run that executes reports progress; a replay answers at once;
//! - a client may send its own operation key (`_meta` or
//!   `params.idempotencyKey`), bound to the arguments; the key the gateway
//!   derives reaches the upstream.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::servers::TempDir;
use common::{EVERYTHING, PATIENCE, npx, python_json, python_sdk, raw, wait_for};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::process::Command;

const LEDGER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/ledger.py");
const RULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/rules.py");
const IDEM: &str = env!("CARGO_BIN_EXE_idem");

/// A gateway's store and its upstream's ledger, in a directory of their
/// own.
struct Place {
    dir: TempDir,
}

impl Place {
    fn new() -> Place {
        Place {
            dir: TempDir::new("write-rules"),
        }
    }

    fn store(&self) -> String {
        self.dir.0.join("records.sqlite").display().to_string()
    }

    fn ledger(&self) -> PathBuf {
        self.dir.0.join("ledger.txt")
    }

    fn lines(&self) -> Vec<String> {
        read_lines(&self.ledger())
    }

    /// A configuration file holding `toml`: its path.
    fn config(&self, toml: &str) -> String {
        let path = self.dir.0.join("gateway.toml");
        std::fs::write(&path, toml).expect("write the configuration");
        path.display().to_string()
    }

    /// A file beside the ledger: `ledger.txt.SUFFIX`.
    fn beside(&self, suffix: &str) -> PathBuf {
        self.dir.0.join(format!("ledger.txt.{suffix}"))
    }

    /// Waits until `append_when_released` waits upstream, then releases it.
    async fn release_when_waiting(&self) {
        wait_for(|| self.beside("waiting").exists(), "the write never ran").await;
        std::fs::write(self.beside("release"), "").expect("release the write");
    }

    /// The gateway in front of `ledger.py`, with `extra` options, as a
    /// command line.
    fn gateway(&self, extra: &[&str]) -> Vec<String> {
        let mut line: Vec<String> = [IDEM, "gateway", "--store", &self.store()]
            .iter()
            .chain(extra)
            .map(|s| (*s).to_owned())
            .collect();
        line.extend(["--", "python3", LEDGER].map(str::to_owned));
        line.push(self.ledger().display().to_string());
        line
    }

    /// `idem SUBCOMMAND --json --store ..`'s JSON lines.
    fn idem(&self, subcommand: &str) -> Vec<Value> {
        let out = std::process::Command::new(IDEM)
            .args([subcommand, "--json", "--store", &self.store()])
            .output()
            .expect("run idem");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// What `rules.py MODE` saw of the server `command` starts.
async fn rules(mode: &str, command: &[String]) -> Value {
    let args: Vec<&str> = std::iter::once(mode)
        .chain(command.iter().map(String::as_str))
        .collect();
    python_json(RULES, &args, &[]).await
}

#[tokio::test]
async fn the_run_that_executes_reports_progress_and_a_replay_answers_at_once() {
    if !python_sdk() {
        return;
    }
    let place = Place::new();
    let seen = rules("progress", &place.gateway(&[])).await;
    let calls = &seen["calls"];
    assert_eq!(calls[0]["progress"], 2, "{seen}");
    assert_eq!(calls[0]["replayed"], false, "{seen}");
    assert_eq!(calls[1]["progress"], 0, "{seen}");
    assert_eq!(calls[1]["replayed"], true, "{seen}");
    assert_eq!(calls[1]["text"], calls[0]["text"]);
    assert_eq!(place.lines(), ["progress p"]);
}

#[tokio::test]
async fn an_input_required_round_trip_is_one_operation_recorded_once_final() {
    if !python_sdk() {
        return;
    }
    let place = Place::new();
    let seen = rules("confirm", &place.gateway(&[])).await;
    // The client speaks 2026-07-28 through the gateway as it would to the
    // server: the confirmation comes back as an `input_required` result,
    // answered by a retry of the same call.
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    assert_eq!(seen["asked"], 1, "{seen}");
    let calls = &seen["calls"];
    assert_eq!(calls[0]["text"], json!(["confirmed c"]), "{seen}");
    assert_eq!(calls[1]["replayed"], true, "{seen}");
    assert_eq!(calls[1]["text"], json!(["confirmed c"]), "{seen}");
    assert_eq!(place.lines(), ["confirmed c"]);
    // One record, of the final result.
    let records = place.idem("list");
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["state"], "done", "{records:?}");
}

#[tokio::test]
async fn a_write_called_as_a_task_twice_makes_one_task_upstream() {
    if !python_sdk() || !npx() {
        return;
    }
    let place = Place::new();
    let server = ["npx", "-y", EVERYTHING, "stdio"].map(str::to_owned);
    let through: Vec<String> = [IDEM, "gateway", "--store", &place.store(), "--"]
        .map(str::to_owned)
        .into_iter()
        .chain(server.iter().cloned())
        .collect();
    let (direct, through) = tokio::join!(rules("task", &server), rules("task", &through));
    assert_eq!(direct["listed"], 2, "{direct}");
    assert_ne!(direct["ids"][0], direct["ids"][1], "{direct}");
    assert_eq!(through["listed"], 1, "{through}");
    assert_eq!(through["ids"][0], through["ids"][1], "{through}");
}

/// Starts the gateway in front of `ledger.py` with `extra` options, and an
/// rmcp client of it over stdio.
async fn rmcp_client(
    place: &Place,
    extra: &[&str],
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let line = place.gateway(extra);
    let mut command = Command::new(&line[0]);
    command.args(&line[1..]);
    let transport = TokioChildProcess::new(command).expect("start the gateway");
    ().serve(transport).await.expect("initialize")
}

/// A `tools/call` of `name` with `args`, as a request rmcp sends as it is.
fn tool_call(name: &'static str, args: &Value) -> ClientRequest {
    let params = CallToolRequestParams::new(name)
        .with_arguments(args.as_object().expect("an object").clone());
    ClientRequest::CallToolRequest(CallToolRequest::new(params))
}

#[tokio::test]
async fn a_read_the_client_cancels_is_cancelled_upstream() {
    if !python_sdk() {
        return;
    }
    let place = Place::new();
    let client = rmcp_client(&place, &[]).await;
    // A request first, so that the call's id differs on each side.
    let count = client.peer().send_request(tool_call("count", &json!({})));
    count.await.expect("count");
    let wait = tool_call("wait_for_cancel", &json!({}));
    let options = PeerRequestOptions::no_options();
    let handle = client
        .peer()
        .send_cancellable_request(wait, options)
        .await
        .expect("send the call");
    wait_for(|| place.beside("waiting").exists(), "the read never ran").await;
    handle
        .cancel(Some("no longer needed".into()))
        .await
        .expect("cancel");
    let cancelled = place.beside("cancelled");
    wait_for(
        || cancelled.exists(),
        "the upstream never saw the cancellation",
    )
    .await;
    client.cancel().await.expect("shut down");
}

#[tokio::test]
async fn a_write_the_client_cancels_in_flight_is_an_unknown_outcome_never_run_again() {
    if !python_sdk() {
        return;
    }
    let place = Place::new();
    let config = place.config("[tools.append_slowly]\non_uncertain = \"refuse\"\n");
    let client = rmcp_client(&place, &["--config", &config]).await;
    let call = || tool_call("append_slowly", &json!({"entry": "s"}));
    let handle = client
        .peer()
        .send_cancellable_request(call(), PeerRequestOptions::no_options())
        .await
        .expect("send the call");
    let started = std::time::Instant::now();
    while place.lines().is_empty() {
        assert!(started.elapsed() < PATIENCE, "the write never ran");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    handle
        .cancel(Some("the user stopped it".into()))
        .await
        .expect("cancel");

    // The duplicate is not run beside it, nor after it: whether the first
    // took effect is not known, and the tool's policy refuses.
    let duplicate = client
        .peer()
        .send_request(call())
        .await
        .expect("the duplicate");
    let duplicate = serde_json::to_value(duplicate).expect("json");
    let text = duplicate.to_string();
    assert!(text.contains("not known whether"), "{text}");
    assert_eq!(place.lines(), ["slowly s"]);
    client.cancel().await.expect("shut down");
    let pending = place.idem("pending");
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["tool"], "append_slowly", "{pending:?}");
}

#[tokio::test]
async fn a_clients_own_key_is_bound_to_its_arguments_and_the_derived_key_reaches_upstream() {
    if !python_sdk() {
        return;
    }
    let place = Place::new();
    let seen = rules("keys", &place.gateway(&[])).await;
    for first in ["derived", "meta", "param"] {
        assert_eq!(seen[first]["error"], false, "{first}: {seen}");
        assert_eq!(seen[first]["replayed"], false, "{first}: {seen}");
    }
    for again in ["meta_again", "param_again"] {
        assert_eq!(seen[again]["replayed"], true, "{again}: {seen}");
    }
    // The same key with other arguments is refused, naming the field.
    for other in ["meta_other", "param_other"] {
        assert_eq!(seen[other]["error"], true, "{other}: {seen}");
        let text = seen[other]["text"].as_str().expect("a text");
        assert!(text.contains("`entry`"), "{other}: {text}");
    }
    // Three runs, each carrying the key it is recorded under.
    let lines = place.lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let recorded: Vec<String> = place
        .idem("list")
        .iter()
        .map(|r| r["key"].as_str().expect("a key").to_owned())
        .collect();
    for line in &lines {
        let key = line.rsplit(' ').next().expect("a key");
        assert!(recorded.iter().any(|k| k == key), "{line} in {recorded:?}");
    }
}

#[tokio::test]
async fn a_write_whose_stdio_client_goes_is_recorded_before_the_gateway_exits() {
    if !python_sdk() {
        return;
    }
    use std::io::Write;
    let place = Place::new();
    let line = place.gateway(&[]);
    let mut gateway = std::process::Command::new(&line[0])
        .args(&line[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the gateway");
    let mut stdin = gateway.stdin.take().expect("stdin");
    let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "test", "version": "0"}});
    let call = json!({"name": "append_when_released", "arguments": {"entry": "g"}});
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}),
    ] {
        writeln!(stdin, "{message}").expect("write to the gateway");
    }
    wait_for(|| place.beside("waiting").exists(), "the write never ran").await;
    // The client goes while the write is in flight.
    drop(stdin);
    place.release_when_waiting().await;
    let exited = tokio::task::spawn_blocking(move || gateway.wait()).await;
    assert!(exited.expect("join").expect("wait").success());
    assert_eq!(place.lines(), ["released g"]);
    let records = place.idem("list");
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["state"], "done", "{records:?}");
}

#[tokio::test]
async fn a_write_whose_http_stream_drops_goes_on_and_its_duplicate_is_replayed() {
    if !python_sdk() {
        return;
    }
    let place = Place::new();
    let config = place.config("[tools.append_when_released]\nwait = \"30s\"\n");
    let port = common::servers::free_port();
    let listen = format!("127.0.0.1:{port}");
    let line = place.gateway(&["--http", &listen, "--config", &config]);
    let _gateway = Command::new(&line[0])
        .args(&line[1..])
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the gateway");
    common::listening(port).await;

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    let (headers, _) = raw::post(&listen, &[], &initialize, true).await;
    let session = raw::header(&headers, "mcp-session-id").expect("a session");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    raw::post(&listen, &[("mcp-session-id", &session)], &initialized, true).await;
    let call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "append_when_released", "arguments": {"entry": "h"}}})
    };
    // The stream of the call is dropped once the gateway answered its
    // headers; the write goes on upstream.
    raw::post(&listen, &[("mcp-session-id", &session)], &call(2), false).await;
    place.release_when_waiting().await;
    wait_for(|| !place.lines().is_empty(), "the write never finished").await;
    let (_, body) = raw::post(&listen, &[("mcp-session-id", &session)], &call(3), true).await;
    assert!(body.contains(r#""idem/replayed":true"#), "{body}");
    assert!(body.contains("released h"), "{body}");
    assert_eq!(place.lines(), ["released h"]);
}
