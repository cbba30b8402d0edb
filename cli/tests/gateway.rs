//! `idem gateway` in front of a real MCP server: `tests/upstream/ledger.py`,
//! on the official Python SDK, whose write tools append to a ledger file,
//! so that the ledger's lines count how often a write ran. Driven by
//! rmcp's client over stdio, as an MCP client configured to start the
//! gateway would: duplicates (reordered sets, concurrent), reads passed
//! through unrecorded, error results passed on, a restart of the gateway
//! on SQLite and Redis, and an upstream killed in the middle of a call.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use idem::prelude::*;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value, json};
use tokio::process::Command;

use common::servers::{self, TempDir};
use common::{FILESYSTEM, PATIENCE, npx, python_sdk, skip};

type Client = RunningService<RoleClient, ()>;

/// The upstream server's script.
const LEDGER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/ledger.py");

/// A gateway on `store`, its upstream keeping its ledger in `dir`.
struct Gateway<'a> {
    dir: &'a Path,
    store: String,
    extra: Vec<String>,
}

impl Gateway<'_> {
    /// A gateway on a SQLite file in `dir`.
    fn on_sqlite(dir: &Path) -> Gateway<'_> {
        Gateway {
            dir,
            store: dir.join("records.sqlite").display().to_string(),
            extra: Vec::new(),
        }
    }

    fn ledger(&self) -> PathBuf {
        self.dir.join("ledger.txt")
    }

    /// The ledger's lines: one per write that ran upstream.
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.ledger())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Starts the gateway (and through it the upstream) as an MCP client
    /// would, and initializes a session with it.
    async fn start(&self) -> Client {
        self.start_with_pid().await.0
    }

    /// [`start`](Self::start), and the gateway's process id.
    async fn start_with_pid(&self) -> (Client, u32) {
        let transport = TokioChildProcess::new(self.command()).expect("start the gateway");
        let pid = transport.id().expect("the gateway runs");
        let client = ().serve(transport).await.expect("the gateway initializes");
        (client, pid)
    }

    /// Its command line, as an MCP client configured to start it holds it.
    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_idem"));
        command
            .args(["gateway", "--store", &self.store])
            .args(&self.extra)
            .args(["--", "python3", LEDGER])
            .arg(self.ledger());
        command
    }

    /// With a configuration file holding `toml`.
    fn configured(mut self, toml: &str) -> Self {
        let path = self.dir.join("gateway.toml");
        std::fs::write(&path, toml).expect("write the configuration");
        self.extra
            .extend(["--config".to_owned(), path.display().to_string()]);
        self
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// `tools/call`, in run `run` if given.
async fn call(
    client: &Peer<RoleClient>,
    run: Option<&str>,
    name: &str,
    args: Value,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(object(args));
    if let Some(run) = run {
        params.meta = Some(object(json!({ "idem/run_id": run })).into());
    }
    client
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("tools/call {name}: {e}"))
}

/// The result as JSON, without the `_meta` that marks a replay.
fn unmarked(result: &CallToolResult) -> Value {
    unmarked_json(serde_json::to_value(result).expect("a result is JSON"))
}

/// A result's JSON without the `_meta` that marks a replay (and says how
/// to repeat it on purpose).
fn unmarked_json(mut value: Value) -> Value {
    if let Some(meta) = value.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove("idem/replayed");
        meta.remove("idem/repeat_with");
        if meta.is_empty() {
            value.as_object_mut().expect("object").remove("_meta");
        }
    }
    value
}

fn replayed(result: &CallToolResult) -> bool {
    result.meta.as_ref().and_then(|m| m.0.get("idem/replayed")) == Some(&Value::Bool(true))
}

/// The text of a result's last content block: a replay's note.
fn last_text(result: &CallToolResult) -> String {
    let last = result.content.last().and_then(|c| c.as_text());
    last.map(|t| t.text.clone()).unwrap_or_default()
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn listed<'t>(tools: &'t [Tool], name: &str) -> &'t Tool {
    tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("`{name}` is not listed"))
}

#[tokio::test]
async fn a_write_runs_once_and_its_duplicates_are_replayed_as_it_answered() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0);
    let client = gateway.start().await;

    // The list: writes carry their contract, reads pass untouched.
    let tools = client.list_all_tools().await.expect("tools/list");
    let append = serde_json::to_value(listed(&tools, "append")).expect("json");
    assert_eq!(append["annotations"]["idempotentHint"], false, "{append}");
    let contract = &append["_meta"]["idem/contract"];
    assert_eq!(contract["scope"], "run", "{contract}");
    assert_eq!(contract["keyed"], json!(["entry", "amount", "tags"]));
    assert_eq!(contract["replay_window_secs"], 86_400);
    let count = serde_json::to_value(listed(&tools, "count")).expect("json");
    assert_eq!(count["annotations"], json!({"readOnlyHint": true}));
    assert!(count.get("_meta").is_none(), "{count}");

    // A duplicate, its set in another order, is the first answer replayed.
    let first = call(
        &client,
        None,
        "append",
        json!({"entry": "a", "tags": ["y", "x"]}),
    )
    .await;
    let again = call(
        &client,
        None,
        "append",
        json!({"tags": ["x", "y"], "entry": "a"}),
    )
    .await;
    assert!(!replayed(&first) && replayed(&again), "{again:?}");
    let receipt = json!({"line": 1, "entry": "a"});
    assert_eq!(first.structured_content, Some(receipt));
    assert_eq!(unmarked(&again), unmarked(&first));
    assert_eq!(gateway.lines(), ["a 0 x,y"]);

    // Another operation runs; a read is passed through and records nothing.
    let other = call(&client, None, "append", json!({"entry": "b", "amount": 2})).await;
    assert!(!replayed(&other));
    let counted = call(&client, None, "count", json!({})).await;
    assert_eq!(counted.structured_content, Some(json!({"result": 2})));

    // An error result is passed on as it came, and not recorded: its
    // duplicate runs again.
    for _ in 0..2 {
        let refused = call(&client, None, "refuse", json!({"entry": "c"})).await;
        assert_eq!(refused.is_error, Some(true));
        assert!(!replayed(&refused));
        assert_eq!(
            text(&refused),
            "Error executing tool refuse: the ledger refuses c"
        );
    }
    client.cancel().await.expect("shut down");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["list", "--json", "--store", &gateway.store])
        .output()
        .expect("idem list");
    let listing = String::from_utf8_lossy(&out.stdout);
    let mut records: Vec<(String, String)> = listing
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .map(|r| (r["tool"].to_string(), r["state"].to_string()))
        .collect();
    records.sort();
    let expected = [
        (r#""append""#, r#""done""#),
        (r#""append""#, r#""done""#),
        (r#""refuse""#, r#""released""#),
    ];
    let expected = expected.map(|(t, s)| (t.to_owned(), s.to_owned()));
    assert_eq!(records, expected, "{listing}");
}

/// The same `append` in Rust: a write tool of the same name and arguments,
/// which derives the same key as the gateway does from the upstream's
/// schema.
#[write_tool]
async fn append(
    entry: String,
    amount: i64,
    tags: BTreeSet<String>,
    ctx: &WriteCtx,
) -> Result<Value, String> {
    let _ = (entry, amount, tags, ctx);
    Ok(Value::Null)
}

/// A client that gives the gateway sockets for its standard input and
/// output, as Node's `child_process` does (the gateway polls them itself,
/// as it does pipes), is served as one giving it pipes: its duplicate
/// replayed, and the gateway gone once the client closes its end.
#[tokio::test]
async fn a_client_that_starts_the_gateway_over_sockets_is_served() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway-sockets");
    let gateway = Gateway::on_sqlite(&dir.0);
    let socket = || {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
        ours.set_nonblocking(true).expect("non-blocking");
        let ours = tokio::net::UnixStream::from_std(ours).expect("our end");
        (ours, Stdio::from(std::os::fd::OwnedFd::from(theirs)))
    };
    let ((to_gateway, its_stdin), (from_gateway, its_stdout)) = (socket(), socket());
    let mut child = gateway
        .command()
        .stdin(its_stdin)
        .stdout(its_stdout)
        .kill_on_drop(true)
        .spawn()
        .expect("start the gateway");
    let client =
        ().serve((from_gateway, to_gateway))
            .await
            .expect("the gateway initializes over sockets");
    let first = call(&client, None, "append", json!({"entry": "s"})).await;
    let again = call(&client, None, "append", json!({"entry": "s"})).await;
    assert!(!replayed(&first) && replayed(&again), "{again:?}");
    assert_eq!(gateway.lines().len(), 1, "{:?}", gateway.lines());
    client.cancel().await.expect("the client closes its end");
    let status = tokio::time::timeout(PATIENCE, child.wait())
        .await
        .expect("the gateway ends once its client has gone")
        .expect("wait");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn concurrent_duplicates_run_once_and_the_key_is_a_rust_tools() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0).configured("[tools.append]\nwait = \"30s\"\n");
    let client = gateway.start().await;
    let args = json!({"entry": "c", "amount": 5, "tags": ["y", "x"]});
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let (peer, args) = (client.peer().clone(), args.clone());
        calls.spawn(async move { call(&peer, Some("run-1"), "append", args).await });
    }
    let results = calls.join_all().await;
    let firsts = results.iter().filter(|r| !replayed(r)).count();
    assert_eq!(firsts, 1, "{results:?}");
    assert!(results.iter().all(|r| unmarked(r) == unmarked(&results[0])));
    assert_eq!(gateway.lines(), ["c 5 x,y"]);
    client.cancel().await.expect("shut down");

    let registry = Registry::builder(())
        .tool(append)
        .build()
        .expect("registry");
    let (key, _) = registry
        .identify(
            "run-1",
            "append",
            json!({"tags": ["x", "y"], "amount": 5, "entry": "c"}),
        )
        .expect("identify")
        .expect("a write");
    // The vector docs/spec.md publishes ("Tools known at run time").
    let vector = "idem:15212620d746e1fde1f15c17e43de84e2a20279b2884788e72e02556c187c6ef";
    assert_eq!(key.as_str(), vector);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["show", "--json", "--store", &gateway.store, key.as_str()])
        .output()
        .expect("idem show");
    let shown: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(shown["state"], "done", "{shown}");
}

/// Starts the gateway, has it record one write in run `run-7`, kills it
/// (SIGKILL), and starts it again: the duplicate is replayed from the
/// store, and the ledger holds one line.
async fn a_duplicate_after_a_restart_is_replayed(gateway: &Gateway<'_>) {
    let args = json!({"entry": "r", "amount": 1});
    let (client, pid) = gateway.start_with_pid().await;
    let first = call(&client, Some("run-7"), "append", args.clone()).await;
    assert!(!replayed(&first));
    kill(pid);
    drop(client);

    let client = gateway.start().await;
    let again = call(&client, Some("run-7"), "append", args).await;
    assert!(replayed(&again), "{again:?}");
    assert_eq!(unmarked(&again), unmarked(&first));
    assert_eq!(gateway.lines(), ["r 1"]);
    client.cancel().await.expect("shut down");
}

#[tokio::test]
async fn a_duplicate_after_a_restart_is_replayed_from_sqlite() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0);
    a_duplicate_after_a_restart_is_replayed(&gateway).await;
}

#[tokio::test]
async fn a_duplicate_after_a_restart_is_replayed_from_redis() {
    if !python_sdk() {
        return;
    }
    let url = std::env::var("IDEM_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    if let Err(e) = idem::RedisStore::connect(&url).await {
        let what = format!("Redis at {url} ({e})");
        return skip::unavailable(&what, "Start redis-server on 127.0.0.1:6379.");
    }
    let dir = TempDir::new("gateway");
    let namespace = dir.0.file_name().expect("a name").to_string_lossy();
    let gateway = Gateway {
        dir: &dir.0,
        store: url,
        extra: vec!["--namespace".into(), namespace.into_owned()],
    };
    a_duplicate_after_a_restart_is_replayed(&gateway).await;
}

#[tokio::test]
async fn an_upstream_killed_mid_call_leaves_an_unknown_outcome_never_rerun_past_its_ttl() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0)
        .configured("[tools.append_then_hang]\non_uncertain = \"refuse\"\nttl = \"1s\"\n");
    let client = gateway.start().await;
    let lost = killed_mid_call(&gateway, &client).await;
    assert_eq!(lost.is_error, Some(true));
    assert!(text(&lost).contains("not known whether"), "{}", text(&lost));

    // The duplicate does not run it again, even once the tool's TTL has
    // passed; the upstream, started again, serves the next write.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let duplicate = call(
        &client,
        Some("run-1"),
        "append_then_hang",
        json!({"entry": "h"}),
    )
    .await;
    assert_eq!(text(&duplicate), text(&lost));
    let after = call(&client, Some("run-1"), "append", json!({"entry": "after"})).await;
    assert_eq!(after.is_error, Some(false), "{after:?}");
    assert_eq!(gateway.lines(), ["h", "after 0"]);
    client.cancel().await.expect("shut down");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["pending", "--json", "--store", &gateway.store])
        .output()
        .expect("idem pending");
    let pending = String::from_utf8_lossy(&out.stdout);
    assert_eq!(pending.lines().count(), 1, "{pending}");
    assert!(pending.contains("append_then_hang"), "{pending}");
}

#[tokio::test]
async fn an_upstream_killed_mid_call_runs_again_under_the_default_policy() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0);
    let client = gateway.start().await;
    // `on_uncertain = "rerun"`: the lost call is released, and its
    // duplicate runs it again, with the same key: two lines.
    let lost = killed_mid_call(&gateway, &client).await;
    assert!(text(&lost).contains("gave no answer"), "{}", text(&lost));
    killed_mid_call(&gateway, &client).await;
    assert_eq!(gateway.lines(), ["h", "h"]);
    client.cancel().await.expect("shut down");
}

/// Calls `append_then_hang` in run `run-1` and, once the upstream has
/// written its line and its pid, kills it (SIGKILL): the call's answer.
async fn killed_mid_call(gateway: &Gateway<'_>, client: &Client) -> CallToolResult {
    let peer = client.peer().clone();
    let hung = tokio::spawn(async move {
        let args = json!({"entry": "h"});
        call(&peer, Some("run-1"), "append_then_hang", args).await
    });
    let pid_file = gateway.dir.join("ledger.txt.pid");
    let started = std::time::Instant::now();
    let pid = loop {
        match std::fs::read_to_string(&pid_file) {
            Ok(pid) if !pid.is_empty() => break pid.parse::<u32>().expect("a pid"),
            _ if started.elapsed() > PATIENCE => panic!("the upstream never wrote its pid"),
            _ => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    };
    std::fs::remove_file(&pid_file).expect("remove the pid file");
    kill(pid);
    let lost = hung.await.expect("the call answers");
    assert_eq!(lost.is_error, Some(true));
    lost
}

/// SIGKILL to `pid`.
fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {pid}");
}

/// A gateway serving streamable HTTP, as a process of the test's own.
struct HttpGateway {
    child: tokio::process::Child,
    url: String,
}

impl HttpGateway {
    /// Starts `gateway` with `--http 127.0.0.1:0` and `extra`, and waits
    /// for the address it listens on.
    async fn start(gateway: &Gateway<'_>, extra: &[&str]) -> HttpGateway {
        let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
            .args([
                "gateway",
                "--store",
                &gateway.store,
                "--http",
                "127.0.0.1:0",
            ])
            .args(extra)
            .args(["--", "python3", LEDGER])
            .arg(gateway.ledger())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the gateway");
        let url = common::listening_url(&mut child).await;
        HttpGateway { child, url }
    }

    /// An rmcp client in an MCP session of its own, with `token`.
    async fn client(&self, token: &str) -> Result<Client, String> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let config = StreamableHttpClientTransportConfig::with_uri(self.url.clone())
            .auth_header(token.to_owned());
        let transport = StreamableHttpClientTransport::from_config(config);
        ().serve(transport).await.map_err(|e| e.to_string())
    }
}

#[tokio::test]
async fn over_http_a_principal_resumes_its_run_from_another_session_and_python_writes_once() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0);
    let flags = ["--token", "alice=secret", "--note-replays"];
    let mut server = HttpGateway::start(&gateway, &flags).await;
    assert!(
        server.client("wrong").await.is_err(),
        "an unknown token is refused"
    );

    // Two sessions of alice's naming one run: one write.
    let args = json!({"entry": "s", "amount": 3});
    let first_session = server.client("secret").await.expect("a session");
    let first = call(&first_session, Some("run-9"), "append", args.clone()).await;
    let second_session = server.client("secret").await.expect("another session");
    let again = call(&second_session, Some("run-9"), "append", args.clone()).await;
    assert!(!replayed(&first) && replayed(&again), "{again:?}");
    // With --note-replays, the replay ends with a text the model reads.
    let note = last_text(&again);
    assert!(note.contains("was not done again"), "{note}");
    assert_eq!(again.content[..first.content.len()], first.content[..]);
    // Without a run id, each session is a run of its own.
    let own = call(&second_session, None, "append", args).await;
    assert!(!replayed(&own));
    assert_eq!(gateway.lines(), ["s 3", "s 3"]);

    // The Python SDK in its default mode: no session, no run id; its
    // caller, alice, is the scope, and its repeat is replayed.
    let report = python_client(&["http", &server.url, "secret"], &[]).await;
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert_eq!(report["again"]["_meta"]["idem/replayed"], true, "{report}");
    assert_eq!(report["count"], json!({"result": 3}), "{report}");

    // A client on 2026-07-28 listens for a change of the tools.
    let report = python_client(&["listen", &server.url, "secret"], &[]).await;
    assert_eq!(report["told"], "ToolsListChanged", "{report}");
    assert!(
        report["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("stamp")))
    );
    server.child.kill().await.expect("stop the gateway");
}

/// The Python client's script.
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/client.py");

/// Runs the Python client with `args` and then `more`: its JSON report.
async fn python_client(args: &[&str], more: &[&str]) -> Value {
    let out = Command::new("python3")
        .arg(CLIENT)
        .args(args)
        .args(more)
        .output()
        .await
        .expect("run the Python client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Python client failed: {stderr}");
    serde_json::from_slice(&out.stdout).expect("the client's report")
}

#[tokio::test]
async fn the_python_sdk_over_stdio_writes_once() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let store = dir.0.join("records.sqlite").display().to_string();
    let ledger = dir.0.join("ledger.txt").display().to_string();
    let idem = env!("CARGO_BIN_EXE_idem");
    let gateway = [
        idem, "gateway", "--store", &store, "--", "python3", LEDGER, &ledger,
    ];
    let report = python_client(&["stdio"], &gateway).await;
    // The client speaks the stateless 2026-07-28 and its first request is
    // a write: the gateway learns the tools on its behalf.
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert_eq!(report["again"]["_meta"]["idem/replayed"], true, "{report}");
    let (first, again) = (report["first"].clone(), report["again"].clone());
    assert_eq!(unmarked_json(again), unmarked_json(first), "{report}");
    assert_eq!(report["count"], json!({"result": 1}), "{report}");
}

/// The upstream is started once on stdio, whether the client initializes
/// a session (rmcp) or speaks the stateless 2026-07-28 (the Python SDK's
/// default): the connection that lists the tools for the gateway's check
/// is the one the session uses. A configuration that does not fit is
/// still refused before the client is served: its first request is
/// answered why, and the gateway exits.
#[tokio::test]
async fn the_upstream_is_started_once_and_checked_on_the_clients_first_request() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway-once");
    let (starts, ledger) = (dir.0.join("starts.txt"), dir.0.join("ledger.txt"));
    let upstream = format!(
        "echo started >> '{}'; exec python3 '{LEDGER}' '{}'",
        starts.display(),
        ledger.display()
    );
    let store = dir.0.join("records.sqlite").display().to_string();
    let line = |extra: &[&str]| -> Vec<String> {
        [env!("CARGO_BIN_EXE_idem"), "gateway", "--store", &store]
            .iter()
            .chain(extra)
            .chain(&["--", "sh", "-c", &upstream])
            .map(|s| (*s).to_owned())
            .collect()
    };
    let started = || {
        std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .count()
    };

    let gateway = line(&[]);
    let mut command = Command::new(&gateway[0]);
    command.args(&gateway[1..]);
    let client = stdio_client(command).await;
    let first = call(&client, None, "append", json!({"entry": "once"})).await;
    assert!(!replayed(&first));
    client.cancel().await.expect("shut down");
    assert_eq!(started(), 1, "an initializing client: one upstream process");

    let gateway: Vec<&str> = gateway.iter().map(String::as_str).collect();
    let report = python_client(&["stdio"], &gateway).await;
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert_eq!(started(), 2, "a stateless client: one more, not two");

    // A table for a tool the server does not list: refused on the first
    // request, with the reason, before anything is served.
    let config = dir.0.join("gateway.toml");
    std::fs::write(&config, "[tools.apend]\non_uncertain = \"refuse\"\n").expect("config");
    let refusing = line(&["--config", &config.display().to_string()]);
    let mut command = Command::new(&refusing[0]);
    command.args(&refusing[1..]);
    let builder = TokioChildProcess::builder(command).stderr(Stdio::piped());
    let (transport, stderr) = builder.spawn().expect("start the gateway");
    assert!(
        ().serve(transport).await.is_err(),
        "the client is not served"
    );
    let mut said = String::new();
    let mut stderr = stderr.expect("stderr");
    tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut said)
        .await
        .expect("read");
    assert!(said.contains("`apend` (did you mean `append`?)"), "{said}");
    let lines = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert_eq!(
        lines.lines().filter(|l| l.starts_with("once")).count(),
        1,
        "{lines}"
    );
}

/// An rmcp client of `command` (an MCP server) over stdio.
async fn stdio_client(command: Command) -> Client {
    let transport = TokioChildProcess::new(command).expect("start the server");
    ().serve(transport).await.expect("the server initializes")
}

/// `edit_file` replacing `a` with `aa` in `path`.
fn edit(path: &Path) -> Value {
    json!({"path": path, "edits": [{"oldText": "a", "newText": "aa"}]})
}

#[tokio::test]
async fn in_front_of_the_official_filesystem_server_an_edit_and_a_move_happen_once() {
    if !python_sdk() || !npx() {
        return;
    }
    let dir = TempDir::new("gateway-fs");
    let data = dir.0.join("data");
    std::fs::create_dir_all(&data).expect("the data directory");
    let (direct, through) = (data.join("direct.txt"), data.join("through.txt"));
    for file in [&direct, &through, &data.join("from.txt")] {
        std::fs::write(file, "a").expect("write a file");
    }
    let npx_server = ["-y", FILESYSTEM];

    // Without the gateway, the repeated edit is applied twice.
    let mut command = Command::new("npx");
    command.args(npx_server).arg(&data);
    let client = stdio_client(command).await;
    for _ in 0..2 {
        call(&client, None, "edit_file", edit(&direct)).await;
    }
    client.cancel().await.expect("shut down");
    assert_eq!(std::fs::read_to_string(&direct).expect("read"), "aaa");

    // Through it, once; and a move repeated succeeds twice, moving once.
    let store = dir.0.join("records.sqlite").display().to_string();
    let mut command = Command::new(env!("CARGO_BIN_EXE_idem"));
    command
        .args(["gateway", "--store", &store, "--", "npx"])
        .args(npx_server)
        .arg(&data);
    let client = stdio_client(command).await;
    let first = call(&client, None, "edit_file", edit(&through)).await;
    let again = call(&client, None, "edit_file", edit(&through)).await;
    assert!(!replayed(&first) && replayed(&again));
    assert_eq!(std::fs::read_to_string(&through).expect("read"), "aa");
    let moved = json!({"source": data.join("from.txt"), "destination": data.join("to.txt")});
    for time in 0..2 {
        let result = call(&client, None, "move_file", moved.clone()).await;
        assert_ne!(result.is_error, Some(true), "{result:?}");
        assert_eq!(replayed(&result), time == 1);
    }
    assert!(!data.join("from.txt").exists() && data.join("to.txt").exists());
    let read = call(&client, None, "read_text_file", json!({"path": through})).await;
    assert_eq!(text(&read), "aa");
    client.cancel().await.expect("shut down");

    // Only the writes were recorded.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["stats", "--json", "--store", &store])
        .output()
        .expect("idem stats");
    let stats: Value = serde_json::from_slice(&out.stdout).expect("stats");
    let tools: BTreeSet<&str> = stats["tools"]
        .as_object()
        .map(|t| t.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(tools, BTreeSet::from(["edit_file", "move_file"]), "{stats}");
}

/// A long session creates a file, moves it away and creates it again: the
/// third call is the first's duplicate, replayed, and the note the model
/// reads says so, when the first ran, and how to do it again; with
/// `idem_repeat` the person's repeat runs, and a retry of that repeat is
/// still caught. The upstream never sees the argument.
#[tokio::test]
async fn a_deliberate_repeat_runs_and_a_retry_of_it_is_caught() {
    if !npx() {
        return;
    }
    let dir = TempDir::new("gateway-repeat");
    let data = dir.0.join("data");
    std::fs::create_dir_all(&data).expect("the data directory");
    let (file, away) = (data.join("notes.txt"), data.join("away.txt"));
    let store = dir.0.join("records.sqlite").display().to_string();
    let mut command = Command::new(env!("CARGO_BIN_EXE_idem"));
    command
        .args([
            "gateway",
            "--store",
            &store,
            "--note-replays",
            "--",
            "npx",
            "-y",
            FILESYSTEM,
        ])
        .arg(&data);
    let client = stdio_client(command).await;
    let listed = client.list_all_tools().await.expect("tools/list");
    let write_file = listed
        .iter()
        .find(|t| t.name == "write_file")
        .expect("write_file");
    let argument = &write_file.input_schema["properties"]["idem_repeat"];
    assert!(
        argument["description"]
            .as_str()
            .is_some_and(|d| d.contains("Give 2")),
        "{argument}"
    );

    let create = json!({"path": file, "content": "hello"});
    let first = call(&client, None, "write_file", create.clone()).await;
    assert!(!replayed(&first) && file.exists());
    let moved = json!({"source": file, "destination": away});
    call(&client, None, "move_file", moved).await;
    assert!(!file.exists());
    // The same call again: a duplicate to the gateway, whatever the person
    // meant. Nothing is created, and the model is told so.
    let again = call(&client, None, "write_file", create.clone()).await;
    assert!(replayed(&again) && !file.exists());
    let note = last_text(&again);
    assert!(note.contains("was not done again"), "{note}");
    assert!(
        note.contains("seconds ago") || note.contains("second ago"),
        "{note}"
    );
    assert!(note.contains("\"idem_repeat\": 2"), "{note}");
    let meta = again.meta.as_ref().map(|m| m.0.clone()).unwrap_or_default();
    assert_eq!(meta.get("idem/repeat_with"), Some(&json!(2)), "{meta:?}");

    // As the note says: the person's repeat runs.
    let mut repeat = create.clone();
    repeat["idem_repeat"] = json!(2);
    let repeated = call(&client, None, "write_file", repeat.clone()).await;
    assert!(!replayed(&repeated), "{repeated:?}");
    assert_ne!(
        repeated.is_error,
        Some(true),
        "the upstream took it: {repeated:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("created again"),
        "hello"
    );
    // A retry of that repeat (a re-sent turn) is caught, and says 3.
    std::fs::remove_file(&file).expect("remove");
    let retried = call(&client, None, "write_file", repeat).await;
    assert!(replayed(&retried) && !file.exists());
    let note = last_text(&retried);
    assert!(note.contains("\"idem_repeat\": 3"), "{note}");
    // 1 is the first operation, spelt out.
    let mut one = create;
    one["idem_repeat"] = json!(1);
    assert!(replayed(&call(&client, None, "write_file", one).await));
    client.cancel().await.expect("shut down");
}

/// A client that counts the changes of the tool list it is told of.
#[derive(Clone)]
struct Listener(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _: rmcp::service::NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }
}

#[tokio::test]
async fn a_change_of_the_upstreams_tools_is_followed_and_told_to_the_client() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0);
    let command = gateway.command();
    let (told, mut changes) = tokio::sync::mpsc::unbounded_channel();
    let transport = TokioChildProcess::new(command).expect("start the gateway");
    let client = Listener(told).serve(transport).await.expect("initialize");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(!tools.iter().any(|t| t.name == "stamp"));

    call(&client, None, "grow", json!({})).await;
    let told = tokio::time::timeout(PATIENCE, changes.recv()).await;
    told.expect("told of the change in time").expect("told");
    let tools = client.list_all_tools().await.expect("tools/list");
    let stamp = serde_json::to_value(listed(&tools, "stamp")).expect("json");
    assert_eq!(stamp["_meta"]["idem/contract"]["keyed"], json!(["entry"]));
    let first = call(&client, None, "stamp", json!({"entry": "x"})).await;
    let again = call(&client, None, "stamp", json!({"entry": "x"})).await;
    assert!(!replayed(&first) && replayed(&again), "{again:?}");
    assert_eq!(gateway.lines(), ["stamp x"]);
    client.cancel().await.expect("shut down");
}

#[test]
fn a_gateway_that_cannot_serve_says_why_and_exits() {
    let dir = TempDir::new("gateway");
    let store = dir.0.join("records.sqlite").display().to_string();
    let config = dir.0.join("gateway.toml");
    let gateway = |extra: &[&str], upstream: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
            .args(["gateway", "--store", &store])
            .args(extra)
            .arg("--")
            .args(upstream)
            .stdin(Stdio::null())
            .output()
            .expect("run the gateway");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = gateway(&[], &["/nonexistent/server"]);
    assert!(
        missing.contains("cannot start the upstream server `/nonexistent/server`"),
        "{missing}"
    );
    // An upstream that never answers `initialize` is given --timeout.
    let hung = gateway(&["--timeout", "1s"], &["sleep", "600"]);
    assert!(
        hung.contains("`sleep` did not initialize within 1s"),
        "{hung}"
    );
    let gone = gateway(&[], &["true"]);
    assert!(gone.contains("`true` did not initialize"), "{gone}");
    if !python_sdk() {
        return;
    }
    // Settings the upstream's tools do not fit are refused, named.
    let ledger = dir.0.join("ledger.txt").display().to_string();
    std::fs::write(&config, "[tools.append]\nkey = [\"amont\"]\n").expect("write");
    let config = config.display().to_string();
    let refused = gateway(&["--config", &config], &["python3", LEDGER, &ledger]);
    assert!(
        refused.contains("`append`") && refused.contains("`amont`"),
        "{refused}"
    );
}

/// `ledger.py` serving streamable HTTP on `port`, killed on drop.
struct HttpUpstream(tokio::process::Child);

impl HttpUpstream {
    async fn start(ledger: &Path, port: u16) -> HttpUpstream {
        let child = Command::new("python3")
            .arg(LEDGER)
            .arg(ledger)
            .args(["--http", &port.to_string()])
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the upstream");
        common::listening(port).await;
        HttpUpstream(child)
    }
}

#[tokio::test]
async fn an_upstream_at_a_url_is_served_and_connected_again_after_a_restart() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let port = servers::free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let gateway = Gateway::on_sqlite(&dir.0);
    let mut upstream = HttpUpstream::start(&gateway.ledger(), port).await;
    let mut command = Command::new(env!("CARGO_BIN_EXE_idem"));
    command.args(["gateway", "--store", &gateway.store, "--upstream-url", &url]);
    let client = stdio_client(command).await;
    let first = call(&client, None, "append", json!({"entry": "u"})).await;
    let again = call(&client, None, "append", json!({"entry": "u"})).await;
    assert!(!replayed(&first) && replayed(&again), "{again:?}");

    // The upstream restarts (its sessions with it): the gateway connects
    // again; the recorded write is still replayed, a new one runs.
    upstream.0.kill().await.expect("kill the upstream");
    let _upstream = HttpUpstream::start(&gateway.ledger(), port).await;
    let next = call(&client, None, "append", json!({"entry": "v"})).await;
    assert!(!replayed(&next) && next.is_error != Some(true), "{next:?}");
    let replay = call(&client, None, "append", json!({"entry": "u"})).await;
    assert!(replayed(&replay));
    assert_eq!(gateway.lines(), ["u 0", "v 0"]);
    client.cancel().await.expect("shut down");
}

/// The Python processes whose command line holds each of `needles` (the
/// upstreams serving a ledger, by its path).
fn pythons_with(needles: &[&str]) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).into_owned())
        .filter(|cmdline| {
            let program = cmdline.split('\0').next().unwrap_or_default();
            program.ends_with("python3") && needles.iter().all(|n| cmdline.contains(n))
        })
        .count()
}

#[tokio::test]
async fn over_http_each_session_has_its_own_upstream_ended_with_the_idle_session() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0);
    let ledger = gateway.ledger().display().to_string();
    let server = HttpGateway::start(&gateway, &["--session-idle", "10s"]).await;
    let (first, second) = (server.client("").await, server.client("").await);
    let (first, second) = (first.expect("a session"), second.expect("a session"));
    for client in [&first, &second] {
        let counted = call(client, None, "count", json!({})).await;
        assert_eq!(counted.structured_content, Some(json!({"result": 0})));
    }
    // A child process each.
    assert_eq!(pythons_with(&[&ledger]), 2);

    // Neither says anything more: both sessions end, and their upstreams.
    let started = std::time::Instant::now();
    while pythons_with(&[&ledger]) > 0 {
        assert!(started.elapsed() < PATIENCE, "the idle upstreams live on");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The client is told its session is gone (404), opens another, and
    // is served by an upstream of its own again.
    let counted = call(&first, None, "count", json!({})).await;
    assert_eq!(counted.structured_content, Some(json!({"result": 0})));
    assert_eq!(pythons_with(&[&ledger]), 1);
}

#[tokio::test]
async fn over_http_sessions_past_max_sessions_are_refused_with_retry_after() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0);
    let ledger = gateway.ledger().display().to_string();
    let server = HttpGateway::start(&gateway, &["--max-sessions", "2"]).await;
    let (first, second) = (server.client("").await, server.client("").await);
    let (first, _second) = (first.expect("a session"), second.expect("a session"));
    // A third is answered 503 with when to try again, and nothing starts.
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "third", "version": "0"}}});
    let (head, body) = common::raw::post(addr, &[], &initialize, true).await;
    assert_eq!(common::raw::status(&head), 503, "{head}");
    assert!(
        common::raw::header(&head, "retry-after").is_some(),
        "{head}"
    );
    assert!(body.contains("--max-sessions"), "{body}");
    assert_eq!(pythons_with(&[&ledger]), 2);
    // Once a session ends, another may open.
    first.cancel().await.expect("end the first session");
    common::eventually("no session opened", || async {
        let (head, _) = common::raw::post(addr, &[], &initialize, true).await;
        match common::raw::status(&head) {
            200 => Ok(()),
            _ => Err(head),
        }
    })
    .await;
}

#[tokio::test]
async fn an_upstreams_own_children_end_with_it() {
    if !python_sdk() {
        return;
    }
    // A launcher that leaves a process of its own running, as `npx` leaves
    // its server: the gateway ends the launcher's whole group.
    let dir = TempDir::new("gateway");
    let gateway = Gateway::on_sqlite(&dir.0);
    let marker = dir.0.display().to_string();
    let sleeper = "import time; time.sleep(3600)";
    let ledger = gateway.ledger().display().to_string();
    let script = format!("python3 -c '{sleeper}' {marker} & exec python3 {LEDGER} {ledger}");
    let mut command = Command::new(env!("CARGO_BIN_EXE_idem"));
    command
        .args(["gateway", "--store", &gateway.store, "--", "sh", "-c"])
        .arg(&script);
    let client = stdio_client(command).await;
    let counted = call(&client, None, "count", json!({})).await;
    assert_eq!(counted.structured_content, Some(json!({"result": 0})));
    assert_eq!(
        pythons_with(&[sleeper, &marker]),
        1,
        "the session's sleeper"
    );
    client.cancel().await.expect("shut down");
    let gone = || pythons_with(&[sleeper, &marker]) == 0;
    common::wait_for(gone, "the upstream's child outlived it").await;
}
