//! `idem gateway --http` on loopback without tokens, tried as a web page the
//! user visits would try it: requests sent exactly as a browser sends them
//! from another site (a "simple" POST of `text/plain` with no preflight, a
//! form post, a rebound `Host`, a preflight), then the same pages in a real
//! headless Chromium. In front of `ledger.py`, whose ledger counts the
//! writes that ran: another site's page runs nothing, while a client, and
//! a page of an origin given with `--allowed-origin`, still do.

mod common;

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use common::raw::{self, header, status};
use common::servers::{self, TempDir};
use common::{ledger_gateway, listening, python_sdk};

/// A write, as a client on MCP 2026-07-28 sends it outside any session.
fn append(entry: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "append",
        "arguments": {"entry": entry, "amount": 1},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "page", "version": "1"},
        },
    }})
}

/// The ledger's lines: one per write that ran upstream.
fn ledger(dir: &TempDir) -> Vec<String> {
    std::fs::read_to_string(dir.0.join("ledger.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Starts a gateway in front of `ledger.py` on a free loopback port, with
/// `extra` options: the process and its address.
async fn start(dir: &TempDir, extra: &[&str]) -> (tokio::process::Child, String) {
    let addr = format!("127.0.0.1:{}", servers::free_port());
    let mut options = vec!["--http", &addr];
    options.extend_from_slice(extra);
    let line = ledger_gateway(&dir.0, &options);
    let child = Command::new(&line[0])
        .args(&line[1..])
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the gateway");
    listening(
        addr.rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port"),
    )
    .await;
    (child, addr)
}

/// A refusal's JSON-RPC error message, checked to be one.
fn refusal(head: &str, body: &str) -> String {
    assert_eq!(
        header(head, "content-type").as_deref(),
        Some("application/json")
    );
    let body: Value = serde_json::from_str(body).expect("a JSON body");
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    body["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("a JSON-RPC error: {body}"))
        .to_owned()
}

#[tokio::test]
async fn requests_a_web_page_could_send_are_refused_and_run_nothing() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("cross-site");
    let app = "http://localhost:3000";
    let (_gateway, addr) = start(&dir, &["--allowed-origin", app]).await;
    let call = append("page").to_string();

    // A "simple" request: text/plain, no Accept, from another site. The
    // browser sends it without asking first, and would show the page
    // nothing of the answer; what matters is that nothing runs.
    let evil = [
        ("host", addr.as_str()),
        ("origin", "http://evil.example"),
        ("content-type", "text/plain;charset=UTF-8"),
    ];
    let (head, body) = raw::send(&addr, "POST", &evil, &call, true).await;
    assert_eq!(status(&head), 403, "{head}");
    let said = refusal(&head, &body);
    assert!(
        said.contains("`http://evil.example`") && said.contains("--allowed-origin"),
        "{said}"
    );
    assert_eq!(header(&head, "access-control-allow-origin"), None);

    // The same without an Origin (a page's request that a browser does not
    // mark, or a program's): its body is not JSON.
    let plain = [("host", addr.as_str()), ("content-type", "text/plain")];
    let (head, body) = raw::send(&addr, "POST", &plain, &call, true).await;
    assert_eq!(status(&head), 415, "{head}");
    assert!(refusal(&head, &body).contains("application/json"));

    // A form post, whose body a page can shape as JSON.
    let form = [
        ("host", addr.as_str()),
        ("origin", "null"),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    let (head, _) = raw::send(&addr, "POST", &form, &call, true).await;
    assert_eq!(status(&head), 403, "{head}");

    // DNS rebinding: a page of evil.example whose name now resolves to
    // 127.0.0.1 sends its own name as Host (and as its origin).
    let rebound_host = format!("evil.example:{}", addr.rsplit(':').next().unwrap_or(""));
    let rebound_origin = format!("http://{rebound_host}");
    let rebound = [
        ("host", rebound_host.as_str()),
        ("origin", rebound_origin.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    let (head, body) = raw::send(&addr, "POST", &rebound, &call, true).await;
    assert_eq!(status(&head), 403, "{head}");
    let said = refusal(&head, &body);
    assert!(said.contains("--allowed-host evil.example"), "{said}");

    // A preflight of another site's is refused; a JSON POST without an
    // Accept that takes either answer form, too.
    let preflight = [
        ("host", addr.as_str()),
        ("origin", "http://evil.example"),
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", "content-type"),
    ];
    let (head, _) = raw::send(&addr, "OPTIONS", &preflight, "", true).await;
    assert_eq!(status(&head), 403, "{head}");
    let unaccepted = [
        ("host", addr.as_str()),
        ("content-type", "application/json"),
        ("accept", "text/html"),
    ];
    let (head, body) = raw::send(&addr, "POST", &unaccepted, &call, true).await;
    assert_eq!(status(&head), 406, "{head}");
    assert!(refusal(&head, &body).contains("Accept"));
    assert!(ledger(&dir).is_empty(), "{:?}", ledger(&dir));

    // The allowed origin's preflight is answered, and its requests carry
    // the CORS headers that let its page read the session.
    let preflight = [
        ("host", addr.as_str()),
        ("origin", app),
        ("access-control-request-method", "POST"),
        (
            "access-control-request-headers",
            "content-type, mcp-session-id",
        ),
    ];
    let (head, _) = raw::send(&addr, "OPTIONS", &preflight, "", true).await;
    assert_eq!(status(&head), 204, "{head}");
    assert_eq!(
        header(&head, "access-control-allow-origin").as_deref(),
        Some(app)
    );
    let allowed = header(&head, "access-control-allow-headers").unwrap_or_default();
    assert!(allowed.contains("mcp-session-id"), "{head}");
    let (head, body) = raw::post(&addr, &[("origin", app)], &append("app"), true).await;
    assert_eq!(status(&head), 200, "{head}");
    assert_eq!(
        header(&head, "access-control-allow-origin").as_deref(),
        Some(app)
    );
    let exposed = header(&head, "access-control-expose-headers").unwrap_or_default();
    assert!(exposed.contains("mcp-session-id"), "{head}");
    assert!(body.contains(r#""entry":"app""#), "{body}");

    // A body that is no JSON-RPC message is refused, not dropped.
    let (head, body) = raw::post(&addr, &[], &json!({}), true).await;
    assert_eq!(status(&head), 400, "{head}");
    assert!(refusal(&head, &body).contains("not a JSON-RPC"), "{body}");

    // And a client (no Origin) is served as before.
    let (head, body) = raw::post(&addr, &[], &append("client"), true).await;
    assert_eq!(status(&head), 200, "{head}");
    assert!(body.contains(r#""entry":"client""#), "{body}");
    assert_eq!(ledger(&dir), ["app 1", "client 1"]);
}

/// The page of another site: a simple `fetch` (no preflight), a `fetch`
/// of JSON (which needs one), and a form post shaped as JSON, each a write;
/// it says what it saw in `#out`.
const ATTACK: &str = r#"<!doctype html><html><body><p id="out">running</p>
<iframe name="sink" id="sink"></iframe>
<form id="form" method="POST" action="GATEWAY" enctype="text/plain" target="sink">
<input name='{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"append","arguments":{"entry":"form","amount":1}},"x":"' value='"}'>
</form>
<script>
const call = (entry) => JSON.stringify(Object.assign(CALL, {params: Object.assign(CALL.params, {arguments: {entry, amount: 1}})}));
(async () => {
  const seen = {};
  try {
    const r = await fetch("GATEWAY", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: call("simple")});
    seen.simple = r.type;
  } catch (e) { seen.simple = "failed"; }
  try {
    const r = await fetch("GATEWAY", {method: "POST", headers: {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, body: call("cors")});
    seen.cors = "answered " + r.status;
  } catch (e) { seen.cors = "blocked"; }
  await new Promise((done) => { document.getElementById("sink").onload = done; document.getElementById("form").submit(); });
  seen.form = "posted";
  document.getElementById("out").textContent = "done " + JSON.stringify(seen);
})();
</script></body></html>"#;

/// The page of the allowed origin: a write through CORS, reading the
/// answer.
const APP: &str = r#"<!doctype html><html><body><p id="out">running</p>
<script>
(async () => {
  try {
    const r = await fetch("GATEWAY", {method: "POST", headers: {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, body: JSON.stringify(CALL)});
    const text = await r.text();
    document.getElementById("out").textContent = "done " + r.status + " " + (text.includes('"entry":"app"') ? "wrote" : text);
  } catch (e) { document.getElementById("out").textContent = "done failed " + e; }
})();
</script></body></html>"#;

/// Serves `page` to every GET on loopback `port` (0: a free one) until
/// dropped: the port.
async fn serve_page(port: u16, page: String) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind");
    let port = listener.local_addr().expect("an address").port();
    let serving = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let page = page.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buffer[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, serving)
}

/// Loads `url` in headless Chromium and runs its scripts: the text of its
/// `#out` once it says `done`.
async fn browse(chromium: &str, url: &str) -> String {
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--dump-dom",
            "--virtual-time-budget=20000",
        ])
        .arg(url)
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(common::PATIENCE, out)
        .await
        .expect("chromium ends")
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    let text = dom
        .split_once(r#"<p id="out">"#)
        .and_then(|(_, rest)| rest.split_once("</p>"))
        .map(|(text, _)| text.to_owned())
        .unwrap_or_else(|| panic!("no #out in what chromium made of {url}: {dom}"));
    assert!(text.starts_with("done"), "the page did not finish: {text}");
    text
}

/// The headless browser: `IDEM_TEST_CHROMIUM`, or Debian's `chromium`.
fn chromium() -> Option<String> {
    let program = std::env::var("IDEM_TEST_CHROMIUM").unwrap_or_else(|_| "chromium".to_owned());
    let how = "Install it: apt-get install chromium (or name one in IDEM_TEST_CHROMIUM).";
    common::runs(&program, &["--version"], "A headless Chromium", how).then_some(program)
}

#[tokio::test]
async fn in_a_real_browser_another_sites_page_runs_nothing_and_an_allowed_one_writes() {
    if !python_sdk() {
        return;
    }
    let Some(chromium) = chromium() else {
        return;
    };
    let dir = TempDir::new("cross-site-browser");
    // The allowed page is served at a port known before the gateway starts.
    let call = append("app").to_string();
    let app_page = |gateway: &str| APP.replace("GATEWAY", gateway).replace("CALL", &call);
    let app_port = servers::free_port();
    let app_origin = format!("http://localhost:{app_port}");
    let (_gateway, addr) = start(&dir, &["--allowed-origin", &app_origin]).await;
    let endpoint = format!("http://{addr}/mcp");

    let attack = ATTACK
        .replace("GATEWAY", &endpoint)
        .replace("CALL", &append("page").to_string());
    let (attack_port, _attack) = serve_page(0, attack).await;
    let seen = browse(&chromium, &format!("http://127.0.0.1:{attack_port}/")).await;
    // The browser sent them all; the JSON one it stopped at the preflight.
    assert!(seen.contains(r#""simple":"opaque""#), "{seen}");
    assert!(seen.contains(r#""cors":"blocked""#), "{seen}");
    assert!(seen.contains(r#""form":"posted""#), "{seen}");
    assert!(ledger(&dir).is_empty(), "{:?}", ledger(&dir));

    let (port, _app) = serve_page(app_port, app_page(&endpoint)).await;
    let seen = browse(&chromium, &format!("http://localhost:{port}/")).await;
    assert_eq!(seen, "done 200 wrote");
    assert_eq!(ledger(&dir), ["app 1"]);
}
