//! What a new user meets putting `idem gateway` in front of their own
//! Python server (`tests/upstream/ledger.py`, on the official SDK): a tool
//! without a docstring is served; a default left out is the same operation
//! as the default spelt out; a result an operator records in any shape is
//! answered as a result MCP reads; a setting for a tool the server does not
//! have is refused at start, naming the tool meant, and so is a write's
//! setting on a read tool; HTTP authentication
//! says what it refuses and why, and a session is its principal's alone; a
//! tool that needs a person's approval calls nothing upstream until one is
//! given for that very operation, then once; a condition in the TOML says
//! which calls need one, and one that does not fit the tool stops the
//! gateway at start. And docs/gateway.md's quick start runs as written.

mod common;

use std::process::Stdio;

use common::raw::status;
use common::servers::{self, TempDir};
use common::{idem, listening, python_sdk, raw};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::process::Command;

/// `idem gateway` on a store in `dir`, with `extra` options, in front of
/// `ledger.py`: its command line.
fn gateway(dir: &TempDir, extra: &[&str]) -> Vec<String> {
    common::ledger_gateway(&dir.0, extra)
}

/// A `--config` file in `dir` holding `toml`: its path.
fn config(dir: &TempDir, toml: &str) -> String {
    let path = dir.0.join("gateway.toml");
    std::fs::write(&path, toml).expect("write the configuration");
    path.display().to_string()
}

/// Runs a gateway that must refuse to start: what it says.
fn refused(line: &[String]) -> String {
    let out = std::process::Command::new(&line[0])
        .args(&line[1..])
        .stdin(Stdio::null())
        .output()
        .expect("run the gateway");
    assert!(!out.status.success(), "the gateway started: {line:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}})
}

/// The gateway `line` starts, serving HTTP on `port` once this returns;
/// stopped when dropped.
async fn serving(line: &[String], port: u16) -> tokio::process::Child {
    let gateway = Command::new(&line[0])
        .args(&line[1..])
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the gateway");
    listening(port).await;
    gateway
}

/// An rmcp client of the gateway `line` starts, over stdio.
async fn stdio_client(line: &[String]) -> RunningService<RoleClient, ()> {
    let mut command = Command::new(&line[0]);
    command.args(&line[1..]);
    let transport = TokioChildProcess::new(command).expect("start the gateway");
    ().serve(transport).await.expect("the gateway initializes")
}

/// `tools/call` of `name` with `args`: the result, as JSON.
async fn call(client: &RunningService<RoleClient, ()>, name: &'static str, args: Value) -> Value {
    let args = args.as_object().cloned().expect("an object");
    let params = CallToolRequestParams::new(name).with_arguments(args);
    let result = client.call_tool(params).await.expect("tools/call");
    serde_json::to_value(result).expect("JSON")
}

/// [`call`] in run `run`, named in `_meta` as an agent that resumes its
/// run names it.
async fn call_in_run(
    client: &RunningService<RoleClient, ()>,
    run: &str,
    name: &'static str,
    args: Value,
) -> Value {
    let args = args.as_object().cloned().expect("an object");
    let mut params = CallToolRequestParams::new(name).with_arguments(args);
    let meta = json!({ idem::mcp::RUN_ID_META: run });
    params.meta = Some(meta.as_object().cloned().expect("an object").into());
    let result = client.call_tool(params).await.expect("tools/call");
    serde_json::to_value(result).expect("JSON")
}

#[tokio::test]
async fn a_tool_without_a_docstring_is_served_and_runs_once() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    let client = stdio_client(&gateway(&dir, &[])).await;
    for _ in 0..2 {
        let result = call(&client, "undocumented", json!({"entry": "u"})).await;
        assert_ne!(result["isError"], true, "{result}");
    }
    client.cancel().await.expect("shut down");
    let ledger = std::fs::read_to_string(dir.0.join("ledger.txt")).expect("the ledger");
    assert_eq!(ledger, "undocumented u\n");
}

#[tokio::test]
async fn a_default_left_out_is_the_same_operation_as_the_default_spelt_out() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    let client = stdio_client(&gateway(&dir, &[])).await;
    // `append(entry, amount=0, tags=frozenset())`: its schema says so.
    let spelt = call(
        &client,
        "append",
        json!({"entry": "d", "amount": 0, "tags": []}),
    )
    .await;
    let left_out = call(&client, "append", json!({"entry": "d"})).await;
    client.cancel().await.expect("shut down");
    assert_eq!(spelt["_meta"]["idem/replayed"], Value::Null, "{spelt}");
    assert_eq!(left_out["_meta"]["idem/replayed"], true, "{left_out}");
    let ledger = std::fs::read_to_string(dir.0.join("ledger.txt")).expect("the ledger");
    assert_eq!(ledger, "d 0\n");
}

#[tokio::test]
async fn a_number_written_as_a_string_is_the_same_operation_as_the_number() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    let client = stdio_client(&gateway(&dir, &[])).await;
    // `amount: int`: pydantic reads "15000" as 15000, one refund.
    let string = call(&client, "append", json!({"entry": "r", "amount": "15000"})).await;
    let number = call(&client, "append", json!({"entry": "r", "amount": 15000})).await;
    client.cancel().await.expect("shut down");
    assert_eq!(string["_meta"]["idem/replayed"], Value::Null, "{string}");
    assert_eq!(number["_meta"]["idem/replayed"], true, "{number}");
    let ledger = std::fs::read_to_string(dir.0.join("ledger.txt")).expect("the ledger");
    assert_eq!(ledger, "r 15000\n");
}

/// `append` of `entry` in run `run-1`, named as an agent that resumes its
/// run after a restart names it.
async fn append(client: &RunningService<RoleClient, ()>, entry: &str) -> Value {
    let args = json!({"entry": entry, "amount": 3});
    call_in_run(client, "run-1", "append", args).await
}

#[tokio::test]
async fn a_tool_that_needs_approval_runs_upstream_once_approved() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    let toml = "[tools.append]\napproval = \"required\"\napproval_window = \"10m\"\n";
    let config = config(&dir, toml);
    let line = gateway(&dir, &["--config", &config]);
    let client = stdio_client(&line).await;
    let listed = client.list_all_tools().await.expect("tools/list");
    let contract = listed
        .iter()
        .find(|t| t.name == "append")
        .and_then(|t| t.meta.clone());
    let contract = serde_json::to_value(contract).expect("JSON")["idem/contract"].clone();
    assert_eq!(contract["approval_window_secs"], 600, "{contract}");
    let ledger = dir.0.join("ledger.txt");
    let mut told = Vec::new();
    for _ in 0..2 {
        let asked = append(&client, "a").await;
        assert_eq!(asked["isError"], true, "{asked}");
        let text = asked["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("needs a person's approval"), "{asked}");
        // The key the approver approves, in the text and in `_meta`.
        let key = asked["_meta"][idem::mcp::AWAITING_APPROVAL_META]["key"].clone();
        let key = key.as_str().expect("a key in _meta").to_owned();
        assert!(text.contains(&key), "{asked}");
        told.push(key);
    }
    assert!(!ledger.exists(), "nothing ran upstream before the approval");
    let store = dir.0.join("records.sqlite").display().to_string();
    let waiting = idem(&["approvals", "--json", "--store", &store]);
    let waiting: Value = serde_json::from_str(waiting.trim()).expect("one record");
    assert_eq!(waiting["tool"], "append", "{waiting}");
    // As an object, the defaults the schema gives filled in.
    let arguments = json!({"entry": "a", "amount": 3, "tags": []});
    assert_eq!(waiting["arguments"], arguments, "{waiting}");
    let key = waiting["key"].as_str().expect("a key");
    assert_eq!(
        told,
        [key, key],
        "the key the caller was told is the one waiting"
    );
    let other = append(&client, "b").await;
    assert_eq!(other["isError"], true, "other arguments ask for themselves");
    // Approved from another process, with the gateway (and its upstream)
    // stopped: a new gateway on the same store finds the approval.
    client.cancel().await.expect("shut down");
    // `idem approve` approves on the tool's terms, as the record keeps them.
    idem(&["approve", "--store", &store, "--by", "ops", key]);
    let shown: Value = serde_json::from_str(&idem(&["show", "--store", &store, key, "--json"]))
        .expect("one JSON object");
    let left = shown["expires_in_ms"].as_u64();
    assert!(left.is_some_and(|ms| ms <= 600_000), "the window: {shown}");
    let client = stdio_client(&line).await;
    for _ in 0..2 {
        let ran = append(&client, "a").await;
        assert_ne!(ran["isError"], true, "{ran}");
    }
    client.cancel().await.expect("shut down");
    let ledger = std::fs::read_to_string(ledger).expect("the ledger");
    assert_eq!(ledger, "a 3\n", "one approval, one run upstream");
}

/// The README's refund above a limit, said in the gateway's TOML: with
/// `approval_when`, a call for which the condition holds waits for a
/// person (told for how long an approval stays good), one for which it
/// does not runs at once, and one it cannot decide (a tag compared with a
/// number) waits, the safe way. A condition that names a field the tool
/// does not have, or compares one with a value of another type, stops the
/// gateway at start, naming the tool, the field and where.
#[tokio::test]
async fn a_condition_in_the_toml_decides_which_calls_wait_for_approval() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    let condition = "amount > 10 || tags.exists(t, t > 5)";
    let file = config(
        &dir,
        &format!("[tools.append]\napproval_when = \"{condition}\"\n"),
    );
    let client = stdio_client(&gateway(&dir, &["--config", &file])).await;
    let listed = client.list_all_tools().await.expect("tools/list");
    let append_tool = listed.iter().find(|t| t.name == "append").expect("listed");
    let contract = serde_json::to_value(&append_tool.meta).expect("JSON")["idem/contract"].clone();
    assert_eq!(
        (&contract["approval"], &contract["approval_when"]),
        (&json!("required"), &json!(condition)),
        "{contract}"
    );
    let small = call(&client, "append", json!({"entry": "small", "amount": 3})).await;
    assert_ne!(small["isError"], true, "under the limit it runs: {small}");
    let large = call(&client, "append", json!({"entry": "large", "amount": 50})).await;
    let text = large["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("needs a person's approval") && text.contains("within 1 hour"),
        "{large}"
    );
    let window = &large["_meta"][idem::mcp::AWAITING_APPROVAL_META]["approval_window_secs"];
    assert_eq!(window, 3600, "{large}");
    let odd = json!({"entry": "odd", "amount": 3, "tags": ["x"]});
    let undecided = call(&client, "append", odd).await;
    assert_eq!(
        undecided["isError"], true,
        "undecided, it waits: {undecided}"
    );
    let waits = undecided["content"][0]["text"].as_str().unwrap_or_default();
    assert!(waits.contains("needs a person's approval"), "{undecided}");
    client.cancel().await.expect("shut down");
    let ledger = std::fs::read_to_string(dir.0.join("ledger.txt")).expect("the ledger");
    assert_eq!(ledger, "small 3\n", "only the call under the limit ran");

    for (condition, said) in [
        (
            "amont > 10",
            "1:1: `amont` is not a field of the tool's input (did you mean `amount`?)",
        ),
        (
            "entry == 'a' && amount > 'ten'",
            "1:26: `amount` is a number in the tool's input schema, and is compared with a string",
        ),
    ] {
        let file = config(
            &dir,
            &format!("[tools.append]\napproval_when = \"{condition}\"\n"),
        );
        let message = refused(&gateway(&dir, &["--config", &file]));
        assert!(
            message.contains("[tools.append] approval_when does not fit the tool's input: ")
                && message.contains(said),
            "{message}"
        );
    }
}

#[tokio::test]
async fn a_result_an_operator_records_in_any_shape_is_answered_as_a_tool_result() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    // Global: a later gateway's client (the Python SDK's, below) makes the
    // same operation.
    let toml = "[tools.append_slowly]\non_uncertain = \"refuse\"\nscope = \"global\"\n";
    let config = config(&dir, toml);
    let client = stdio_client(&gateway(&dir, &["--config", &config])).await;
    // A call cancelled in flight: its outcome is unknown.
    let args = json!({"entry": "o"})
        .as_object()
        .cloned()
        .expect("an object");
    let slowly = || {
        let params = CallToolRequestParams::new("append_slowly").with_arguments(args.clone());
        rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params))
    };
    let options = rmcp::service::PeerRequestOptions::no_options();
    let handle = client
        .peer()
        .send_cancellable_request(slowly(), options)
        .await;
    let ledger = dir.0.join("ledger.txt");
    common::wait_for(|| ledger.exists(), "the write never ran").await;
    handle.expect("sent").cancel(None).await.expect("cancel");

    let store = dir.0.join("records.sqlite").display().to_string();
    // The gateway settles the cancelled call unknown once the cancellation
    // reaches it: looked for until then.
    let listed = std::sync::Mutex::new(String::new());
    let unknown = || {
        let pending = idem(&["pending", "--json", "--store", &store]);
        let found = !pending.trim().is_empty();
        *listed.lock().expect("lock") = pending;
        found
    };
    common::wait_for(unknown, "the cancelled call was never recorded unknown").await;
    let pending = listed.into_inner().expect("lock");
    let pending: Value = serde_json::from_str(pending.trim()).expect("one record");
    let key = pending["key"].as_str().expect("a key");
    // As an object, as `idem show --json` gives it.
    assert_eq!(pending["arguments"], json!({"entry": "o"}), "{pending}");
    // `append_slowly -> str`: the SDK's output schema wraps it in
    // `{"result": ..}`, which the unknown record's note keeps. A number is
    // refused, saying the shape; nothing is recorded.
    let misfit = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["resolve", "--store", &store, "--done", "7", key])
        .output()
        .expect("run idem");
    let said = String::from_utf8_lossy(&misfit.stderr);
    assert!(!misfit.status.success(), "{said}");
    assert!(said.contains("wraps it as {\"result\": ..}"), "{said}");
    assert!(said.contains("`result` is 7, not string"), "{said}");
    idem(&["resolve", "--store", &store, "--done", "\"moved 7\"", key]);
    let shown = idem(&["show", "--json", "--store", &store, key]);
    let shown: Value = serde_json::from_str(&shown).expect("one record");
    assert_eq!(shown["result"], json!({"result": "moved 7"}), "{shown}");
    let answered = client
        .peer()
        .send_request(slowly())
        .await
        .expect("the duplicate");
    let answered = serde_json::to_value(answered).expect("JSON");
    assert_eq!(answered["content"][0]["text"], "moved 7", "{answered}");
    assert_eq!(answered["_meta"]["idem/replayed"], true, "{answered}");
    client.cancel().await.expect("shut down");

    // The official Python client checks a result against the tool's
    // output schema: the replay is what the tool would have answered.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/call.py");
    let out = Command::new("python3")
        .args([script, "append_slowly", r#"{"entry": "o"}"#])
        .args(gateway(&dir, &["--config", &config]))
        .output()
        .await
        .expect("run the Python client");
    let replay: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("a JSON result: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        replay,
        json!({
            "_meta": {"idem/replayed": true, "idem/repeat_with": 2},
            "content": [{"type": "text", "text": "moved 7"}],
            "structuredContent": {"result": "moved 7"},
            "isError": false,
            "resultType": "complete",
        }),
        "the golden replay, as the SDK reads it"
    );
}

#[tokio::test]
async fn the_operator_commands_show_a_records_tenant_run_and_arguments_but_hidden_fields() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    let config = config(&dir, "[tools.append]\nhide = [\"tags\"]\n");
    let line = gateway(&dir, &["--config", &config, "--tenant", "acme"]);
    let client = stdio_client(&line).await;
    let args = json!({"entry": "t", "amount": 7, "tags": ["secret-tag"]});
    call(&client, "append", args).await;
    client.cancel().await.expect("shut down");

    let store = dir.0.join("records.sqlite").display().to_string();
    let listed = idem(&["list", "--json", "--store", &store]);
    let listed: Value = serde_json::from_str(listed.trim()).expect("one record");
    assert_eq!(listed["tenant"], "acme", "{listed}");
    assert!(
        listed["run"].is_string(),
        "the stdio connection's run: {listed}"
    );
    assert_eq!(
        listed["arguments"],
        json!({"entry": "t", "amount": 7, "tags": "(hidden)"}),
        "{listed}"
    );
    let key = listed["key"].as_str().expect("a key");
    let shown = idem(&["show", "--store", &store, key]);
    assert!(shown.contains("acme"), "{shown}");
    assert!(shown.contains(r#""amount":7"#), "{shown}");
    let table = idem(&["list", "--store", &store]);
    for text in [&shown, &table] {
        assert!(
            !text.contains("secret-tag"),
            "a hidden field is not shown: {text}"
        );
    }
}

#[test]
fn a_setting_for_a_tool_the_server_does_not_list_is_refused_naming_the_one_meant() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    let config = config(&dir, "[tools.apend]\non_uncertain = \"refuse\"\n");
    let said = refused(&gateway(&dir, &["--config", &config]));
    assert!(said.contains("`apend` (did you mean `append`?)"), "{said}");
    assert!(said.contains("the upstream does not list"), "{said}");
}

#[test]
fn a_write_setting_on_a_read_tool_is_refused_at_start() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    // `count` is annotated read-only: approval on it would never be asked.
    let on_a_read = config(
        &dir,
        "[tools.count]\napproval = \"required\"\nttl = \"1h\"\n",
    );
    let said = refused(&gateway(&dir, &["--config", &on_a_read]));
    assert!(
        said.contains("[tools.count] gives `ttl` and `approval`, which only a write tool uses"),
        "{said}"
    );
    assert!(said.contains("`readOnlyHint: true`"), "{said}");
    assert!(said.contains("`kind = \"write\"`"), "{said}");
    // Said to be a read by the file itself, the same.
    let said_read = config(&dir, "[tools.append]\nkind = \"read\"\nkey = [\"entry\"]\n");
    let said = refused(&gateway(&dir, &["--config", &said_read]));
    assert!(said.contains("[tools.append] gives `key`"), "{said}");
    assert!(said.contains("the table says `kind = \"read\"`"), "{said}");
}

#[test]
fn http_settings_that_would_serve_anyone_or_mix_users_up_are_refused() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    let open = refused(&gateway(&dir, &["--http", "0.0.0.0:0"]));
    assert!(open.contains("without --token"), "{open}");
    let tokens = [
        "--http",
        "127.0.0.1:0",
        "--token",
        "alice=s",
        "--token",
        "bob=s",
    ];
    let shared = refused(&gateway(&dir, &tokens));
    assert!(shared.contains("`alice` and `bob`"), "{shared}");
}

#[tokio::test]
async fn http_authentication_says_what_it_refuses_and_a_session_is_its_principals() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("first-hour");
    let port = servers::free_port();
    let listen = format!("127.0.0.1:{port}");
    let tokens = [
        "--http",
        &listen,
        "--token",
        "alice=a-secret",
        "--token",
        "bob=b-secret",
    ];
    let _gateway = serving(&gateway(&dir, &tokens), port).await;

    let (none, _) = raw::post(&listen, &[], &initialize(1), true).await;
    assert_eq!(status(&none), 401, "{none}");
    let challenge = raw::header(&none, "www-authenticate").expect("a challenge");
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    let wrong = [("authorization", "Bearer not-a-token")];
    let (wrong, _) = raw::post(&listen, &wrong, &initialize(1), true).await;
    assert_eq!(status(&wrong), 401, "{wrong}");
    let challenge = raw::header(&wrong, "www-authenticate").expect("a challenge");
    assert!(challenge.contains("invalid_token"), "{challenge}");

    // The scheme's name is case-insensitive.
    let alice = [("authorization", "bearer a-secret")];
    let (opened, body) = raw::post(&listen, &alice, &initialize(1), true).await;
    assert_eq!(status(&opened), 200, "{opened}");
    assert!(body.contains("protocolVersion"), "{body}");
    let session = raw::header(&opened, "mcp-session-id").expect("a session");

    // Alice's session is not Bob's.
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let bob = [
        ("authorization", "Bearer b-secret"),
        ("mcp-session-id", &session),
    ];
    let (foreign, _) = raw::post(&listen, &bob, &ping, true).await;
    assert_eq!(status(&foreign), 404, "{foreign}");
    let alice = [
        ("authorization", "Bearer a-secret"),
        ("mcp-session-id", &session),
    ];
    let (own, body) = raw::post(&listen, &alice, &ping, true).await;
    assert_eq!(status(&own), 200, "{own}");
    assert!(body.contains(r#""id":2"#), "{body}");
}

/// `approval = "ask"` in the gateway's TOML, with the official Python SDK
/// as the client whose person is asked: by `input_required` on MCP
/// 2026-07-28, by `elicitation/create` on a session. An accepted `append`
/// runs upstream once and its duplicate replays it unasked; a declined one
/// is refused to every duplicate; a dismissed one runs nothing. The
/// question shows the arguments, but a hidden field's value; an answer
/// about one operation brought with a call of another is not taken; two
/// identical calls at once on a session ask once.
/// With `approval_wait`, the call waits for the decision instead of
/// asking the model to call again: the client is sent progress
/// notifications naming the operation, a person decides from another
/// process (`idem approve`, `idem deny`), and the waiting call answers
/// the upstream's result (run once) or the refusal.
#[tokio::test]
async fn a_call_waits_for_the_persons_decision_and_answers_it() {
    if !python_sdk() {
        return;
    }
    for mode in ["auto", "legacy", "http"] {
        waits_for_the_decision(mode).await;
    }
}

/// [`a_call_waits_for_the_persons_decision_and_answers_it`], with the
/// SDK's connection `mode` (MCP 2026-07-28, or a session) on stdio, or
/// over streamable HTTP (`http`).
async fn waits_for_the_decision(mode: &str) {
    let dir = TempDir::new("first-hour");
    let toml = "[tools.append]\napproval = \"required\"\napproval_wait = \"2m\"\n";
    let config = config(&dir, toml);
    let store = dir.0.join("records.sqlite").display().to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/waiter.py");
    let mut client = Command::new("python3");
    client.args([script, mode, &store, env!("CARGO_BIN_EXE_idem")]);
    // Over HTTP the gateway serves on a port of its own; else the client
    // starts it on stdio.
    let mut served = None;
    let log = dir.0.join("gateway.log");
    if mode == "http" {
        let port = servers::free_port();
        let listen = format!("127.0.0.1:{port}");
        let line = gateway(&dir, &["--config", &config, "--http", &listen]);
        let gateway = Command::new(&line[0])
            .args(&line[1..])
            .env("IDEM_LOG", "info")
            .stderr(std::fs::File::create(&log).expect("the gateway's log"))
            .kill_on_drop(true)
            .spawn()
            .expect("start the gateway");
        listening(port).await;
        served = Some(gateway);
        client.arg(format!("http://{listen}/mcp"));
    } else {
        client.args(gateway(&dir, &["--config", &config]));
    }
    let out = client.output().await.expect("run the Python client");
    drop(served);
    assert!(
        out.status.success(),
        "the Python client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("its JSON report");
    let ran = report["approved"]["ok"].as_str().unwrap_or_default();
    assert!(ran.contains("wait-1"), "approved while it waited: {report}");
    let refused = report["refused"]["error"].as_str().unwrap_or_default();
    assert!(
        refused.contains("A person refused this operation") && refused.contains("not now"),
        "{report}"
    );
    assert_eq!(
        (
            &report["approved"]["decided"],
            &report["refused"]["decided"]
        ),
        (&json!(1), &json!(1))
    );
    let told = report["progress"][0].as_str().unwrap_or_default();
    assert!(
        told.starts_with("awaiting approval by a person (operation "),
        "{report}"
    );
    // Cancelled while it waited: the wait ended at the gateway, the
    // operation still awaited, and its approval ran it once.
    let cancelled = &report["cancelled"];
    assert_eq!(
        (&cancelled["cancelled"], &cancelled["approve_rc"]),
        (&json!(true), &json!(0)),
        "{report}"
    );
    let next = cancelled["next"]["ok"].as_str().unwrap_or_default();
    assert!(next.contains("wait-3"), "{report}");
    let logged = match mode {
        "http" => std::fs::read_to_string(&log).expect("the gateway's log"),
        _ => String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        logged.contains("the caller stopped waiting"),
        "the gateway ended the cancelled wait: {logged}"
    );
    let ledger = std::fs::read_to_string(dir.0.join("ledger.txt")).expect("the ledger");
    assert_eq!(
        ledger, "wait-1 0\nwait-3 0\n",
        "the approved calls ran once upstream each, the refused one never"
    );
}

#[tokio::test]
async fn the_person_at_the_client_is_asked_and_the_answer_binds_the_operation() {
    if !python_sdk() {
        return;
    }
    for (mode, protocol) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let dir = TempDir::new("first-hour");
        let config = config(
            &dir,
            "[tools.append]\napproval = \"ask\"\nhide = [\"amount\"]\n",
        );
        let line = gateway(&dir, &["--config", &config]);
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/approver.py");
        let out = Command::new("python3")
            .arg(script)
            .arg(mode)
            .args(&line)
            .output()
            .await
            .expect("run the Python client");
        assert!(
            out.status.success(),
            "the Python client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("its JSON report");
        assert_eq!(report["protocol"], protocol, "{report}");
        assert_eq!(report["approved"]["asked"], 1, "{report}");
        assert!(report["approved"]["ok"].is_string(), "{report}");
        assert_eq!(
            report["approved_again"]["ok"], report["approved"]["ok"],
            "{report}"
        );
        assert_eq!(
            report["approved_again"]["asked"], 1,
            "replayed unasked: {report}"
        );
        let refused = report["refused"]["error"].as_str().unwrap_or_default();
        assert!(
            refused.contains("A person refused this operation"),
            "{report}"
        );
        assert_eq!(report["refused_again"], report["refused"], "{report}");
        let dismissed = report["dismissed"]["error"].as_str().unwrap_or_default();
        assert!(dismissed.contains("needs a person's approval"), "{report}");
        let question = report["questions"][0].as_str().unwrap_or_default();
        assert!(
            question.contains("`append` (Append an entry to the ledger.)")
                && question.contains(r#""entry": "yes-1""#)
                && question.contains(r#""amount": "(hidden)""#),
            "{question}"
        );
        let mut expected = "yes-1 5\n".to_owned();
        if mode == "auto" {
            // An answer about `yes-2` does not decide `yes-3`: it is asked.
            let borrowed = &report["borrowed"];
            assert_eq!(borrowed["first"], "InputRequiredResult", "{borrowed}");
            assert_eq!(borrowed["other"], "InputRequiredResult", "{borrowed}");
        } else {
            // Two identical calls at once: one question, one run.
            let concurrent = &report["concurrent"];
            assert_eq!(concurrent["asked"], 1, "{concurrent}");
            let ran = concurrent["results"].as_array().expect("two results");
            assert_eq!(
                ran.iter().filter(|r| r["ok"].is_string()).count(),
                1,
                "{concurrent}"
            );
            expected.push_str("slow-1 0\n");
        }
        let ledger = std::fs::read_to_string(dir.0.join("ledger.txt")).expect("the ledger");
        assert_eq!(ledger, expected, "{mode}: one approval, one run upstream");
    }
}

/// The MCP project's memory server as it was before it annotated its
/// tools (2025.11.25): none of them says whether it only reads.
const MEMORY: &str = "@modelcontextprotocol/server-memory@2025.11.25";

/// `idem` with `args`, in front of the memory server keeping its graph in
/// `dir`: a command to run.
fn before_memory(dir: &TempDir, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_idem"));
    command
        .args(args)
        .args(["--", "npx", "-y", MEMORY])
        .env("MEMORY_FILE_PATH", dir.0.join("memory.json"))
        .stdin(Stdio::null());
    command
}

/// An rmcp client of the gateway in front of the memory server, with a
/// store and `config` in `dir`.
async fn memory_client(dir: &TempDir, config: &[&str]) -> RunningService<RoleClient, ()> {
    let store = dir.0.join("records.sqlite").display().to_string();
    let gateway = before_memory(dir, &[&["gateway", "--store", &store], config].concat());
    let transport = TokioChildProcess::new(Command::from(gateway)).expect("start the gateway");
    ().serve(transport).await.expect("the gateway initializes")
}

/// Creates entity `name`, then reads the graph: whether it holds `name`.
async fn created_and_read(client: &RunningService<RoleClient, ()>, name: &str) -> bool {
    let entity = json!({"name": name, "entityType": "test", "observations": []});
    call(client, "create_entities", json!({"entities": [entity]})).await;
    let graph = call(client, "read_graph", json!({})).await;
    let entities = graph["structuredContent"]["entities"].as_array().cloned();
    let entities = entities.unwrap_or_else(|| panic!("a graph: {graph}"));
    entities.iter().any(|entity| entity["name"] == name)
}

#[tokio::test]
async fn an_unannotated_servers_reads_are_named_at_start_and_made_reads_as_init_suggests() {
    if !common::npx() {
        return;
    }
    let dir = TempDir::new("unannotated");
    let store = dir.0.join("records.sqlite").display().to_string();
    // At start: one warning naming the tools taken as writes, and the way out.
    let started = before_memory(&dir, &["gateway", "--store", &store])
        .output()
        .expect("run the gateway");
    let said = String::from_utf8_lossy(&started.stderr);
    assert_eq!(said.matches("taken as writes").count(), 1, "{said}");
    assert!(
        said.contains("read_graph, search_nodes, open_nodes"),
        "{said}"
    );
    assert!(
        said.contains(&format!("idem gateway init -- npx -y {MEMORY}")),
        "{said}"
    );

    // Without a configuration, the agent reads the graph as it was before
    // its own write: the second read is the first's replay.
    let client = memory_client(&dir, &[]).await;
    assert!(created_and_read(&client, "first").await);
    assert!(!created_and_read(&client, "second").await, "replayed");
    client.cancel().await.expect("close");

    // `init` marks what to review and suggests the queries as reads.
    let init = before_memory(&dir, &["gateway", "init"])
        .output()
        .expect("init");
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let text = String::from_utf8_lossy(&init.stdout).into_owned();
    let suggested: toml::Table = toml::from_str(&text).expect("init prints TOML");
    assert_eq!(
        suggested["tools"]["create_entities"]["kind"].as_str(),
        Some("write")
    );
    assert_eq!(suggested["tools"]["read_graph"].get("kind"), None, "{text}");
    assert_eq!(text.matches("# kind = \"read\"").count(), 3, "{text}");
    // The person reviewing takes the suggestions.
    let reviewed = config(&dir, &text.replace("# kind = \"read\"", "kind = \"read\""));
    let check = before_memory(&dir, &["gateway", "check", "--config", &reviewed])
        .output()
        .expect("check");
    let checked = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{checked}");
    let line = |tool: &str| {
        let found = checked.lines().find(|l| l.starts_with(&format!("{tool} ")));
        found.unwrap_or_default().to_owned()
    };
    assert!(line("read_graph").contains(" read "), "{checked}");
    assert!(
        line("create_entities").contains(" write (run scope, keyed by entities)"),
        "{checked}"
    );
    assert!(
        checked.contains("9 tools: 3 reads, 6 writes, 0 to review"),
        "{checked}"
    );

    // With it, the gateway starts without a warning and the agent sees
    // its own writes.
    let started = before_memory(&dir, &["gateway", "--store", &store, "--config", &reviewed])
        .output()
        .expect("run the gateway");
    let said = String::from_utf8_lossy(&started.stderr);
    assert!(!said.contains("taken as writes"), "{said}");
    let client = memory_client(&dir, &["--config", &reviewed]).await;
    assert!(created_and_read(&client, "third").await);
    assert!(created_and_read(&client, "fourth").await, "read again");
    client.cancel().await.expect("close");
}

/// The fenced block of `markdown` whose first line is `# NAME`: its
/// lines after that one.
fn doc_file(markdown: &str, name: &str) -> String {
    let start = markdown
        .find(&format!("```python\n# {name}\n"))
        .unwrap_or_else(|| panic!("docs/gateway.md has no block `# {name}`"));
    let body = &markdown[start..];
    let body = &body[body.find('\n').expect("a line") + 1..];
    let body = &body[body.find('\n').expect("a line") + 1..];
    body[..body.find("```").expect("the block ends")].to_owned()
}

#[tokio::test]
async fn the_quick_start_for_a_python_server_runs_as_written() {
    if !python_sdk() {
        return;
    }
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/gateway.md"))
        .expect("read docs/gateway.md");
    let dir = TempDir::new("quick-start");
    for name in ["refunds.py", "try_it.py"] {
        std::fs::write(dir.0.join(name), doc_file(&docs, name)).expect("write the file");
    }
    // The output the page shows, after its `$ python3 try_it.py`.
    let shown = docs
        .split("$ python3 try_it.py\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the page shows the output");
    // `idem` as the page runs it: on the PATH.
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_idem"))
        .parent()
        .expect("the binary's folder");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("python3")
        .arg("try_it.py")
        .current_dir(&dir.0)
        .env("PATH", path)
        .stderr(Stdio::inherit())
        .output()
        .await
        .expect("run try_it.py");
    assert!(out.status.success(), "try_it.py failed");
    assert_eq!(String::from_utf8_lossy(&out.stdout), shown);
}
