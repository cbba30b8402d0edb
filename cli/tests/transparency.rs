//! `idem gateway` is transparent: in front of the MCP project's own
//! `server-everything`, which exercises every feature of the protocol, the
//! official Python SDK's client sees through the gateway what it sees
//! directly (capabilities, instructions, tools, prompts, resources,
//! completion, ping, results of every shape, sampling, elicitation and
//! roots asked of it mid-call, progress, logging, resource subscriptions,
//! a task), on both transports and both kinds of upstream; only a write
//! repeated differs: through the gateway it runs once.
//!
//! `tests/upstream/everything.py` makes the checks and prints what it saw;
//! rmcp's client makes the listings and reads over HTTP too.

mod common;

use std::process::Stdio;

use common::servers::{self, TempDir};
use common::{EVERYTHING, Group, listening, npx, python_json, python_sdk};
use rmcp::ServiceExt;
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::process::Command;

/// The client's checks.
const CHECKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/everything.py");

/// What the client saw of the server it reaches with `target` (a command
/// line, or `--url URL`).
async fn report(target: &[&str]) -> Value {
    report_with_root(target, "file:///idem/everything-root").await
}

/// [`report`], by a client whose one root is `root`.
async fn report_with_root(target: &[&str], root: &str) -> Value {
    python_json(CHECKS, target, &[("EVERYTHING_ROOT", root)]).await
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

/// Starts `server-everything` serving streamable HTTP on `port`: its
/// process group, killed on drop.
async fn http_everything(port: u16) -> Group {
    let mut command = Command::new("npx");
    command
        .args(["-y", EVERYTHING, "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let server = Group::spawn(command);
    listening(port).await;
    server
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
    let (rmcp_direct, rmcp_through) = tokio::join!(rmcp_view(&upstream), rmcp_view(&through));
    assert!(
        rmcp_direct["prompts"]
            .as_array()
            .is_some_and(|p| p.len() == 4)
    );
    assert_eq!(
        rmcp_direct, rmcp_through,
        "rmcp's client sees another server"
    );
    let (direct, through) = (["--url", &upstream], ["--url", &through]);
    // Two clients through the gateway at once, each with a root of its
    // own: each session has an upstream session of its own, and each
    // client is asked for its own roots, and sees its own log and updates.
    let (direct, through, other) = tokio::join!(
        report(&direct),
        report(&through),
        report_with_root(&through, "file:///idem/another-root")
    );
    assert_everything_works(&direct);
    assert_the_same_but_the_repeated_write(&direct, &through);
    assert_the_same_but_the_repeated_write(&direct, &other);
}

/// What rmcp's client sees of the server at `url`: its capabilities and
/// instructions, its tools', prompts' and resources' listings, a prompt, a
/// resource's type and a completion.
async fn rmcp_view(url: &str) -> Value {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    let client = ().serve(transport).await.expect("initialize");
    let info = client.peer_info().expect("the server's info");
    let tools = client.list_all_tools().await.expect("tools/list");
    let prompts = client.list_all_prompts().await.expect("prompts/list");
    let arguments = json!({"city": "Paris"})
        .as_object()
        .cloned()
        .expect("an object");
    let prompt = GetPromptRequestParams::new("args-prompt").with_arguments(arguments);
    let prompt = client.get_prompt(prompt).await.expect("prompts/get");
    let resources = client.list_all_resources().await.expect("resources/list");
    let templates = client
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    let read = ReadResourceRequestParams::new("demo://resource/dynamic/blob/2");
    let read = client.read_resource(read).await.expect("resources/read");
    let completed = client
        .complete_prompt_simple("completable-prompt", "department", "S")
        .await
        .expect("completion/complete");
    client.cancel().await.expect("shut down");
    fn json<T: serde::Serialize>(value: &T) -> Value {
        serde_json::to_value(value).expect("JSON")
    }
    fn names<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
        items
            .iter()
            .map(|item| json(item)["name"].clone())
            .collect()
    }
    json!({
        "capabilities": json(&info.capabilities),
        "instructions": info.instructions,
        "tools": names(&tools),
        "prompts": names(&prompts),
        "prompt": json(&prompt),
        "resources": names(&resources),
        "templates": names(&templates),
        "read": json(&read)["contents"][0]["mimeType"],
        "completed": completed,
    })
}
