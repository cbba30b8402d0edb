//! `idem gateway --http` run as a service: the health routes a load
//! balancer probes, and how it stops on SIGTERM (it drains: what is in
//! flight is answered and recorded, what is new is turned away, what is
//! still in flight at `--drain` is recorded as uncertain).
//!
//! The gateway is spoken to by hand (`common::raw`), so that a test can
//! hold a call in flight while it signals the process.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::servers::{self, RedisServer, TempDir};
use common::{LEDGER, PATIENCE, eventually, idem, python_sdk, raw, wait_for};
use serde_json::{Value, json};

/// A gateway serving HTTP in front of `ledger.py`.
struct Service {
    child: tokio::process::Child,
    /// Speaks to it.
    client: Client,
}

/// Speaks HTTP to a gateway at `addr`.
#[derive(Clone)]
struct Client {
    addr: String,
    /// `Authorization: Bearer` of every POST, if any.
    bearer: Option<String>,
}

impl Service {
    /// Starts it on `store`, keeping `ledger`, with `extra` options.
    async fn start(store: &str, ledger: &Path, extra: &[&str]) -> Service {
        Service::start_with(store, ledger, extra, &[]).await
    }

    /// [`start`](Self::start) with `env` besides.
    async fn start_with(
        store: &str,
        ledger: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Service {
        let ledger = ledger.display().to_string();
        let upstream = [extra, &["--", "python3", LEDGER, &ledger]].concat();
        Service::serving(store, &upstream, env).await
    }

    /// A gateway on `store` whose other arguments (its upstream among
    /// them) are `args`.
    async fn serving(store: &str, args: &[&str], env: &[(&str, &str)]) -> Service {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_idem"))
            .envs(env.iter().copied())
            .args(["gateway", "--store", store, "--http", "127.0.0.1:0"])
            .args(args)
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the gateway");
        let url = common::listening_url(&mut child).await;
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        Service {
            child,
            client: Client { addr, bearer: None },
        }
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let pid = self.child.id().expect("the gateway runs");
        let pid = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
        rustix::process::kill_process(pid, signal).expect("signal the gateway");
    }

    /// Waits for the gateway to exit, at most [`PATIENCE`].
    async fn exited(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the gateway exits")
            .expect("wait for the gateway")
    }
}

impl Client {
    /// Waits until `/readyz` answers 200 again.
    async fn ready_again(&self) {
        eventually("not ready again", || async {
            match self.get("/readyz", &[]).await {
                (200, _) => Ok(()),
                (_, body) => Err(body),
            }
        })
        .await;
    }

    /// `GET path`, with `headers`: the status and the body.
    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut all = vec![("host", self.addr.as_str())];
        all.extend_from_slice(headers);
        let (head, body) = raw::send_to(&self.addr, &format!("GET {path}"), &all, "", true).await;
        (raw::status(&head), body)
    }

    /// POSTs one JSON-RPC `message` to `/mcp` in `session`, answered as
    /// JSON: the response's head and its message (`null` if none).
    async fn post(&self, session: Option<&str>, message: &Value) -> (String, Value) {
        let mut headers = vec![
            ("host", self.addr.as_str()),
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ];
        if let Some(id) = session {
            headers.push(("mcp-session-id", id));
        }
        let bearer = self.bearer.as_ref().map(|token| format!("Bearer {token}"));
        if let Some(bearer) = &bearer {
            headers.push(("authorization", bearer));
        }
        let body = message.to_string();
        let (head, body) = raw::send(&self.addr, "POST", &headers, &body, true).await;
        (head, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    /// Opens an MCP session: its id.
    async fn session(&self) -> String {
        let (head, answer) = self.post(None, &initialize()).await;
        assert_eq!(raw::status(&head), 200, "{head}\n{answer}");
        let id = raw::header(&head, "mcp-session-id").expect("a session id");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(Some(&id), &initialized).await;
        id
    }

    /// Calls `tool` with `args` in `session`: the call's result.
    async fn call(&self, session: &str, tool: &str, args: Value) -> Value {
        self.call_in(session, None, tool, args).await
    }

    /// [`call`](Self::call), in `run` (`_meta["idem/run_id"]`) if given.
    async fn call_in(&self, session: &str, run: Option<&str>, tool: &str, args: Value) -> Value {
        let mut params = json!({"name": tool, "arguments": args});
        if let Some(run) = run {
            params["_meta"] = json!({"idem/run_id": run});
        }
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
        let (head, answer) = self.post(Some(session), &call).await;
        assert_eq!(raw::status(&head), 200, "{head}\n{answer}");
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("a result: {answer}"))
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "production-test", "version": "0"}}})
}

/// The text of a tool result's content.
fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn lines(ledger: &Path) -> Vec<String> {
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn sqlite(dir: &Path) -> (String, PathBuf) {
    let store = dir.join("records.sqlite").display().to_string();
    (store, dir.join("ledger.txt"))
}

#[tokio::test]
async fn a_probe_needs_no_token_and_readiness_follows_the_store() {
    if !python_sdk() || !servers::redis_binaries() {
        return;
    }
    let dir = TempDir::new("production");
    let mut redis = RedisServer::start(&[]);
    let ledger = dir.0.join("ledger.txt");
    let service = Service::start(&redis.url(), &ledger, &["--token", "ana=ana-token"]).await;
    let client = &service.client;

    // Both without a token, and from any host a balancer names.
    let (code, body) = client.get("/healthz", &[]).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = client.get("/readyz", &[("host", "10.0.0.7:8080")]).await;
    assert_eq!(code, 200, "{body}");
    let ready: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        ready,
        json!({"status": "ready", "store": "ok", "upstream": "ok"})
    );
    // The tokens still hold for the endpoint.
    let (head, _) = raw::post(&client.addr, &[], &initialize(), true).await;
    assert_eq!(raw::status(&head), 401, "{head}");

    // The store gone: not ready, saying which, and not where it is.
    redis.kill();
    let (code, body) = client.get("/readyz", &[]).await;
    assert_eq!(code, 503, "{body}");
    let ready: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(ready["status"], "not ready", "{body}");
    assert_ne!(ready["store"], "ok", "{body}");
    assert_eq!(ready["upstream"], "ok", "{body}");
    assert!(!body.contains(&redis.url()[8..]), "{body}");
    // The process still serves.
    assert_eq!(client.get("/healthz", &[]).await.0, 200);

    // Back: ready again, by itself.
    redis.restart();
    client.ready_again().await;
}

/// An upstream at a URL that stops answering makes the gateway not ready,
/// saying so without its address, and ready again once it is back.
#[tokio::test]
async fn readiness_follows_an_upstream_at_a_url() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("production-upstream");
    let (store, ledger) = sqlite(&dir.0);
    let port = servers::free_port();
    let upstream = || {
        tokio::process::Command::new("python3")
            .arg(LEDGER)
            .arg(&ledger)
            .args(["--http", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the upstream")
    };
    let mut first = upstream();
    common::listening(port).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let service = Service::serving(&store, &["--upstream-url", &url], &[]).await;
    let client = &service.client;
    let (code, body) = client.get("/readyz", &[]).await;
    assert_eq!(code, 200, "{body}");

    first.kill().await.expect("stop the upstream");
    let (code, body) = client.get("/readyz", &[]).await;
    assert_eq!(code, 503, "{body}");
    let ready: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(ready["store"], "ok", "{body}");
    assert_ne!(ready["upstream"], "ok", "{body}");
    assert!(!body.contains(&port.to_string()), "{body}");

    let _again = upstream();
    client.ready_again().await;
}

#[tokio::test]
async fn metrics_count_calls_by_tool_and_outcome_and_name_no_argument() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("production");
    let (store, ledger) = sqlite(&dir.0);
    let metrics = format!("127.0.0.1:{}", servers::free_port());
    let config = dir.0.join("gateway.toml");
    std::fs::write(&config, "[tools.note]\napproval = \"required\"\n").expect("configure");
    let config = config.display().to_string();
    let extra = ["--metrics", &metrics, "--config", &config];
    let service = Service::start(&store, &ledger, &extra).await;
    let client = &service.client;
    let session = client.session().await;
    let args = json!({"entry": "private-entry-7"});
    for _ in 0..2 {
        let appended = client.call(&session, "append", args.clone()).await;
        assert_ne!(appended["isError"], true, "{appended}");
    }
    client.call(&session, "count", json!({})).await;
    // An operation that waits for a person's approval.
    let waits = client
        .call(&session, "note", json!({"text": "private-note"}))
        .await;
    assert_eq!(waits["isError"], true, "{waits}");

    let scraper = Client {
        addr: metrics.clone(),
        bearer: None,
    };
    let (code, text) = scraper.get("/metrics", &[]).await;
    assert_eq!(code, 200, "{text}");
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    let calls = |tool: &str, outcome: &str| {
        value(&format!(
            "idem_calls{{gen_ai_tool_name=\"{tool}\",idem_outcome=\"{outcome}\"}}"
        ))
    };
    assert_eq!(calls("append", "ran"), 1.0);
    assert_eq!(calls("append", "replayed"), 1.0);
    assert_eq!(calls("count", "read"), 1.0);
    assert_eq!(value("idem_gateway_sessions"), 1.0);
    assert_eq!(value("idem_gateway_upstreams"), 1.0);
    let upstream_calls = "idem_gateway_upstream_duration_count{mcp_method_name=\"tools/call\"}";
    // The write once, the read once: the replay never went up.
    assert_eq!(value(upstream_calls), 2.0);
    assert!(text.contains("idem_store_duration_bucket{"), "{text}");
    assert_eq!(
        value("idem_operations{idem_state=\"awaiting_approval\"}"),
        1.0
    );
    assert_eq!(value("idem_operations{idem_state=\"unknown\"}"), 0.0);
    assert!(!text.contains("private-"), "{text}");
    assert!(!text.contains(&session), "{text}");
}

#[tokio::test]
async fn two_gateways_on_one_redis_run_an_operation_once_between_them() {
    if !python_sdk() || !servers::redis_binaries() {
        return;
    }
    let dir = TempDir::new("production");
    let redis = RedisServer::start(&[]);
    let ledger = dir.0.join("ledger.txt");
    // Two replicas behind a balancer: one store, one downstream (the
    // ledger), each with its own upstream process; the client is ana on
    // both, so the run it names is hers on both.
    let tokens = ["--token", "ana=ana-token"];
    let first = Service::start(&redis.url(), &ledger, &tokens).await;
    let second = Service::start(&redis.url(), &ledger, &tokens).await;
    let as_ana = |client: &Client| Client {
        bearer: Some("ana-token".into()),
        ..client.clone()
    };
    let replicas = [as_ana(&first.client), as_ana(&second.client)];
    let mut sessions = Vec::new();
    for replica in &replicas {
        sessions.push(replica.session().await);
    }
    // A client's call and its retry land on either replica, one after the
    // other and at the same time, in the client's run.
    for (n, order) in [[0, 1], [1, 0]].iter().enumerate() {
        let args = json!({"entry": format!("op-{n}")});
        let mut answers = Vec::new();
        for &at in order {
            let (replica, session) = (&replicas[at], &sessions[at]);
            answers.push(
                replica
                    .call_in(session, Some("run-1"), "append", args.clone())
                    .await,
            );
        }
        assert_eq!(
            answers[0]["structuredContent"],
            answers[1]["structuredContent"]
        );
        assert_ne!(answers[0]["isError"], true, "{}", answers[0]);
    }
    let args = json!({"entry": "op-together"});
    let at_once = replicas
        .iter()
        .zip(&sessions)
        .map(|(replica, session)| replica.call_in(session, Some("run-1"), "append", args.clone()));
    let answers = futures_util::future::join_all(at_once).await;
    for (answer, (replica, session)) in answers.iter().zip(replicas.iter().zip(&sessions)) {
        // One ran; the other was told it was in flight, or replayed it.
        let mut answer = answer.clone();
        let started = std::time::Instant::now();
        while answer["isError"] == true {
            assert!(
                text(&answer).contains("in progress") || text(&answer).contains("in flight"),
                "{answer}"
            );
            assert!(started.elapsed() < PATIENCE, "never answered: {answer}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            answer = replica
                .call_in(session, Some("run-1"), "append", args.clone())
                .await;
        }
        assert_eq!(
            answer["structuredContent"]["entry"], "op-together",
            "{answer}"
        );
    }
    assert_eq!(lines(&ledger), ["op-0 0", "op-1 0", "op-together 0"]);
}

#[tokio::test]
async fn tokens_come_from_a_file_and_the_environment_too() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("production");
    let (store, ledger) = sqlite(&dir.0);
    let file = dir.0.join("tokens");
    std::fs::write(&file, "# the gateway's users\nana=ana-token\n").expect("write the tokens");
    let file = file.display().to_string();
    let env = [("IDEM_TOKENS", "bob=bob-token, cy=cy-token")];
    let service = Service::start_with(&store, &ledger, &["--token-file", &file], &env).await;
    let addr = service.client.addr.as_str();
    for (token, status) in [
        ("ana-token", 200),
        ("bob-token", 200),
        ("cy-token", 200),
        ("eve-token", 401),
    ] {
        let bearer = format!("Bearer {token}");
        let (head, _) = raw::post(addr, &[("authorization", &bearer)], &initialize(), true).await;
        assert_eq!(raw::status(&head), status, "{token}: {head}");
    }
}

#[tokio::test]
async fn on_sigterm_a_write_in_flight_is_answered_and_new_ones_are_turned_away() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("production");
    let (store, ledger) = sqlite(&dir.0);
    let mut served = Service::start(&store, &ledger, &[]).await;
    let client = served.client.clone();
    let session = client.session().await;
    // A write the upstream holds until the test releases it.
    let waiting = PathBuf::from(format!("{}.waiting", ledger.display()));
    let release = PathBuf::from(format!("{}.release", ledger.display()));
    let in_flight = {
        let (client, session) = (client.clone(), session.clone());
        tokio::spawn(async move {
            let args = json!({"entry": "a"});
            client.call(&session, "append_when_released", args).await
        })
    };
    wait_for(|| waiting.exists(), "the write did not reach the upstream").await;

    served.signal(rustix::process::Signal::TERM);
    // Draining: not ready, no new session, no new write; reads go on.
    let body = eventually("never drained", || async {
        match client.get("/readyz", &[]).await {
            (503, body) => Ok(body),
            (_, body) => Err(body),
        }
    })
    .await;
    assert!(body.contains("draining"), "{body}");
    let (head, _) = client.post(None, &initialize()).await;
    assert_eq!(raw::status(&head), 503, "{head}");
    assert!(raw::header(&head, "retry-after").is_some(), "{head}");
    let refused = client.call(&session, "append", json!({"entry": "b"})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("shutting down"), "{refused}");
    let counted = client.call(&session, "count", json!({})).await;
    assert_ne!(counted["isError"], true, "{counted}");

    // Released: the write in flight is answered, recorded, and only then
    // does the gateway exit, cleanly.
    std::fs::write(&release, "").expect("release the write");
    let answered = in_flight.await.expect("the call");
    assert_eq!(text(&answered), "released a", "{answered}");
    assert!(served.exited().await.success());
    assert_eq!(lines(&ledger), ["released a"]);
    let listed = idem(&["list", "--json", "--store", &store]);
    assert!(
        listed.contains("append_when_released") && listed.contains("\"done\""),
        "{listed}"
    );
}

#[tokio::test]
async fn a_write_still_in_flight_at_the_drain_deadline_is_recorded_as_uncertain() {
    if !python_sdk() {
        return;
    }
    let dir = TempDir::new("production");
    let (store, ledger) = sqlite(&dir.0);
    // Refused until an operator resolves it, so that it waits in the store
    // (under "rerun", the default, its duplicate would run it again).
    let config = dir.0.join("gateway.toml");
    let settings = "[tools.append_slowly]\non_uncertain = \"refuse\"\n";
    std::fs::write(&config, settings).expect("write the configuration");
    let config = config.display().to_string();
    let extra = ["--drain", "1s", "--config", &config];
    let mut served = Service::start(&store, &ledger, &extra).await;
    let client = served.client.clone();
    let session = client.session().await;
    // A write whose upstream never answers.
    let in_flight = tokio::spawn(async move {
        let args = json!({"entry": "c"});
        client.call(&session, "append_slowly", args).await
    });
    wait_for(
        || lines(&ledger) == ["slowly c"],
        "the write did not reach the upstream",
    )
    .await;
    served.signal(rustix::process::Signal::TERM);

    // Its client is told the outcome is not known; the gateway exits.
    let answered = in_flight.await.expect("the call");
    assert_eq!(answered["isError"], true, "{answered}");
    assert!(text(&answered).contains("not known"), "{answered}");
    assert!(served.exited().await.success());
    // The record says so, for an operator: it is not left running.
    let pending = idem(&["pending", "--json", "--store", &store]);
    assert_eq!(pending.lines().count(), 1, "{pending}");
    assert!(pending.contains("append_slowly"), "{pending}");
}
