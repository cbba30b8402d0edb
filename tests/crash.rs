//! Crash and resume with real processes (the third source of duplicates).
//!
//! A child process runs a write tool against a durable store and is
//! SIGKILLed at one point: right after its claim (before the body's side
//! effect), inside the body (after the side effect), or after the result was
//! recorded. A fresh process then makes the same call. The downstream — a
//! directory standing for a payment provider — deduplicates on the key it
//! is handed, and also logs every attempt it sees.
//!
//! Expected, for SQLite, PostgreSQL and Redis alike: after a crash in the
//! claim or the body, the retry waits out the lease and runs with the same
//! `idem_key()` and `attempt()` one higher; after a crash past `complete`,
//! the retry replays without running. One downstream effect in every case.
//!
//! Then a downstream that cannot deduplicate (an email gateway: every
//! request it gets is sent), under each policy for an uncertain outcome:
//! `rerun` sends twice after a crash in the body; `verify` sends once (the
//! retry asks the gateway's log first); `refuse` sends zero times
//! (a crash after the claim) or once (in the body), answers the retry
//! `OutcomeUnknown`, and sends nothing more until an operator resolves it:
//! done (the retry gets the operator's result) or rerun (the retry sends,
//! one attempt higher).
//!
//! Then calls that wait for a person's approval (`approval_wait`): a
//! process killed while it waits loses nothing (the operation still
//! awaits, and once approved the next call charges once), and two
//! processes waiting on one operation charge once between them when it
//! is approved.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use idem::prelude::*;
use idem::{
    IdemStore, PostgresOptions, PostgresStore, RedisStore, Resolution, SqliteStore, Verified,
};
use serde_json::{Value, json};
use support::TempDir;

/// A payment provider that honours an idempotency key: one effect per key,
/// and a log line per request.
struct Downstream(PathBuf);

impl Downstream {
    fn charge(&self, key: &str, attempt: u32, amount: u64) -> std::io::Result<()> {
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.0.join("requests.log"))?;
        writeln!(log, "{key} attempt={attempt} amount={amount}")?;
        log.sync_all()?;
        let effect = self.0.join(key.replace(':', "_"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(effect)
        {
            Ok(mut f) => {
                writeln!(f, "{amount}")?;
                f.sync_all()
            }
            // Already charged under this key: the provider dedups.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn effects(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter(|e| e.as_ref().is_ok_and(|e| e.file_name() != "requests.log"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// An email gateway: every request is an email sent, keyed or not.
    fn send(&self, to: &str, attempt: u32) -> std::io::Result<()> {
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.0.join("sent.log"))?;
        writeln!(log, "{to} attempt={attempt}")?;
        log.sync_all()
    }

    fn sent(dir: &Path) -> usize {
        std::fs::read_to_string(dir.join("sent.log")).map_or(0, |s| s.lines().count())
    }

    fn requests(dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("requests.log"))
            .map(|s| s.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }
}

struct Shop {
    downstream: Downstream,
    crash_at: String,
}

/// Stops here, visibly, for the parent to kill.
fn crash_point(at: &str, here: &str) {
    if at == here {
        println!("CRASHPOINT {here}");
        let _ = std::io::stdout().flush();
        loop {
            std::thread::sleep(Duration::from_secs(60));
        }
    }
}

/// Charge an order.
#[write_tool(lease = "1s", on_in_flight = "wait(30s)")]
async fn charge(order_id: String, amount: u64, ctx: &WriteCtx<Shop>) -> Result<Value, String> {
    let shop = ctx.state();
    crash_point(&shop.crash_at, "after-claim");
    shop.downstream
        .charge(ctx.idem_key().as_str(), ctx.attempt(), amount)
        .map_err(|e| e.to_string())?;
    crash_point(&shop.crash_at, "in-body");
    Ok(json!({ "order_id": order_id, "key": ctx.idem_key().as_str(), "attempt": ctx.attempt() }))
}

/// Charge an order once a person approves; the call waits for it.
#[write_tool(lease = "1s", approval = "required", approval_wait = "1m")]
async fn charge_approved(
    order_id: String,
    amount: u64,
    ctx: &WriteCtx<Shop>,
) -> Result<Value, String> {
    charge_once(order_id, amount, ctx)
}

/// The charge itself, under the call's key.
fn charge_once(order_id: String, amount: u64, ctx: &WriteCtx<Shop>) -> Result<Value, String> {
    ctx.state()
        .downstream
        .charge(ctx.idem_key().as_str(), ctx.attempt(), amount)
        .map_err(|e| e.to_string())?;
    Ok(json!({ "order_id": order_id, "key": ctx.idem_key().as_str(), "attempt": ctx.attempt() }))
}

/// Send an email, at most once.
#[write_tool(lease = "1s", on_in_flight = "wait(30s)", on_uncertain = "refuse")]
async fn send_refuse(to: String, ctx: &WriteCtx<Shop>) -> Result<Value, String> {
    send(to, ctx)
}

/// Send an email, again after a crash.
#[write_tool(lease = "1s", on_in_flight = "wait(30s)")]
async fn send_rerun(to: String, ctx: &WriteCtx<Shop>) -> Result<Value, String> {
    send(to, ctx)
}

/// Send an email, asking the gateway first after a crash.
#[write_tool(lease = "1s", on_in_flight = "wait(30s)", verify = was_sent)]
async fn send_verify(to: String, ctx: &WriteCtx<Shop>) -> Result<Value, String> {
    send(to, ctx)
}

/// Asks the gateway whether an email to `to` went out: its log is the
/// truth.
async fn was_sent(to: String, ctx: &WriteCtx<Shop>) -> Result<Verified<Value>, String> {
    let log =
        std::fs::read_to_string(ctx.state().downstream.0.join("sent.log")).unwrap_or_default();
    Ok(
        match log.lines().find(|line| line.starts_with(&format!("{to} "))) {
            Some(line) => Verified::Done(json!({ "to": to, "verified": line })),
            None => Verified::NotDone,
        },
    )
}

/// The body the email tools share.
fn send(to: String, ctx: &WriteCtx<Shop>) -> Result<Value, String> {
    let shop = ctx.state();
    crash_point(&shop.crash_at, "after-claim");
    shop.downstream
        .send(&to, ctx.attempt())
        .map_err(|e| e.to_string())?;
    crash_point(&shop.crash_at, "in-body");
    Ok(json!({ "to": to, "attempt": ctx.attempt() }))
}

/// The registry every process of a scenario builds: the store of `spec`,
/// the downstream in `downstream`, stopping at `crash_at`.
async fn shop(spec: &str, downstream: &Path, crash_at: &str) -> Registry<Shop> {
    Registry::builder(Shop {
        downstream: Downstream(downstream.to_owned()),
        crash_at: crash_at.to_owned(),
    })
    .store(open_store(spec).await)
    .namespace(namespace(spec))
    .tool(charge)
    .tool(charge_approved)
    .tool(send_refuse)
    .tool(send_rerun)
    .tool(send_verify)
    .build()
    .expect("registry")
}

/// The store a child opens, from `IDEM_STORE`.
async fn open_store(spec: &str) -> std::sync::Arc<dyn IdemStore> {
    match spec.split_once(':') {
        Some(("sqlite", path)) => {
            std::sync::Arc::new(SqliteStore::open(path).await.expect("sqlite"))
        }
        Some(("postgres", schema)) => std::sync::Arc::new(
            PostgresStore::connect_with(
                &support::postgres_url(),
                PostgresOptions::new().schema(schema),
            )
            .await
            .expect("postgres"),
        ),
        Some(("redis", _)) => std::sync::Arc::new(
            RedisStore::connect(&support::redis_url())
                .await
                .expect("redis"),
        ),
        _ => panic!("bad IDEM_STORE {spec:?}"),
    }
}

fn namespace(spec: &str) -> String {
    // Redis is shared: give each scenario keys of its own.
    match spec.split_once(':') {
        Some(("redis", ns)) => ns.to_owned(),
        _ => "crash".to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by the crash tests"]
async fn child_crash_worker() {
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let spec = env("IDEM_STORE");
    let crash_at = env("IDEM_CRASH_AT");
    let downstream = PathBuf::from(env("IDEM_DOWNSTREAM"));
    let registry = shop(&spec, &downstream, &crash_at).await;
    let (tool, args) = match std::env::var("IDEM_TOOL") {
        Ok(tool) => (tool, json!({ "to": env("IDEM_TO") })),
        Err(_) => (
            "charge".to_owned(),
            json!({ "order_id": "o-1", "amount": 4200 }),
        ),
    };
    let (tool, args) = match std::env::var("IDEM_APPROVED") {
        Ok(order) => (
            "charge_approved".to_owned(),
            json!({ "order_id": order, "amount": 4200 }),
        ),
        Err(_) => (tool, args),
    };
    // A call that waits for a person says so, once, for the parent.
    let said = std::sync::atomic::AtomicBool::new(false);
    let told = |_: &idem::Waiting<'_>| {
        if !said.swap(true, std::sync::atomic::Ordering::SeqCst) {
            println!("WAITING");
            let _ = std::io::stdout().flush();
        }
    };
    let context = idem::CallContext::run("run-7").on_wait(&told);
    let out = registry.call(context, &tool, args).await;
    crash_point(&crash_at, "after-complete");
    match out {
        Ok(v) => println!("RESULT {v}"),
        Err(e) => println!("ERROR {e}"),
    }
}

/// Runs the child to `point` (or to the end for `none`) and returns the
/// line it printed there: the charge, or with `email` (tool, recipient)
/// an email tool.
fn run_child(spec: &str, point: &str, downstream: &Path) -> String {
    run_child_with(spec, point, downstream, None)
}

fn run_child_with(
    spec: &str,
    point: &str,
    downstream: &Path,
    email: Option<(&str, &str)>,
) -> String {
    let mut command = support::child("child_crash_worker");
    command
        .arg("--ignored")
        .env("IDEM_STORE", spec)
        .env("IDEM_CRASH_AT", point)
        .env("IDEM_DOWNSTREAM", downstream)
        .stdout(Stdio::piped());
    if let Some((tool, to)) = email {
        command.env("IDEM_TOOL", tool).env("IDEM_TO", to);
    }
    let (mut child, rx) = spawned(&mut command);
    let marker = if point == "none" {
        "RESULT"
    } else {
        "CRASHPOINT"
    };
    let line = loop {
        match rx.recv_timeout(Duration::from_secs(90)) {
            Ok(line) if line.contains(marker) || line.contains("ERROR") => {
                break line[line.find(marker).or(line.find("ERROR")).unwrap_or(0)..].to_owned();
            }
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                panic!("the child ({spec}, {point}) never printed {marker}: {e}");
            }
        }
    };
    if point == "none" {
        assert!(child.wait().expect("wait").success());
    } else {
        support::signal(child.id(), "KILL");
        let _ = child.wait();
    }
    line
}

fn crash_and_resume(spec: &str, point: &str) {
    let downstream = TempDir::new("downstream");
    let crashed = run_child(spec, point, &downstream.0);
    assert_eq!(crashed, format!("CRASHPOINT {point}"));
    let resumed = run_child(spec, "none", &downstream.0);
    let result: Value = serde_json::from_str(
        resumed
            .strip_prefix("RESULT ")
            .unwrap_or_else(|| panic!("the retry failed: {resumed}")),
    )
    .expect("result JSON");
    let requests = Downstream::requests(&downstream.0);
    assert_eq!(
        Downstream::effects(&downstream.0),
        1,
        "{spec} {point}: exactly one downstream effect; requests: {requests:?}"
    );
    let key = result["key"].as_str().expect("key");
    assert!(
        requests.iter().all(|r| r.starts_with(key)),
        "one key throughout: {requests:?}"
    );
    match point {
        // The claim lapsed; the retry ran with the next attempt.
        "after-claim" => {
            assert_eq!(result["attempt"], 1);
            assert_eq!(
                requests.len(),
                1,
                "the crashed run never reached downstream"
            );
        }
        "in-body" => {
            assert_eq!(result["attempt"], 1);
            assert_eq!(
                requests.len(),
                2,
                "the retry asked again, under the same key"
            );
        }
        // The result was recorded: the retry replays it.
        "after-complete" => {
            assert_eq!(result["attempt"], 0);
            assert_eq!(requests.len(), 1, "the retry did not run");
        }
        other => panic!("unknown point {other}"),
    }
}

const POINTS: [&str; 3] = ["after-claim", "in-body", "after-complete"];

/// A child that calls `charge_approved` for `order` on the store of
/// `spec`, which waits for a person: the child, once it said it waits, and
/// the lines it prints after.
fn waiting_child(
    spec: &str,
    order: &str,
    downstream: &Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let (mut child, lines) = approved_child(spec, order, downstream);
    let mut said = Vec::new();
    loop {
        match lines.recv_timeout(Duration::from_secs(90)) {
            Ok(line) if line.ends_with("WAITING") => return (child, lines),
            Ok(line) => said.push(line),
            Err(e) => {
                let _ = child.kill();
                panic!("the child ({spec}, {order}) never waited ({e}); it said {said:?}");
            }
        }
    }
}

/// The `RESULT` line a waiting child prints once its call is answered.
fn answered(mut child: std::process::Child, lines: &std::sync::mpsc::Receiver<String>) -> Value {
    let line = loop {
        match lines.recv_timeout(Duration::from_secs(90)) {
            // After the harness's `test child_crash_worker ... ` when the
            // child did not wait.
            Ok(line) if line.contains("RESULT ") || line.contains("ERROR ") => {
                let at = line.find("RESULT ").or(line.find("ERROR ")).unwrap_or(0);
                break line[at..].to_owned();
            }
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                panic!("the waiting child was never answered: {e}");
            }
        }
    };
    assert!(child.wait().expect("wait").success());
    let result = line
        .strip_prefix("RESULT ")
        .unwrap_or_else(|| panic!("{line}"));
    serde_json::from_str(result).expect("result JSON")
}

/// Calls that wait for approval, in processes: one killed while it waits
/// loses nothing (the operation awaits; approved, the next call charges
/// once); two waiting on one operation charge once between them.
fn waiting_processes(spec: &str) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let downstream = TempDir::new("downstream");
    let person = rt.block_on(shop(spec, &downstream.0, "none"));
    let key_of = |order: &str| {
        let args = json!({ "order_id": order, "amount": 4200 });
        let identified = person.identify("run-7", "charge_approved", args);
        identified.expect("identify").expect("a write tool").0
    };
    let (mut killed, _) = waiting_child(spec, "o-killed", &downstream.0);
    support::signal(killed.id(), "KILL");
    let _ = killed.wait();
    let key = key_of("o-killed");
    let record = rt.block_on(person.store().inspect(&key)).expect("inspect");
    assert_eq!(
        record.map(|r| r.state),
        Some(idem::store::RecordState::Awaiting),
        "{spec}: killed while waiting, the operation still awaits"
    );
    rt.block_on(person.approve(&key, "ops")).expect("approved");
    let (resumed, lines) = approved_child(spec, "o-killed", &downstream.0);
    let result = answered(resumed, &lines);
    assert_eq!(result["attempt"], 0, "{spec}: nothing ran before: {result}");

    let (one, one_lines) = waiting_child(spec, "o-both", &downstream.0);
    let (two, two_lines) = waiting_child(spec, "o-both", &downstream.0);
    rt.block_on(person.approve(&key_of("o-both"), "ops"))
        .expect("approved");
    let (first, second) = (answered(one, &one_lines), answered(two, &two_lines));
    assert_eq!(first, second, "{spec}: the same answer to both");
    assert_eq!(
        Downstream::effects(&downstream.0),
        2,
        "{spec}: one charge per approved operation; requests: {:?}",
        Downstream::requests(&downstream.0)
    );
}

/// A child that calls `charge_approved` for `order` on the store of
/// `spec`, and the lines it prints.
fn approved_child(
    spec: &str,
    order: &str,
    downstream: &Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut command = support::child("child_crash_worker");
    command
        .arg("--ignored")
        .env("IDEM_STORE", spec)
        .env("IDEM_CRASH_AT", "none")
        .env("IDEM_DOWNSTREAM", downstream)
        .env("IDEM_APPROVED", order)
        .stdout(Stdio::piped());
    spawned(&mut command)
}

/// `command`, started, and the lines it prints as they come.
fn spawned(
    command: &mut std::process::Command,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = command.spawn().expect("spawn child");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// The email scenarios on the store of `spec`: `rerun` after a crash in
/// the body sends twice; `verify` sends once either way (the retry asks
/// the gateway); `refuse` after a crash after the claim or in the body
/// sends zero or one, refuses the retry, and sends nothing more until it
/// is resolved (to run again, or done).
fn emails_under_each_policy(spec: &str) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let downstream = TempDir::new("emails");
    let dir = &downstream.0;
    let child =
        |point: &str, tool: &str, to: &str| run_child_with(spec, point, dir, Some((tool, to)));
    let result = |line: String| -> Value {
        serde_json::from_str(
            line.strip_prefix("RESULT ")
                .unwrap_or_else(|| panic!("{spec}: the call failed: {line}")),
        )
        .expect("result JSON")
    };

    child("in-body", "send_rerun", "rerun@example.com");
    let again = result(child("none", "send_rerun", "rerun@example.com"));
    assert_eq!(again["attempt"], 1);
    assert_eq!(Downstream::sent(dir), 2, "{spec}: rerun sends again");

    for point in ["after-claim", "in-body"] {
        let to = format!("verify-{point}@example.com");
        let before = Downstream::sent(dir);
        child(point, "send_verify", &to);
        let answer = result(child("none", "send_verify", &to));
        assert_eq!(
            Downstream::sent(dir) - before,
            1,
            "{spec} {point}: verify sends once"
        );
        // Verified after a crash in the body; run (attempt 1) after one
        // before the side effect.
        let verified = answer.get("verified").is_some();
        assert_eq!(verified, point == "in-body", "{spec} {point}: {answer}");
    }

    let registry = rt.block_on(shop(spec, dir, "none"));
    for (point, sent) in [("after-claim", 0), ("in-body", 1)] {
        let to = format!("{point}@example.com");
        let before = Downstream::sent(dir);
        child(point, "send_refuse", &to);
        let refused = child("none", "send_refuse", &to);
        assert!(
            refused.starts_with("ERROR") && refused.contains("nobody knows whether"),
            "{spec} {point}: {refused}"
        );
        assert_eq!(Downstream::sent(dir) - before, sent, "{spec} {point}");
        let (key, _) = registry
            .identify("run-7", "send_refuse", json!({ "to": to }))
            .expect("identify")
            .expect("a write tool");
        if sent == 0 {
            // Nothing went out: the operator lets it run again.
            rt.block_on(registry.resolve(&key, Resolution::Rerun))
                .expect("resolved to rerun");
            let ran = result(child("none", "send_refuse", &to));
            assert_eq!(ran["attempt"], 2, "{spec} {point}");
            assert_eq!(Downstream::sent(dir) - before, 1, "{spec} {point}");
        } else {
            // It went out: the operator records it as done.
            let by_hand = json!({ "to": to, "attempt": 0 });
            rt.block_on(registry.resolve(&key, Resolution::Done(by_hand.clone())))
                .expect("resolved done");
            assert_eq!(result(child("none", "send_refuse", &to)), by_hand);
            assert_eq!(Downstream::sent(dir) - before, 1, "{spec} {point}");
        }
    }
}

#[test]
fn sqlite_crash_and_resume() {
    for point in POINTS {
        let dir = TempDir::new("crash-sqlite");
        crash_and_resume(
            &format!("sqlite:{}", dir.0.join("idem.db").display()),
            point,
        );
    }
    let dir = TempDir::new("crash-sqlite");
    emails_under_each_policy(&format!("sqlite:{}", dir.0.join("idem.db").display()));
    let dir = TempDir::new("crash-sqlite");
    waiting_processes(&format!("sqlite:{}", dir.0.join("idem.db").display()));
}

#[test]
fn postgres_crash_and_resume() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let Some((client, schema)) = rt.block_on(support::postgres_schema()) else {
        return;
    };
    for point in POINTS {
        rt.block_on(client.batch_execute(&format!(
            "DROP TABLE IF EXISTS {schema}.idem_records; DROP TABLE IF EXISTS {schema}.idem_records_schema"
        )))
        .expect("fresh table");
        crash_and_resume(&format!("postgres:{schema}"), point);
    }
    emails_under_each_policy(&format!("postgres:{schema}"));
    rt.block_on(client.batch_execute(&format!(
        "DROP TABLE IF EXISTS {schema}.idem_records; DROP TABLE IF EXISTS {schema}.idem_records_schema"
    )))
    .expect("fresh table");
    waiting_processes(&format!("postgres:{schema}"));
    rt.block_on(client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")))
        .expect("drop schema");
}

#[test]
fn redis_crash_and_resume() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    if rt.block_on(support::shared_redis()).is_none() {
        return;
    }
    for point in POINTS {
        let ns = format!(
            "idem-test-crash-{:x}",
            idem::store::LeaseToken::generate(0).id() as u64
        );
        crash_and_resume(&format!("redis:{ns}"), point);
    }
    let ns = format!(
        "idem-test-crash-{:x}",
        idem::store::LeaseToken::generate(0).id() as u64
    );
    emails_under_each_policy(&format!("redis:{ns}"));
    let ns = format!(
        "idem-test-crash-{:x}",
        idem::store::LeaseToken::generate(0).id() as u64
    );
    waiting_processes(&format!("redis:{ns}"));
}
