//! Real MCP clients talking to `integrations/examples/mcp_server.rs` as a separate
//! process: rmcp's over stdio and streamable HTTP (sessions, principals,
//! stateless requests), and the official Python SDK in its default mode.

#[path = "support/example.rs"]
mod examples;
#[path = "../../tests/support/skip.rs"]
mod support;

use std::path::PathBuf;
use std::process::Stdio;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

type Client = RunningService<RoleClient, ()>;

/// The MCP server example's binary.
fn example() -> PathBuf {
    examples::example("mcp_server")
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("tools/call {name}: {e}"))
}

async fn call_in_run(client: &Client, run: &str, name: &str, arguments: Value) -> CallToolResult {
    call_with_meta(client, json!({ "idem/run_id": run }), name, arguments).await
}

async fn call_with_meta(
    client: &Client,
    meta: Value,
    name: &str,
    arguments: Value,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments));
    params.meta = Some(args(meta).into());
    client
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("tools/call {name}: {e}"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

async fn charges_made(client: &Client) -> u64 {
    let out = call(client, "charges_made", json!({})).await;
    assert_eq!(out.is_error, Some(false), "{out:?}");
    text(&out).parse().expect("a count")
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name} in {tools:?}"))
}

/// What both transports must show: the tools as listed, one execution for
/// a repeated write, errors where MCP puts them.
/// The example's tools, by name.
const TOOLS: [&str; 6] = [
    "charge_card",
    "charges_made",
    "lookup_order",
    "refund",
    "refunds_made",
    "subscribe",
];

async fn exercise(client: &Client) {
    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    names.sort_unstable();
    assert_eq!(names, TOOLS);
    let charge = tool(&tools, "charge_card");
    let annotations = charge.annotations.as_ref().expect("annotations");
    assert_eq!(annotations.read_only_hint, Some(false));
    // Replayed within its run only: a reconnecting client runs it again.
    assert_eq!(annotations.idempotent_hint, Some(false));
    let subscribe = tool(&tools, "subscribe").annotations.as_ref();
    assert_eq!(subscribe.and_then(|a| a.idempotent_hint), Some(true));
    assert_eq!(annotations.destructive_hint, Some(false));
    assert_eq!(annotations.open_world_hint, Some(true));
    assert_eq!(
        charge.input_schema.get("required"),
        Some(&json!(["order_id", "amount"]))
    );
    // The receipt is a struct with a schema: MCP's outputSchema.
    let output = charge.output_schema.as_ref().expect("outputSchema");
    assert_eq!(output.get("type"), Some(&json!("object")));
    assert_eq!(
        output.get("required"),
        Some(&json!([
            "charge_id",
            "order_id",
            "amount",
            "idempotency_key"
        ]))
    );
    let lookup = tool(&tools, "lookup_order");
    // A free-form JSON result has none.
    assert!(lookup.output_schema.is_none());
    assert_eq!(
        lookup.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );

    // The same write twice (the model retrying, arguments reordered): one
    // execution, the same result.
    let first = call(
        client,
        "charge_card",
        json!({"order_id": "o-1", "amount": 4200}),
    )
    .await;
    let second = call(
        client,
        "charge_card",
        json!({"amount": 4200, "order_id": "o-1"}),
    )
    .await;
    assert_eq!(first.is_error, Some(false), "{first:?}");
    let receipt = first
        .structured_content
        .clone()
        .expect("structured content");
    assert_eq!(receipt["charge_id"], "ch_0001");
    assert!(
        receipt["idempotency_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("idem:"))
    );
    assert_eq!(second.structured_content, Some(receipt.clone()));
    assert_eq!(text(&first), text(&second));
    assert_eq!(charges_made(client).await, 1);

    // Another order runs.
    let other = call(
        client,
        "charge_card",
        json!({"order_id": "o-2", "amount": 4200}),
    )
    .await;
    assert_eq!(
        other.structured_content.as_ref().map(|r| &r["charge_id"]),
        Some(&json!("ch_0002"))
    );

    // A run named in `_meta` is its own scope: the first order again runs
    // once in it, and is replayed within it.
    let in_run = call_in_run(
        client,
        "run-b",
        "charge_card",
        json!({"order_id": "o-1", "amount": 4200}),
    )
    .await;
    let again = call_in_run(
        client,
        "run-b",
        "charge_card",
        json!({"order_id": "o-1", "amount": 4200}),
    )
    .await;
    let id = in_run
        .structured_content
        .as_ref()
        .map(|r| r["charge_id"].clone());
    assert_eq!(id, Some(json!("ch_0003")));
    assert_eq!(again.structured_content, in_run.structured_content);
    // The replay says so in `_meta`; the first answer does not.
    let replayed = |r: &CallToolResult| {
        r.meta
            .as_ref()
            .and_then(|m| m.0.get("idem/replayed"))
            .cloned()
    };
    assert_eq!(
        (replayed(&in_run), replayed(&again)),
        (None, Some(json!(true)))
    );
    assert_ne!(
        in_run
            .structured_content
            .as_ref()
            .map(|r| &r["idempotency_key"]),
        Some(&receipt["idempotency_key"])
    );
    assert_eq!(charges_made(client).await, 3);

    // An operation key the client chose (`_meta["idem/operation_key"]`):
    // keyed on it, the arguments checked.
    let keyed = json!({ "idem/operation_key": "checkout-7f3a" });
    let order = json!({"order_id": "o-9", "amount": 100});
    let by_key = call_with_meta(client, keyed.clone(), "charge_card", order.clone()).await;
    let by_key_again = call_with_meta(client, keyed.clone(), "charge_card", order).await;
    let id = by_key
        .structured_content
        .as_ref()
        .map(|r| r["charge_id"].clone());
    assert_eq!(id, Some(json!("ch_0004")), "{by_key:?}");
    assert_eq!(by_key_again.structured_content, by_key.structured_content);
    let changed = json!({"order_id": "o-9", "amount": 999});
    let conflict = call_with_meta(client, keyed, "charge_card", changed).await;
    assert_eq!(conflict.is_error, Some(true), "{conflict:?}");
    // The client is told which field differs, never its value.
    let told = text(&conflict);
    assert!(
        told.contains("another `amount`") && !told.contains("999"),
        "{told}"
    );
    assert_eq!(charges_made(client).await, 4);

    // Bad arguments: a tool result with isError and the field named.
    let bad = call(
        client,
        "charge_card",
        json!({"order_id": "o-3", "amount": "lots"}),
    )
    .await;
    assert_eq!(bad.is_error, Some(true), "{bad:?}");
    assert!(text(&bad).contains("`amount`"), "{}", text(&bad));
    assert_eq!(charges_made(client).await, 4);

    // An unknown tool: a protocol error.
    match client
        .call_tool(CallToolRequestParams::new("refund_all"))
        .await
    {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code.0, -32602, "{e:?}");
            assert!(e.message.contains("refund_all"), "{e:?}");
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }

    // `approval = "ask"`, and a client that cannot ask its person: the
    // refund waits for an approval, and nothing ran.
    let refund = call(client, "refund", json!({"order_id": "o-1", "amount": 5})).await;
    assert_eq!(refund.is_error, Some(true), "{refund:?}");
    assert!(
        text(&refund).contains("needs a person's approval"),
        "{refund:?}"
    );
    // The key the approver approves, in the text the model reads (so the
    // user can pass it on) and in `_meta`.
    let meta = serde_json::to_value(&refund.meta).expect("JSON");
    let waiting = &meta[idem::mcp::AWAITING_APPROVAL_META];
    assert_eq!(waiting["tool"], "refund", "{refund:?}");
    let key = waiting["key"].as_str().expect("a key");
    assert!(
        key.starts_with("idem:") && text(&refund).contains(key),
        "{refund:?}"
    );
    let made = call(client, "refunds_made", json!({})).await;
    assert_eq!(text(&made), "0");
}

#[tokio::test]
async fn a_real_client_over_stdio_sees_one_execution_per_operation() {
    let mut command = Command::new(example());
    command.stderr(Stdio::null());
    let transport = TokioChildProcess::new(command).expect("spawn the example");
    let client = ().serve(transport).await.expect("initialize");
    let info = client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("idem-shop")
    );
    exercise(&client).await;
    client.cancel().await.expect("shut down");
}

/// Starts the example on streamable HTTP (with `extra` arguments); its URL,
/// and the process.
async fn http_example(extra: &[&str]) -> (String, tokio::process::Child) {
    let mut server = Command::new(example())
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the example");
    let stderr = server.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("read the example's stderr")
            .expect("the example exited before listening");
        if let Some(url) = line.strip_prefix("mcp_server: listening on ") {
            break url.to_owned();
        }
    };
    // Keep reading: the example logs every execution to stderr, and a
    // closed pipe would fail its writes.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (url, server)
}

#[tokio::test]
async fn a_real_client_over_streamable_http_sees_one_execution_per_operation() {
    let (url, mut server) = http_example(&[]).await;
    let client = ().serve(StreamableHttpClientTransport::from_uri(url)).await.expect("initialize");
    exercise(&client).await;
    client.cancel().await.expect("shut down");
    server.kill().await.expect("stop the example");
}

/// One stateless MCP 2026-07-28 request (no session), over a plain HTTP/1.1
/// connection; the response body.
async fn stateless_call(
    url: &str,
    token: Option<&str>,
    name: &str,
    arguments: Value,
    run: Option<&str>,
) -> String {
    stateless_call_with(url, token, name, arguments, run, &[]).await
}

/// [`stateless_call`] with `extra` headers (an `Mcp-Session-Id` of the
/// client's choosing, say).
async fn stateless_call_with(
    url: &str,
    token: Option<&str>,
    name: &str,
    arguments: Value,
    run: Option<&str>,
    extra: &[(&str, &str)],
) -> String {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(run) = run {
        meta["idem/run_id"] = json!(run);
    }
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta},
    });
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", name),
    ];
    let bearer = token.map(|t| format!("Bearer {t}"));
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer));
    }
    headers.extend_from_slice(extra);
    post(url, &headers, &body).await
}

/// POSTs `body` to `url` over a plain HTTP/1.1 connection with `headers`
/// besides those of an MCP client; the whole response, status line and
/// headers included.
async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> String {
    let host = host_of(url);
    let mut all = vec![
        ("Host", host),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    send(url, &all, &body.to_string()).await
}

/// `host:port` of `url`.
fn host_of(url: &str) -> &str {
    let rest = url.strip_prefix("http://").expect("an http URL");
    rest.split_once('/').expect("a path").0
}

/// POSTs `body` to `url` with exactly `headers` (and its length); the
/// whole response.
async fn send(url: &str, headers: &[(&str, &str)], body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = host_of(url);
    let path = &url[url.find(host).expect("a host") + host.len()..];
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
}

#[tokio::test]
async fn requests_a_web_page_could_send_are_refused_and_charge_nothing() {
    let (url, mut server) = http_example(&[]).await;
    let host = host_of(&url);
    let charge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "charge_card", "arguments": {"order_id": "o-web", "amount": 100},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    // Another site's "simple" POST (text/plain, sent without a preflight).
    let simple = [
        ("Host", host),
        ("Origin", "http://evil.example"),
        ("Content-Type", "text/plain"),
    ];
    let refused = send(&url, &simple, &charge).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    // The same from a page that sends no Origin: not JSON.
    let plain = [
        ("Host", host),
        ("Content-Type", "text/plain"),
        ("Accept", "*/*"),
    ];
    let refused = send(&url, &plain, &charge).await;
    assert!(refused.starts_with("HTTP/1.1 4"), "{refused}");
    // A JSON POST of another site's (after a preflight it would not pass),
    // and DNS rebinding: another name for 127.0.0.1 in Host.
    let json = [
        ("Host", host),
        ("Origin", "http://evil.example"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let refused = send(&url, &json, &charge).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    let rebound = [
        ("Host", "evil.example"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let refused = send(&url, &rebound, &charge).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    // Nothing was charged; a client's own call is served.
    let count = stateless_call(&url, None, "charges_made", json!({}), None).await;
    assert!(count.contains(r#""text":"0""#), "{count}");
    server.kill().await.expect("stop the example");
}

/// A session opened by hand (`initialize`, then `notifications/initialized`):
/// the `Mcp-Session-Id` the server issued.
async fn open_session(url: &str) -> String {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "forger", "version": "1"},
        },
    });
    let response = post(url, &[], &initialize).await;
    let id = response
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {response}"));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let headers = [
        ("Mcp-Session-Id", id.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let accepted = post(url, &headers, &initialized).await;
    assert!(accepted.starts_with("HTTP/1.1 202"), "{accepted}");
    id
}

/// A `tools/call` in the session `id`; the response.
async fn session_call(url: &str, id: &str, name: &str, arguments: Value, run: &str) -> String {
    let body = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": {"idem/run_id": run}},
    });
    let headers = [
        ("Mcp-Session-Id", id),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    post(url, &headers, &body).await
}

/// The charge id in a stateless response's text.
fn charge_of(response: &str) -> &str {
    let at = response
        .find("ch_")
        .unwrap_or_else(|| panic!("no charge in {response}"));
    &response[at..at + 7]
}

#[tokio::test]
async fn a_stateless_http_write_is_scoped_to_its_caller() {
    let (url, mut server) = http_example(&["--token", "alice=tok-a", "--token", "bob=tok-b"]).await;
    let (alice, bob) = (Some("tok-a"), Some("tok-b"));
    let args = json!({"order_id": "o-9", "amount": 100});
    // No bearer token: refused by the authentication middleware.
    let anonymous = stateless_call(&url, None, "charge_card", args.clone(), None).await;
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
    // No session, no run id: the caller is the scope. Alice's repeat is
    // replayed; Bob is another caller.
    let first = stateless_call(&url, alice, "charge_card", args.clone(), None).await;
    let again = stateless_call(&url, alice, "charge_card", args.clone(), None).await;
    let bobs = stateless_call(&url, bob, "charge_card", args.clone(), None).await;
    assert_eq!(
        [charge_of(&first), charge_of(&again), charge_of(&bobs)],
        ["ch_0001", "ch_0001", "ch_0002"]
    );
    // A run id names another operation of hers, replayed in its run.
    let in_run = stateless_call(&url, alice, "charge_card", args.clone(), Some("run-s")).await;
    let replay = stateless_call(&url, alice, "charge_card", args, Some("run-s")).await;
    assert_eq!(
        [charge_of(&in_run), charge_of(&replay)],
        ["ch_0003", "ch_0003"]
    );
    let count = stateless_call(&url, alice, "charges_made", json!({}), None).await;
    assert!(count.contains(r#""text":"3""#), "{count}");
    server.kill().await.expect("stop the example");
}

#[tokio::test]
async fn an_anonymous_stateless_write_naming_a_run_is_refused() {
    // Nobody vouches for who sent it: a run id alone would let any client
    // join any run.
    let (url, mut server) = http_example(&[]).await;
    let args = json!({"order_id": "o-9", "amount": 100});
    let refused = stateless_call(&url, None, "charge_card", args.clone(), Some("run-s")).await;
    assert!(refused.contains(r#""isError":true"#), "{refused}");
    assert!(refused.contains("cannot be bound to a caller"), "{refused}");
    let count = stateless_call(&url, None, "charges_made", json!({}), None).await;
    assert!(count.contains(r#""text":"0""#), "{count}");
    // Without a run id, anonymous callers are one caller: the repeat is
    // replayed (the documented trade-off of a server without
    // authentication).
    let first = stateless_call(&url, None, "charge_card", args.clone(), None).await;
    let again = stateless_call(&url, None, "charge_card", args, None).await;
    assert_eq!(
        [charge_of(&first), charge_of(&again)],
        ["ch_0001", "ch_0001"]
    );
    // A global tool's key ignores the run: its repeat, from anyone, is
    // replayed.
    let email = json!({"email": "a@example.com"});
    for _ in 0..2 {
        let once = stateless_call(&url, None, "subscribe", email.clone(), None).await;
        assert!(once.contains("subscription 1 for a@example.com"), "{once}");
    }
    server.kill().await.expect("stop the example");
}

/// A session id is a capability only on the session protocol, where the
/// server checks that it issued it and that it is live: a stateless
/// request carrying one (another client's, or one made up) reaches none of
/// that session's records, and an anonymous write naming a run stays
/// refused.
#[tokio::test]
async fn a_stateless_request_is_never_bound_to_the_session_it_names() {
    let (url, mut server) = http_example(&[]).await;
    let order = json!({"order_id": "o-7", "amount": 700});
    let victim = open_session(&url).await;
    let charged = session_call(&url, &victim, "charge_card", order.clone(), "run-v").await;
    assert_eq!(charge_of(&charged), "ch_0001");
    let again = session_call(&url, &victim, "charge_card", order.clone(), "run-v").await;
    assert_eq!(charge_of(&again), "ch_0001", "replayed in its own session");
    // A stateless charge carrying the session id `id`.
    let forged = async |id: &str, run: Option<&str>| {
        let header = [("Mcp-Session-Id", id)];
        stateless_call_with(&url, None, "charge_card", order.clone(), run, &header).await
    };
    // The victim's id, naming the victim's run: refused.
    let stolen = forged(&victim, Some("run-v")).await;
    assert!(stolen.contains("cannot be bound to a caller"), "{stolen}");
    // ... and naming none: the anonymous callers' run, not the session's.
    let unscoped = forged(&victim, None).await;
    assert_eq!(charge_of(&unscoped), "ch_0002", "{unscoped}");
    // A made-up id: a write naming a run is refused, and nothing is
    // recorded under the made-up session for anyone to be replayed.
    for _ in 0..2 {
        let refused = forged("made-up", Some("run-x")).await;
        assert!(refused.contains("cannot be bound to a caller"), "{refused}");
    }
    let count = stateless_call(&url, None, "charges_made", json!({}), None).await;
    assert!(count.contains(r#""text":"2""#), "{count}");
    server.kill().await.expect("stop the example");
}

#[tokio::test]
async fn a_server_can_refuse_stateless_writes_without_a_run_id() {
    let (url, mut server) = http_example(&["--refuse-stateless-writes"]).await;
    let args = json!({"order_id": "o-9", "amount": 100});
    let refused = stateless_call(&url, None, "charge_card", args, None).await;
    assert!(refused.contains(r#""isError":true"#), "{refused}");
    assert!(refused.contains("idem/run_id"), "{refused}");
    let count = stateless_call(&url, None, "charges_made", json!({}), None).await;
    assert!(count.contains(r#""text":"0""#), "{count}");
    server.kill().await.expect("stop the example");
}

/// An rmcp client over streamable HTTP, with a bearer token if given.
async fn http_client(url: &str, token: Option<&str>) -> Client {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize")
}

/// The charge id of a `charge_card` result.
fn charge_id(result: &CallToolResult) -> String {
    let receipt = result.structured_content.as_ref();
    let id = receipt.and_then(|r| r["charge_id"].as_str());
    id.unwrap_or_else(|| panic!("not a receipt: {result:?}"))
        .to_owned()
}

#[tokio::test]
async fn two_principals_naming_the_same_run_never_see_each_others_records() {
    let (url, mut server) = http_example(&["--token", "alice=tok-a", "--token", "bob=tok-b"]).await;
    let order = json!({"order_id": "o-1", "amount": 4200});
    let alice = http_client(&url, Some("tok-a")).await;
    let bob = http_client(&url, Some("tok-b")).await;
    let a = call_in_run(&alice, "run-42", "charge_card", order.clone()).await;
    let b = call_in_run(&bob, "run-42", "charge_card", order.clone()).await;
    // Bob's call ran: he did not receive Alice's recorded charge.
    assert_eq!(charge_id(&a), "ch_0001");
    assert_eq!(charge_id(&b), "ch_0002");
    assert_ne!(
        a.structured_content.as_ref().map(|r| &r["idempotency_key"]),
        b.structured_content.as_ref().map(|r| &r["idempotency_key"])
    );
    // Each is replayed its own, from another session too: the run is the
    // principal's, not the session's.
    let alice_again = http_client(&url, Some("tok-a")).await;
    let a2 = call_in_run(&alice_again, "run-42", "charge_card", order.clone()).await;
    let b2 = call_in_run(&bob, "run-42", "charge_card", order).await;
    assert_eq!(charge_id(&a2), "ch_0001");
    assert_eq!(charge_id(&b2), "ch_0002");
    assert_eq!(charges_made(&bob).await, 2);
    // Without a token there is no session at all.
    let transport = StreamableHttpClientTransport::from_uri(url.as_str());
    assert!(
        ().serve(transport).await.is_err(),
        "an unauthenticated client got in"
    );
    for client in [alice, alice_again, bob] {
        client.cancel().await.expect("shut down");
    }
    server.kill().await.expect("stop the example");
}

#[tokio::test]
async fn anonymous_sessions_naming_the_same_run_never_see_each_others_records() {
    let (url, mut server) = http_example(&[]).await;
    let order = json!({"order_id": "o-1", "amount": 4200});
    let first = http_client(&url, None).await;
    let second = http_client(&url, None).await;
    let one = call_in_run(&first, "run-42", "charge_card", order.clone()).await;
    let two = call_in_run(&second, "run-42", "charge_card", order.clone()).await;
    assert_eq!(charge_id(&one), "ch_0001");
    assert_eq!(charge_id(&two), "ch_0002");
    // Within a session, the named run still replays.
    let again = call_in_run(&second, "run-42", "charge_card", order).await;
    assert_eq!(charge_id(&again), "ch_0002");
    assert_eq!(charges_made(&first).await, 2);
    for client in [first, second] {
        client.cancel().await.expect("shut down");
    }
    server.kill().await.expect("stop the example");
}

/// The MCP Python SDK the test drives the example with, pinned.
const PYTHON_SDK: &str = "mcp==2.3.0";

/// Whether the MCP Python SDK is here; under `CI=true` its absence fails
/// the test, saying how to install it.
fn python_sdk() -> bool {
    let has_sdk = std::process::Command::new("python3")
        .args(["-c", "import mcp"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_sdk {
        let how = format!("Install it: python3 -m pip install '{PYTHON_SDK}' (.ci/run does).");
        support::unavailable("Python 3 with the MCP Python SDK", &how);
    }
    has_sdk
}

/// Runs `script` (in tests/python) with `args`: its JSON report.
async fn python(script: &str, args: &[&str]) -> Value {
    let script = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .await
        .expect("run the Python client");
    assert!(
        out.status.success(),
        "the Python client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client's JSON report")
}

#[tokio::test]
async fn the_official_python_sdk_in_its_default_mode_writes_once() {
    if !python_sdk() {
        return;
    }
    let (url, mut server) = http_example(&[]).await;
    let report = python("mcp_client.py", &[&url]).await;
    server.kill().await.expect("stop the example");
    // Its default: the stateless protocol, no session, no run id.
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert_eq!(report["tools"], json!(TOOLS));
    assert_eq!(report["first"]["charge_id"], "ch_0001", "{report}");
    assert_eq!(report["again"], report["first"], "the repeat is replayed");
    assert_eq!(report["count"], "1", "{report}");
}

/// `approval = "ask"`, with the official Python SDK as the client whose
/// person is asked: by `input_required` on MCP 2026-07-28 (the SDK's
/// default), by `elicitation/create` on a session. Each refund the person
/// accepts runs once, and its duplicates replay it without asking again;
/// other arguments are asked for on their own; a declined one is refused
/// to every duplicate; a dismissed one runs nothing and still waits; an
/// answer about one refund brought with a call of another is not taken;
/// two identical calls at once on a session ask once.
#[tokio::test]
async fn the_person_at_an_mcp_client_approves_each_operation_once() {
    if !python_sdk() {
        return;
    }
    let (url, mut server) = http_example(&[]).await;
    let stateless = python("mcp_approval.py", &[&url, "auto"]).await;
    // A session: the calls are in the session's run, so the same refunds
    // are other operations, asked for again.
    let session = python("mcp_approval.py", &[&url, "legacy"]).await;
    server.kill().await.expect("stop the example");

    assert_eq!(stateless["protocol"], "2026-07-28", "{stateless}");
    assert_eq!(session["protocol"], "2025-11-25", "{session}");
    for (report, first) in [(&stateless, "rf_0001"), (&session, "rf_0003")] {
        let approved = report["approved"]["ok"].as_str().unwrap_or_default();
        assert!(approved.starts_with(first), "{report}");
        assert_eq!(report["approved"]["asked"], 1, "{report}");
        assert_eq!(report["approved_again"], report["approved"], "{report}");
        assert_eq!(report["other_amount"]["asked"], 2, "{report}");
        let refused = report["refused"]["error"].as_str().unwrap_or_default();
        assert!(
            refused.contains("A person refused this operation"),
            "{report}"
        );
        assert_eq!(report["refused_again"], report["refused"], "{report}");
        let dismissed = report["dismissed"]["error"].as_str().unwrap_or_default();
        assert!(dismissed.contains("needs a person's approval"), "{report}");
        assert_eq!(report["dismissed"]["asked"], 4, "{report}");
        // The person read what the refund does, with its arguments.
        let question = report["questions"][0].as_str().unwrap_or_default();
        assert!(question.contains("`refund` (Refund an order"), "{question}");
        assert!(question.contains(r#""order_id": "yes-1""#), "{question}");
    }
    assert_eq!(stateless["refunds"], "2", "{stateless}");
    assert_eq!(session["refunds"], "4", "{session}");
    // Two identical calls at once on a session: one question, one run.
    let concurrent = &session["concurrent"];
    assert_eq!(concurrent["asked"], 1, "{concurrent}");
    let ran = concurrent["results"].as_array().expect("two results");
    assert_eq!(
        ran.iter().filter(|r| r["ok"].is_string()).count(),
        1,
        "{concurrent}"
    );
    let borrowed = &stateless["borrowed"];
    assert_eq!(borrowed["other"], "InputRequiredResult", "{borrowed}");
    let asks = borrowed["other_asks_about"][0].as_str().unwrap_or_default();
    assert!(asks.contains(r#""order_id": "yes-3""#), "{borrowed}");
}

/// How many accounts [`close_account`] closed.
static CLOSED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Close an account, once a person approves; the call waits for them.
#[idem::prelude::write_tool(approval = "required", approval_wait = "10m")]
async fn close_account(account: String, _ctx: &idem::WriteCtx) -> Result<String, String> {
    CLOSED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Ok(format!("closed {account}"))
}

/// A client's cancellation of a call that waits for a person ends the
/// wait at the library's MCP server, and the operation still awaits:
/// approved then, the next call runs it, as a first run, not a replay (a
/// wait that went on would have run it first, woken by the approval).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_cancellation_ends_the_wait_and_the_operation_still_awaits() {
    use idem::{IdemStore, MemoryStore, Registry};
    use std::sync::Arc;

    let store = Arc::new(MemoryStore::new());
    let registry = |store: Arc<MemoryStore>| {
        Registry::builder(())
            .store(store)
            .tool(close_account)
            .build()
            .expect("registry")
    };
    let person = registry(store.clone());
    let server = registry(store.clone()).into_mcp_server();
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(theirs).await {
            let _ = running.waiting().await;
        }
    });
    let client: Client = ().serve(ours).await.expect("initialize");
    let arguments = json!({"account": "a-1"});
    let (key, _) = person
        .identify("r-cancel", "close_account", arguments.clone())
        .expect("identify")
        .expect("a write");
    let awaits = async {
        while store.inspect(&key).await.ok().flatten().is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    // The call is dropped once its operation awaits: the client sends
    // `notifications/cancelled`.
    tokio::select! {
        answer = call_in_run(&client, "r-cancel", "close_account", arguments.clone()) => {
            panic!("answered while nobody had decided: {answer:?}")
        }
        () = awaits => {}
    }
    // Answered after the cancellation, on the same connection: the server
    // has read it.
    client.list_tools(None).await.expect("tools/list");
    person.approve(&key, "ana").await.expect("it still awaits");
    let ran = call_in_run(&client, "r-cancel", "close_account", arguments).await;
    assert_eq!(text(&ran), "closed a-1");
    let replayed = ran
        .meta
        .as_ref()
        .and_then(|m| m.get(idem::mcp::REPLAYED_META));
    assert_eq!(replayed, None, "run by this call, not by the cancelled one");
    assert_eq!(CLOSED.load(std::sync::atomic::Ordering::SeqCst), 1);
}
