//! `idem console` served over a SQLite file the registry wrote, driven
//! through its JSON API as a script would (the page uses the same API):
//! who may read and decide (bearer tokens, the sign-in form's cookie),
//! what is listed, the decisions and their refusals (a race, a deny
//! without a reason, another tenant's operation), and a cross-site
//! request refused; a person at the page in a real browser, and the page
//! while its store (a Redis server of the test's own) is killed and
//! started again.

mod common;

use std::sync::Arc;

use common::raw::{header, send_to, status};
use common::servers::{self, TempDir};
use common::{browser, listening, python_json, signed_event};
use idem::prelude::*;
use idem::{IdemKey, IdemStore, RedisStore, SqliteStore};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// Close an account once a person approves; the call waits for them.
/// Who asked is not shown to them.
#[write_tool(approval = "required", approval_wait = "2m", hide = [asked.by])]
async fn close_account(account: String, asked: Value, _ctx: &WriteCtx) -> Result<Value, String> {
    let _ = asked;
    Ok(json!({"closed": account}))
}

/// Refund an order, once a person approves.
#[write_tool(approval = "required")]
async fn refund(order: String, ctx: &WriteCtx) -> Result<Value, String> {
    Ok(json!({"refunded": order, "attempt": ctx.attempt()}))
}

/// What `send_email` answers: its schema is the tool's output schema, which
/// a result a person gives must fit.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Sent {
    sent_to: String,
    #[serde(default)]
    attempt: u32,
    /// Who sent it, when a person did.
    by: Option<String>,
}

/// Send the customer an email: at most once.
#[write_tool(on_uncertain = "refuse")]
async fn send_email(to: String, ctx: &WriteCtx) -> Result<Sent, String> {
    Ok(Sent {
        sent_to: to,
        attempt: ctx.attempt(),
        by: None,
    })
}

/// A console on `store`, with `args` besides: the process, and its
/// address.
async fn console(store: &str, args: &[&str]) -> (Child, String) {
    let port = servers::free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["console", "--store", store, "--listen", &addr])
        .args(args)
        .kill_on_drop(true)
        .spawn()
        .expect("start the console");
    listening(port).await;
    (child, addr)
}

/// `request` (`GET /api/approvals`) to the console at `addr` with
/// `headers` and a JSON `body` (`{}` for a POST without one): the status,
/// the head and the body as JSON (null if it is not).
async fn call(
    addr: &str,
    request: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, String, Value) {
    let mut all = vec![("host", addr)];
    all.extend_from_slice(headers);
    // A POST's body is JSON, always (the console refuses another).
    let body = body.or_else(|| request.starts_with("POST").then(|| json!({})));
    let text = body.map(|b| b.to_string()).unwrap_or_default();
    if !text.is_empty() {
        all.push(("content-type", "application/json"));
    }
    let (head, body) = send_to(addr, request, &all, &text, true).await;
    let json = serde_json::from_str(&body).unwrap_or(Value::Null);
    (status(&head), head, json)
}

/// The path of `key`'s `action` under `list` (`approvals`, `pending`),
/// its key URL-encoded.
fn path(list: &str, key: &IdemKey, action: &str) -> String {
    let key: String = form_urlencoded::byte_serialize(key.as_str().as_bytes()).collect();
    format!("POST /api/{list}/{key}/{action}")
}

/// Two refunds await approval (tenant `acme`) and one for tenant `other`.
async fn awaiting(store: Arc<dyn IdemStore>) -> (Registry<()>, Vec<IdemKey>) {
    let registry = Registry::builder(())
        .store(store)
        .tool(refund)
        .build()
        .expect("registry");
    let mut keys = Vec::new();
    for (tenant, order) in [("acme", "o-1"), ("acme", "o-2"), ("other", "o-3")] {
        let context = idem::CallContext::run("run-1").tenant(tenant);
        match registry
            .call(context, "refund", json!({ "order": order }))
            .await
        {
            Err(ToolError::ApprovalRequired { key, .. }) => keys.push(key),
            other => panic!("the refund asks for approval, got {other:?}"),
        }
    }
    (registry, keys)
}

/// The API answers only who shows a token, lists what awaits (only the
/// tenants it serves), and records the signed-in user as who decided:
/// an approval runs the refund once, a deny needs a reason, a second
/// decision is 409 naming the first, another tenant's key is 404; each
/// decision is sent, signed, to the webhooks of `--config`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_through_the_api_are_bound_to_the_operation_and_its_decider() {
    let dir = TempDir::new("console");
    let file = dir.0.join("records.sqlite");
    let store = Arc::new(SqliteStore::open(&file).await.expect("open"));
    let (registry, keys) = awaiting(store.clone()).await;
    let url = file.display().to_string();
    let receiver = idem::testing::Receiver::start().await;
    let secret = idem::notify::WebhookSecret::generate();
    let config = dir.0.join("gateway.toml");
    let toml = format!(
        "[notify]\nurl = \"{}\"\nsecret = \"{secret}\"\n",
        receiver.url()
    );
    std::fs::write(&config, toml).expect("config");
    let config = config.display().to_string();
    let (_console, addr) = console(
        &url,
        &[
            "--token",
            "ana=s3cret",
            "--token",
            "bob=b0b",
            "--tenant",
            "acme",
            "--config",
            &config,
        ],
    )
    .await;
    let (ana, bob) = (
        [("authorization", "Bearer s3cret")],
        [("authorization", "Bearer b0b")],
    );

    let (code, head, _) = call(&addr, "GET /api/approvals", &[], None).await;
    assert_eq!(code, 401);
    assert!(header(&head, "www-authenticate").is_some_and(|v| v.starts_with("Bearer")));
    let (code, _, _) = call(
        &addr,
        "GET /api/approvals",
        &[("authorization", "Bearer nope")],
        None,
    )
    .await;
    assert_eq!(code, 401);

    let (code, _, listed) = call(&addr, "GET /api/approvals", &ana, None).await;
    assert_eq!(code, 200, "{listed}");
    assert_eq!(listed["total"], 2, "only tenant acme's: {listed}");
    assert_eq!(
        listed["items"][0]["arguments"],
        json!({"order": "o-1"}),
        "oldest first: {listed}"
    );
    assert_eq!(listed["items"][0]["key"], keys[0].as_str());

    // Another tenant's operation is not there for this console.
    let (code, _, refused) = call(&addr, &path("approvals", &keys[2], "approve"), &ana, None).await;
    assert_eq!(code, 404, "{refused}");

    // Approved by ana: the refund runs once, and the record says who.
    let (code, _, approved) =
        call(&addr, &path("approvals", &keys[0], "approve"), &ana, None).await;
    assert_eq!(code, 200, "{approved}");
    assert_eq!(approved["record"]["approved"]["by"], "ana", "{approved}");
    let (code, _, raced) = call(
        &addr,
        &path("approvals", &keys[0], "deny"),
        &bob,
        Some(json!({"reason": "no"})),
    )
    .await;
    assert_eq!(code, 409, "the second decision is refused: {raced}");
    assert_eq!(
        raced["record"]["approved"]["by"], "ana",
        "it names the first: {raced}"
    );
    let context = idem::CallContext::run("run-1").tenant("acme");
    let ran = registry
        .call(context, "refund", json!({"order": "o-1"}))
        .await;
    assert_eq!(ran.expect("approved: it runs")["refunded"], "o-1");

    // A deny needs a reason; with one, every call is told it, and who.
    let deny = path("approvals", &keys[1], "deny");
    let (code, _, refused) = call(&addr, &deny, &bob, Some(json!({}))).await;
    assert_eq!(code, 400, "{refused}");
    let (code, _, denied) = call(&addr, &deny, &bob, Some(json!({"reason": "not this one"}))).await;
    assert_eq!(code, 200, "{denied}");
    let answered = registry
        .call(context, "refund", json!({"order": "o-2"}))
        .await;
    assert!(
        matches!(&answered, Err(ToolError::Denied { by, reason, .. }) if by.as_deref() == Some("bob") && reason == "not this one"),
        "{answered:?}"
    );

    // Each decision is told to the webhooks, signed, with who made it.
    let told = receiver
        .wait_for(2, std::time::Duration::from_secs(60))
        .await;
    let events: Vec<Value> = told.iter().map(|r| signed_event(r, &secret)).collect();
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let mut said: Vec<(String, String, String)> = events
        .iter()
        .map(|e| {
            (
                text(&e["type"]),
                text(&e["data"]["key"]),
                text(&e["data"]["by"]),
            )
        })
        .collect();
    said.sort_unstable();
    let expected = [
        ("approval.approved", keys[0].as_str(), "ana"),
        ("approval.denied", keys[1].as_str(), "bob"),
    ]
    .map(|(t, k, b)| (t.to_owned(), k.to_owned(), b.to_owned()));
    assert_eq!(said, expected, "{events:?}");

    // The decisions, newest first, with who made them.
    let (code, _, decided) = call(&addr, "GET /api/decisions", &ana, None).await;
    assert_eq!(code, 200, "{decided}");
    let items = decided["items"].as_array().expect("items");
    let mut made: Vec<(&str, &str)> = items
        .iter()
        .map(|d| {
            (
                d["decision"].as_str().unwrap_or("-"),
                d["by"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    made.sort_unstable();
    assert_eq!(made, [("approved", "ana"), ("refused", "bob")], "{decided}");
    let times: Vec<&str> = items
        .iter()
        .map(|d| d["at"].as_str().unwrap_or(""))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {decided}"
    );
    let (_, _, listed) = call(&addr, "GET /api/approvals", &ana, None).await;
    assert_eq!(listed["total"], 0, "{listed}");
}

/// The page signs in with a form and keeps a session cookie (HttpOnly,
/// SameSite=Strict) that the API takes; a request from another site is
/// refused, signed in or not; a console without tokens serves loopback
/// only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_signs_in_and_another_site_cannot_decide() {
    let dir = TempDir::new("console");
    let file = dir.0.join("records.sqlite");
    let store = Arc::new(SqliteStore::open(&file).await.expect("open"));
    let (_registry, keys) = awaiting(store).await;
    let url = file.display().to_string();
    let (_console, addr) = console(&url, &["--token", "ana=s3cret"]).await;

    let (code, _, _) = call(&addr, "GET /", &[], None).await;
    assert_eq!(code, 200);
    let form = [
        ("host", addr.as_str()),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    let (head, _) = send_to(&addr, "POST /sign-in", &form, "token=wrong", true).await;
    assert_eq!(status(&head), 401);
    let (head, _) = send_to(&addr, "POST /sign-in", &form, "token=s3cret", true).await;
    assert_eq!(status(&head), 303, "{head}");
    let cookie = header(&head, "set-cookie").expect("a session cookie");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().expect("name=value").to_owned();
    let signed_in = [("cookie", session.as_str())];
    let (code, _, listed) = call(&addr, "GET /api/approvals", &signed_in, None).await;
    assert_eq!((code, &listed["total"]), (200, &json!(3)), "{listed}");
    // Where a webhook's link leads: the page, signed in.
    let linked = format!("GET /operations/{}", keys[0]);
    let host = [("host", addr.as_str()), ("cookie", session.as_str())];
    let (head, page) = send_to(&addr, &linked, &host, "", true).await;
    assert_eq!(status(&head), 200, "{head}");
    assert!(
        page.contains("Awaiting approval"),
        "the page, not the sign-in form"
    );

    // Another site's page, with the cookie a browser would send: refused.
    let evil = [
        ("cookie", session.as_str()),
        ("origin", "https://evil.example"),
    ];
    let (code, _, refused) =
        call(&addr, &path("approvals", &keys[0], "approve"), &evil, None).await;
    assert_eq!(code, 403, "{refused}");
    let (_, _, still) = call(&addr, "GET /api/approvals", &signed_in, None).await;
    assert_eq!(still["total"], 3, "nothing was decided: {still}");
    // Its own page may.
    let own = format!("http://{addr}");
    let same = [("cookie", session.as_str()), ("origin", own.as_str())];
    let (code, _, approved) =
        call(&addr, &path("approvals", &keys[0], "approve"), &same, None).await;
    assert_eq!(code, 200, "{approved}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["console", "--store", &url, "--listen", "0.0.0.0:0"])
        .output()
        .expect("run the console");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("without --token"),
        "{said}"
    );
}

/// An unknown outcome is listed and resolved through the API: a body
/// that says nothing it can write is 400, a resolution as done makes its
/// result every duplicate's answer, and a second resolution is 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outcome_is_resolved_through_the_api() {
    let dir = TempDir::new("console");
    let file = dir.0.join("records.sqlite");
    let store = Arc::new(SqliteStore::open(&file).await.expect("open"));
    let registry = Registry::builder(())
        .store(store)
        .tool(send_email)
        .build()
        .expect("registry");
    let args = json!({"to": "ann@example.com"});
    let key = unknown_email(&registry, "ann@example.com").await;

    let url = file.display().to_string();
    let (_console, addr) = console(&url, &["--token", "ana=s3cret"]).await;
    let ana = [("authorization", "Bearer s3cret")];
    let (code, _, pending) = call(&addr, "GET /api/pending", &ana, None).await;
    assert_eq!((code, &pending["total"]), (200, &json!(1)), "{pending}");
    assert_eq!(pending["items"][0]["key"], key.as_str());
    let resolve = path("pending", &key, "resolve");
    for body in [
        json!({}),
        json!({"outcome": "done"}),
        json!({"outcome": "failed"}),
    ] {
        let (code, _, refused) = call(&addr, &resolve, &ana, Some(body.clone())).await;
        assert_eq!(code, 400, "{body}: {refused}");
    }
    // A result that does not fit the tool's output schema is refused,
    // naming the field; nothing is recorded.
    let misfit = json!({"outcome": "done", "result": {"sent_to": 7}});
    let (code, _, refused) = call(&addr, &resolve, &ana, Some(misfit)).await;
    assert_eq!(code, 400, "{refused}");
    let said = refused.to_string();
    assert!(said.contains("`sent_to` is 7, not string"), "{said}");
    let done = json!({"outcome": "done", "result": {"sent_to": "ann@example.com", "by": "hand"}});
    let (code, _, resolved) = call(&addr, &resolve, &ana, Some(done.clone())).await;
    assert_eq!(code, 200, "{resolved}");
    assert_eq!(resolved["record"]["state"], "done", "{resolved}");
    let (code, _, again) = call(&addr, &resolve, &ana, Some(done)).await;
    assert_eq!(code, 409, "{again}");
    let replayed = registry.call("run-1", "send_email", args).await;
    assert_eq!(replayed.expect("the resolved result")["by"], "hand");
}

/// A record the application sealed is listed without its content (what
/// it says of its operation reads "sealed", the secret in its arguments
/// is nowhere in any answer),
/// and a decision on it is refused: the console has no keys, and one it
/// wrote would not be sealed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_record_is_shown_sealed_and_not_decided_here() {
    let dir = TempDir::new("console");
    let file = dir.0.join("records.sqlite");
    let store = Arc::new(SqliteStore::open(&file).await.expect("open"));
    let keys = idem::ResultKeys::new("k1", [7; 32]).expect("a key");
    let registry = Registry::builder(())
        .store(store)
        .encrypt_results(keys)
        .tool(refund)
        .build()
        .expect("registry");
    let asked = registry
        .call("run-1", "refund", json!({"order": "secret-order-4111"}))
        .await;
    let Err(ToolError::ApprovalRequired { key, .. }) = asked else {
        panic!("the refund asks for approval, got {asked:?}");
    };
    let url = file.display().to_string();
    let (_console, addr) = console(&url, &["--token", "ana=s3cret"]).await;
    let ana = [("authorization", "Bearer s3cret")];

    let (code, _, listed) = call(&addr, "GET /api/approvals", &ana, None).await;
    assert_eq!((code, &listed["total"]), (200, &json!(1)), "{listed}");
    let shown = listed["items"][0]["about"].as_str().unwrap_or_default();
    assert!(shown.contains("sealed"), "{listed}");
    let (code, _, refused) = call(&addr, &path("approvals", &key, "approve"), &ana, None).await;
    assert_eq!(code, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.contains("Registry::approve")),
        "it says where to decide it: {refused}"
    );
    let (_, _, decided) = call(&addr, "GET /api/decisions", &ana, None).await;
    for answer in [&listed, &refused, &decided] {
        assert!(!answer.to_string().contains("4111"), "{answer}");
    }
    let (_, _, still) = call(&addr, "GET /api/approvals", &ana, None).await;
    assert_eq!(still["total"], 1, "nothing was decided: {still}");
}

/// Leaves the email to `to` unknown in `registry`: a worker claims it and
/// goes (its claim lapses), and the next call finds the outcome unknown.
async fn unknown_email(registry: &Registry<()>, to: &str) -> IdemKey {
    let args = json!({ "to": to });
    let (key, fingerprint) = registry
        .identify("run-1", "send_email", args.clone())
        .expect("identify")
        .expect("a write");
    let short = std::time::Duration::from_millis(100);
    let request = idem::store::ClaimRequest::new("send_email", &fingerprint, short);
    registry
        .store()
        .claim(&key, request)
        .await
        .expect("claimed");
    tokio::time::sleep(short * 3).await;
    let unknown = registry.call("run-1", "send_email", args).await;
    assert!(
        matches!(unknown, Err(ToolError::OutcomeUnknown { .. })),
        "{unknown:?}"
    );
    key
}

/// A person in headless Chromium signs in, sees an operation with its
/// arguments, approves it (and the call that waited for them answers its
/// result), denies one with a reason typed and sent with Enter, resolves
/// an unknown outcome, approves a refund from the keyboard and takes it
/// back; a hidden argument shows as "(hidden)"; on a phone's width in a
/// dark theme nothing is wider than the screen; a form another site's
/// page submits from the same
/// signed-in browser is refused and decides nothing. The screenshot it
/// takes is docs/console.png when `IDEM_CONSOLE_SCREENSHOT` names that
/// file (`scripts/console-screenshot.sh`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_decides_in_a_real_browser() {
    if !browser() {
        return;
    }
    let dir = TempDir::new("console");
    let file = dir.0.join("records.sqlite");
    let store = Arc::new(SqliteStore::open(&file).await.expect("open"));
    let registry = Arc::new(
        Registry::builder(())
            .store(store)
            .tool(close_account)
            .tool(refund)
            .tool(send_email)
            .build()
            .expect("registry"),
    );
    let context = idem::CallContext::run("run-1").tenant("acme");
    let closing = json!({"account": "acct-17", "asked": {"by": "ann", "ticket": 4521}});
    let (approve, _) = registry
        .identify(context, "close_account", closing.clone())
        .expect("identify")
        .expect("a write");
    let waiting = {
        let registry = registry.clone();
        let closing = closing.clone();
        tokio::spawn(async move {
            let context = idem::CallContext::run("run-1").tenant("acme");
            registry.call(context, "close_account", closing).await
        })
    };
    let mut refunds = Vec::new();
    for order in ["o-2", "o-3", "o-4"] {
        match registry
            .call(context, "refund", json!({ "order": order }))
            .await
        {
            Err(ToolError::ApprovalRequired { key, .. }) => refunds.push(key),
            other => panic!("the refund asks for approval, got {other:?}"),
        }
    }
    let unknown = unknown_email(&registry, "ann@example.com").await;
    // The waiting call's operation awaits before the person looks.
    while registry
        .store()
        .inspect(&approve)
        .await
        .ok()
        .flatten()
        .is_none()
    {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    let url = file.display().to_string();
    let (_console, addr) = console(&url, &["--token", "ana=s3cret"]).await;
    let screenshot = std::env::var("IDEM_CONSOLE_SCREENSHOT")
        .unwrap_or_else(|_| dir.0.join("console.png").display().to_string());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/console.py");
    let page = format!("http://{addr}/");
    let keys =
        [&approve, &refunds[0], &refunds[1], &unknown, &refunds[2]].map(|k| k.as_str().to_owned());
    let args = [
        &page,
        "s3cret",
        &keys[0],
        &keys[1],
        &keys[2],
        &keys[3],
        &keys[4],
        &screenshot,
    ];
    let report = python_json(script, &args, &[]).await;

    let shown = report["arguments"].as_str().unwrap_or_default();
    assert!(
        shown.contains("acct-17") && shown.contains("4521"),
        "{report}"
    );
    assert!(
        shown.contains("(hidden)") && !shown.contains("ann"),
        "a hidden field is not shown: {report}"
    );
    let steps = ["approved", "denied", "resolved", "revoked"].map(|step| &report[step]);
    assert_eq!(steps, [&json!(true); 4], "{report}");
    assert_eq!(report["revoke_label"], "Revoke", "{report}");
    assert_eq!(
        report["phone_overflow"], 0,
        "nothing wider than a phone: {report}"
    );
    let background = report["dark_background"].as_str().unwrap_or_default();
    assert_eq!(background, "rgb(21, 24, 28)", "the dark theme's: {report}");
    let taken_back = registry.store().inspect(&refunds[2]).await.expect("read");
    assert_eq!(
        taken_back.map(|r| r.state),
        Some(idem::store::RecordState::Awaiting),
        "the approval revoked on the page: it awaits again"
    );
    let closed = waiting.await.expect("the waiting call");
    assert_eq!(
        closed.expect("approved on the page: it ran")["closed"],
        "acct-17"
    );
    let refused = registry
        .call(context, "refund", json!({"order": "o-2"}))
        .await;
    assert!(
        matches!(&refused, Err(ToolError::Denied { by, reason, .. }) if by.as_deref() == Some("ana") && reason == "not this one"),
        "{refused:?}"
    );
    let replayed = registry
        .call("run-1", "send_email", json!({"to": "ann@example.com"}))
        .await;
    assert_eq!(replayed.expect("resolved on the page")["by"], "page");
    let decisions = report["decisions"].as_str().unwrap_or_default();
    assert!(
        decisions.contains("ana") && decisions.contains("refused"),
        "{report}"
    );

    let cross = report["cross_site"].as_str().unwrap_or_default();
    assert!(
        cross.contains("may not call"),
        "another site's form is refused: {report}"
    );
    let kept = registry.store().inspect(&refunds[1]).await.expect("read");
    assert_eq!(
        kept.map(|r| r.state),
        Some(idem::store::RecordState::Awaiting),
        "another site's form decided nothing"
    );
    assert!(
        std::fs::metadata(&screenshot).is_ok_and(|m| m.len() > 0),
        "a screenshot"
    );
}

/// The store goes away under an open page (its Redis server killed): the
/// page says the store cannot be read and keeps what it showed; started
/// again (its append-only file kept every write), the page clears the
/// error by itself, and an approval made then lands: nothing was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_a_store_gone_and_recovers_when_it_is_back() {
    if !browser() {
        return;
    }
    let mut redis =
        servers::RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let store = RedisStore::connect(&redis.url()).await.expect("connect");
    let (registry, keys) = awaiting(Arc::new(store)).await;
    let (_console, addr) = console(&redis.url(), &["--token", "ana=s3cret"]).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/outage.py");
    let page = format!("http://{addr}/");
    let mut person = Command::new("python3")
        .args([script, &page, "s3cret", keys[0].as_str()])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run the browser");
    let out = person.stdout.take().expect("its output");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(out));
    let mut next = async || {
        let line = tokio::time::timeout(common::PATIENCE * 2, lines.next_line()).await;
        line.expect("the browser goes on")
            .expect("read")
            .expect("a line")
    };

    assert_eq!(next().await, "seen");
    redis.kill();
    let outage = next().await;
    assert!(outage.contains("cannot be read"), "{outage}");
    redis.restart();
    let report: Value = serde_json::from_str(&next().await).expect("the report");
    assert_eq!(
        (&report["recovered"], &report["approved"]),
        (&json!(true), &json!(true)),
        "{report}"
    );
    let context = idem::CallContext::run("run-1").tenant("acme");
    let ran = registry
        .call(context, "refund", json!({"order": "o-1"}))
        .await;
    assert_eq!(
        ran.expect("approved after the outage: it runs")["refunded"],
        "o-1"
    );
    let (_, _, left) = call(
        &addr,
        "GET /api/approvals",
        &[("authorization", "Bearer s3cret")],
        None,
    )
    .await;
    assert_eq!(left["total"], 2, "the others are still there: {left}");
}
