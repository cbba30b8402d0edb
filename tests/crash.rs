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
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "redis"))]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use idem::prelude::*;
use idem::{IdemStore, PostgresOptions, PostgresStore, RedisStore, SqliteStore};
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
    let registry = Registry::builder(Shop {
        downstream: Downstream(PathBuf::from(env("IDEM_DOWNSTREAM"))),
        crash_at: crash_at.clone(),
    })
    .store(open_store(&spec).await)
    .namespace(namespace(&spec))
    .tool(charge)
    .build()
    .expect("registry");
    let out = registry
        .call(
            "run-7",
            "charge",
            json!({ "order_id": "o-1", "amount": 4200 }),
        )
        .await;
    crash_point(&crash_at, "after-complete");
    match out {
        Ok(v) => println!("RESULT {v}"),
        Err(e) => println!("ERROR {e}"),
    }
}

/// Runs the child to `point` (or to the end for `none`) and returns the
/// line it printed there.
fn run_child(spec: &str, point: &str, downstream: &Path) -> String {
    let mut child = support::child("child_crash_worker")
        .arg("--ignored")
        .env("IDEM_STORE", spec)
        .env("IDEM_CRASH_AT", point)
        .env("IDEM_DOWNSTREAM", downstream)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("stdout");
    let marker = if point == "none" {
        "RESULT"
    } else {
        "CRASHPOINT"
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
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

#[test]
fn sqlite_crash_and_resume() {
    for point in POINTS {
        let dir = TempDir::new("crash-sqlite");
        crash_and_resume(
            &format!("sqlite:{}", dir.0.join("idem.db").display()),
            point,
        );
    }
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
}
