//! How soon a call that waits for a person (`approval_wait`) runs its
//! body once the person decides, on each store: a call waits, a second
//! registry on a store of its own over the same records (another
//! process, as far as the store can tell; the memory store's records are
//! one process's, so there it is the same store) approves, and the time
//! from the approval's return to the body's start is taken, `SAMPLES`
//! times per store; p50, p99 and the largest.
//!
//! `cargo bench -p idem-checks --bench decision_to_run` prints one line of
//! JSON per store: `{"store":"redis","p50_ms":..,"p99_ms":..,"max_ms":..,"samples":..}`.
//! A store that cannot be reached (Redis at 127.0.0.1:6379, PostgreSQL at
//! `IDEM_POSTGRES_URL` or `postgres://postgres@127.0.0.1:5432/test`) is
//! said so and skipped.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idem::prelude::*;
use idem::store::RecordState;
use idem::{IdemStore, MemoryStore, PostgresStore, RedisStore, SqliteStore};
use serde_json::json;

const SAMPLES: usize = 100;

/// When the body last started.
static STARTED: Mutex<Option<Instant>> = Mutex::new(None);

/// Refund an order once a person approves; the call waits for it.
#[write_tool(approval = "required", approval_wait = "1m")]
async fn refund(order_id: u64, _ctx: &WriteCtx) -> Result<u64, String> {
    *STARTED.lock().expect("lock") = Some(Instant::now());
    Ok(order_id)
}

/// Milliseconds from each approval's return (through `deciding`) to the
/// body's start (of a call through `waiting`).
async fn measure(waiting: Arc<dyn IdemStore>, deciding: Arc<dyn IdemStore>) -> Vec<f64> {
    let namespace = format!("bench-{}", std::process::id());
    let registry = Registry::builder(())
        .store(waiting)
        .namespace(namespace.clone())
        .tool(refund)
        .build()
        .expect("registry");
    let person = Registry::builder(())
        .store(deciding)
        .namespace(namespace)
        .build()
        .expect("registry");
    let salt = std::process::id() as u64 * 1_000_000;
    let mut took = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES as u64 {
        let args = json!({ "order_id": salt + i });
        let (key, _) = registry
            .identify("run-1", "refund", args.clone())
            .expect("identify")
            .expect("a write");
        let call = registry.call("run-1", "refund", args);
        let decide = async {
            loop {
                let info = person.store().inspect(&key).await.expect("inspect");
                if info.is_some_and(|r| r.state == RecordState::Awaiting) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // Somewhere in the call's wait, not just as it starts.
            tokio::time::sleep(Duration::from_millis(u64::from((i % 7) as u32) * 37)).await;
            person.approve(&key, "bench").await.expect("approved");
            Instant::now()
        };
        let (ran, decided) = tokio::join!(call, decide);
        ran.expect("ran once approved");
        let started = STARTED.lock().expect("lock").take().expect("the body ran");
        took.push(started.saturating_duration_since(decided).as_secs_f64() * 1000.0);
    }
    took
}

/// A store, or why it cannot be reached.
type Opened = Result<Arc<dyn IdemStore>, String>;

/// A new store of the records of `name` (`sqlite` in `dir`).
async fn open(name: &str, dir: &std::path::Path) -> Opened {
    let postgres = std::env::var("IDEM_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let opened = match name {
        "sqlite" => SqliteStore::open(dir.join("idem.db"))
            .await
            .map(|s| Arc::new(s) as _),
        "redis" => RedisStore::connect("redis://127.0.0.1:6379")
            .await
            .map(|s| Arc::new(s) as _),
        _ => PostgresStore::connect(&postgres)
            .await
            .map(|s| Arc::new(s) as _),
    };
    opened.map_err(|e| e.to_string())
}

fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = std::env::temp_dir().join(format!("idem-decision-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let memory: Arc<dyn IdemStore> = Arc::new(MemoryStore::new());
    let mut stores: Vec<(&str, Opened, Opened)> = vec![("memory", Ok(memory.clone()), Ok(memory))];
    for name in ["sqlite", "redis", "postgres"] {
        stores.push((name, open(name, &dir).await, open(name, &dir).await));
    }
    for (name, waiting, deciding) in stores {
        match waiting.and_then(|w| Ok((w, deciding?))) {
            Ok((waiting, deciding)) => {
                let took = measure(waiting, deciding).await;
                println!(
                    "{{\"store\":\"{name}\",\"p50_ms\":{:.1},\"p99_ms\":{:.1},\"max_ms\":{:.1},\"samples\":{}}}",
                    quantile(&took, 0.5),
                    quantile(&took, 0.99),
                    quantile(&took, 1.0),
                    took.len()
                );
            }
            Err(e) => eprintln!("{name}: not measured, the store cannot be reached: {e}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
