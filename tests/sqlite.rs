//! `SqliteStore`: the conformance suite on a fresh file per case, schema
//! versioning, malformed rows, purging, and two stores (as two processes
//! would) on one file.
#![cfg(feature = "sqlite")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use std::io::Write;
use std::process::Stdio;

use idem::prelude::*;
use idem::testing::{Counter, Harness};
use idem::{Fingerprint, IdemStore, SqliteStore, WriteOptions};
use serde_json::json;
use support::TempDir;

/// A store on a file of its own; the directory goes with the harness.
struct SqliteHarness {
    store: Arc<SqliteStore>,
    _dir: TempDir,
}

impl SqliteHarness {
    async fn new() -> Option<SqliteHarness> {
        let dir = TempDir::new("sqlite");
        let store = SqliteStore::open(dir.0.join("idem.db"))
            .await
            .expect("open");
        Some(SqliteHarness {
            store: Arc::new(store),
            _dir: dir,
        })
    }
}

impl Harness for SqliteHarness {
    type Store = SqliteStore;

    fn store(&self) -> Arc<SqliteStore> {
        self.store.clone()
    }

    async fn corrupt(&self, key: &IdemKey, _: &Fingerprint) {
        let sql = format!(
            "INSERT OR REPLACE INTO idem_records (key, state, fingerprint, attempt, token, lease_until, payload, expires_at) VALUES ('{}', 'bogus', x'00', 0, NULL, NULL, NULL, 99999999999999)",
            key.as_str()
        );
        self.store
            .execute_raw(&sql)
            .await
            .expect("plant a malformed row");
    }
}

mod conformance {
    idem::conformance_tests!(super::SqliteHarness::new());
}

#[tokio::test]
async fn records_survive_reopening_the_file() {
    let dir = TempDir::new("sqlite-reopen");
    let path = dir.0.join("idem.db");
    let counter = Counter::default();
    let build = |store: SqliteStore| {
        Registry::builder(())
            .store(store)
            .tool(counter.clone())
            .build()
            .expect("registry")
    };
    let first = build(SqliteStore::open(&path).await.expect("open"));
    let out = first
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("call");
    drop(first);
    let second = build(SqliteStore::open(&path).await.expect("reopen"));
    assert_eq!(
        second
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("replay"),
        out
    );
    assert_eq!(counter.total(), 1, "the record outlived the first store");
}

#[tokio::test]
async fn a_newer_schema_is_refused_with_a_clear_error() {
    let dir = TempDir::new("sqlite-schema");
    let path = dir.0.join("idem.db");
    let store = SqliteStore::open(&path).await.expect("open");
    store
        .execute_raw("PRAGMA user_version = 7")
        .await
        .expect("bump");
    drop(store);
    let err = SqliteStore::open(&path).await.expect_err("newer schema");
    let text = err.to_string();
    assert!(
        text.contains("schema version 7") && text.contains("upgrade idem"),
        "{text}"
    );
}

#[tokio::test]
async fn malformed_rows_are_errors_not_runs() {
    let Some(h) = SqliteHarness::new().await else {
        return;
    };
    let rows = [
        "'bogus', x'00', 0, NULL, NULL, NULL",
        "'done', zeroblob(32), 0, NULL, NULL, NULL",
        "'running', zeroblob(32), 0, NULL, NULL, NULL",
        "'done', 'text, not a blob', 0, NULL, NULL, '1'",
    ];
    let store = h.store();
    idem::testing::malformed_records_are_refused(h.store(), rows.len(), |i, key| {
        let (store, row) = (store.clone(), rows[i]);
        async move {
            store
                .execute_raw(&format!(
                    "INSERT OR REPLACE INTO idem_records (key, state, fingerprint, attempt, token, lease_until, payload, expires_at) VALUES ('{}', {row}, 99999999999999)",
                    key.as_str()
                ))
                .await
                .expect("plant");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_run_each_operation_once() {
    let dir = TempDir::new("sqlite-shared");
    let path = dir.0.join("idem.db");
    let counter = Counter::new(
        Duration::from_millis(2),
        WriteOptions::new().on_in_flight(idem::OnInFlight::Wait(Duration::from_secs(30))),
    );
    let mut registries = Vec::new();
    for _ in 0..2 {
        registries.push(
            Registry::builder(())
                .store(SqliteStore::open(&path).await.expect("open"))
                .tool(counter.clone())
                .build()
                .expect("registry"),
        );
    }
    let tasks: Vec<_> = (0..200u64)
        .map(|i| {
            let registry = registries[(i % 2) as usize].clone();
            tokio::spawn(async move { registry.call("r", "counter", json!({ "n": i % 40 })).await })
        })
        .collect();
    for t in tasks {
        t.await.expect("task").expect("call");
    }
    assert_eq!(
        counter.total(),
        40,
        "executions == distinct operations across two connections"
    );
}

#[tokio::test]
async fn store_get_reads_what_the_registry_wrote() {
    let Some(h) = SqliteHarness::new().await else {
        return;
    };
    let registry = Registry::builder(())
        .store(h.store())
        .tool(Counter::default())
        .build()
        .expect("registry");
    registry
        .call("r", "counter", json!({"n": 5}))
        .await
        .expect("call");
    let (key, fp) = registry
        .identify("r", "counter", json!({"n": 5}))
        .expect("id")
        .expect("write");
    match h.store.get(&key).await.expect("get") {
        Some(idem::store::Entry::Done { fingerprint, .. }) => assert_eq!(fingerprint, fp),
        other => panic!("{other:?}"),
    }
}

/// Where the hammering processes leave one file per execution.
struct Effects(std::path::PathBuf);

/// Records an execution; a second one of the same operation is a duplicate.
#[write_tool(lease = "5s", on_in_flight = "wait(60s)")]
async fn effect(n: u64, ctx: &WriteCtx<Effects>) -> Result<u64, String> {
    let dir = &ctx.state().0;
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(format!("op-{n}")));
    if created.is_err() {
        let mut dups = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("duplicates"))
            .map_err(|e| e.to_string())?;
        writeln!(dups, "{n} by {}", std::process::id()).map_err(|e| e.to_string())?;
    }
    tokio::time::sleep(Duration::from_millis(3)).await;
    Ok(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by processes_sharing_one_file_run_each_operation_once"]
async fn child_sqlite_hammer() {
    let db = std::env::var("IDEM_DB").expect("IDEM_DB");
    let dir = std::env::var("IDEM_DOWNSTREAM").expect("IDEM_DOWNSTREAM");
    let registry = Registry::builder(Effects(dir.into()))
        .store(SqliteStore::open(&db).await.expect("open"))
        .tool(effect)
        .build()
        .expect("registry");
    let tasks: Vec<_> = (0..60u64)
        .map(|i| {
            let registry = registry.clone();
            let n = (i + u64::from(std::process::id())) % 30;
            tokio::spawn(async move { registry.call("run", "effect", json!({ "n": n })).await })
        })
        .collect();
    for t in tasks {
        let out = t.await.expect("task");
        assert!(out.is_ok(), "{out:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_sharing_one_file_run_each_operation_once() {
    let dir = TempDir::new("sqlite-procs");
    let db = dir.0.join("idem.db");
    let effects = dir.0.join("effects");
    std::fs::create_dir_all(&effects).expect("mkdir");
    // Create the schema once, so the children race on records, not DDL.
    drop(SqliteStore::open(&db).await.expect("open"));
    let children: Vec<_> = (0..3)
        .map(|_| {
            support::child("child_sqlite_hammer")
                .arg("--ignored")
                .env("IDEM_DB", &db)
                .env("IDEM_DOWNSTREAM", &effects)
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    for mut c in children {
        let status = tokio::task::spawn_blocking(move || c.wait())
            .await
            .expect("join")
            .expect("wait");
        assert!(status.success(), "a child failed: {status}");
    }
    let duplicates = std::fs::read_to_string(effects.join("duplicates")).unwrap_or_default();
    assert!(duplicates.is_empty(), "operations ran twice: {duplicates}");
    let executed = std::fs::read_dir(&effects).expect("read dir").count();
    assert_eq!(
        executed, 30,
        "executions == distinct operations across 3 processes"
    );
}

/// The write lock of a database file, held by another connection (as
/// another process would) until this is dropped.
struct WriteLock {
    release: Option<std::sync::mpsc::Sender<()>>,
    holder: Option<std::thread::JoinHandle<()>>,
}

impl WriteLock {
    /// Holds the lock now, and lets it go a moment later (a task's end).
    fn held_a_moment(path: &std::path::Path) -> tokio::task::JoinHandle<()> {
        let lock = WriteLock::hold(path);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(lock);
        })
    }

    fn hold(path: &std::path::Path) -> WriteLock {
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let path = path.to_owned();
        let holder = std::thread::spawn(move || {
            let conn = rusqlite::Connection::open(path).expect("open");
            conn.execute_batch("BEGIN IMMEDIATE").expect("lock");
            locked_tx.send(()).expect("signal");
            let _ = release_rx.recv();
            conn.execute_batch("COMMIT").expect("unlock");
        });
        locked_rx.recv().expect("the lock is held");
        WriteLock {
            release: Some(release_tx),
            holder: Some(holder),
        }
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(holder) = self.holder.take() {
            let _ = holder.join();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_given_up_while_the_file_is_locked_is_never_applied() {
    let dir = TempDir::new("sqlite-locked");
    let path = dir.0.join("idem.db");
    let store = Arc::new(SqliteStore::open(&path).await.expect("open"));
    let counter = Counter::default();
    let registry = Registry::builder(())
        .store(store.clone())
        .store_timeout(Duration::from_millis(300))
        .tool(counter.clone())
        .build()
        .expect("registry");
    let (key, _) = registry
        .identify("r", "counter", json!({"n": 1}))
        .expect("identify")
        .expect("a write tool");

    // Another connection (as another process would) holds the write lock
    // for longer than the registry waits for the store.
    let lock = WriteLock::hold(&path);
    match registry.call("r", "counter", json!({"n": 1})).await {
        Err(ToolError::Store {
            source: idem::StoreError::Timeout { op: "claim", .. },
            ..
        }) => {}
        other => panic!("expected the claim to time out, got {other:?}"),
    }
    drop(lock);

    // The store's thread runs jobs in order: once this read is answered,
    // the abandoned claim has had every chance to be applied.
    assert_eq!(
        store.get(&key).await.expect("get"),
        None,
        "the claim whose caller gave up was not applied"
    );
    registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("the retry runs at once, not refused as in flight");
    assert_eq!(counter.total(), 1);
}

/// A write that meets the file's lock held by another connection waits
/// for it (on the store's thread) instead of failing, whether it would
/// otherwise run at once on the caller's thread or not: claim, settle and
/// the replay of a duplicate all go through while the lock comes and goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_meet_a_lock_held_elsewhere_wait_for_it() {
    let dir = TempDir::new("sqlite-lock-waited");
    let path = dir.0.join("idem.db");
    let store = Arc::new(SqliteStore::open(&path).await.expect("open"));
    let counter = Counter::default();
    let registry = Registry::builder(())
        .store(store)
        .store_timeout(Duration::from_secs(30))
        .tool(counter.clone())
        .build()
        .expect("registry");
    for n in 0..3u64 {
        let release = WriteLock::held_a_moment(&path);
        let first = registry
            .call("r", "counter", json!({ "n": n }))
            .await
            .expect("the claim waited for the lock");
        release.await.expect("released");
        let release = WriteLock::held_a_moment(&path);
        let again = registry.call("r", "counter", json!({ "n": n })).await;
        release.await.expect("released");
        assert_eq!(again.ok(), Some(first), "the duplicate is replayed");
    }
    assert_eq!(counter.total(), 3, "each operation ran once");
}

/// A lock another connection holds is a slow answer, not an unreachable
/// store: a tool that runs when its store is unreachable fails closed
/// instead, so the operation recorded before is never run a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_elsewhere_never_runs_a_tool_unclaimed() {
    let dir = TempDir::new("sqlite-locked-run");
    let path = dir.0.join("idem.db");
    let store = Arc::new(SqliteStore::open(&path).await.expect("open"));
    let counter = Counter::new(
        Duration::ZERO,
        WriteOptions::new().on_store_error(idem::OnStoreError::Run),
    );
    let registry = Registry::builder(())
        .store(store)
        .store_timeout(Duration::from_millis(300))
        .tool(counter.clone())
        .build()
        .expect("registry");
    let first = registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("recorded");

    let lock = WriteLock::hold(&path);
    for n in [1, 2] {
        match registry.call("r", "counter", json!({ "n": n })).await {
            Err(ToolError::Store { source, .. }) => assert!(!source.is_unreachable(), "{source}"),
            other => panic!("a locked store must fail closed, got {other:?}"),
        }
    }
    assert_eq!(
        counter.total(),
        1,
        "nothing ran unclaimed while the lock was held"
    );
    drop(lock);
    let replay = registry.call("r", "counter", json!({"n": 1})).await;
    assert_eq!(replay.ok(), Some(first), "the recorded result is replayed");
    assert_eq!(counter.total(), 1);
}

/// The database file on a small filesystem that fills up (`SQLITE_FULL`):
/// a full store, waited out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_waited_out() {
    let Some(disk) = support::SmallDisk::mount(4096, None) else {
        return;
    };
    let store = SqliteStore::open(disk.path.join("idem.db"))
        .await
        .expect("open");
    let disk = Arc::new(disk);
    let filler = disk.clone();
    idem::testing::cases::full_store_is_waited_out(
        Arc::new(store),
        move || filler.fill(),
        || disk.free(),
    )
    .await;
}
