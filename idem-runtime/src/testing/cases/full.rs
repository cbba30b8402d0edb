//! A store that runs out of memory or space, made so for real by the
//! backend's test (a Redis at its `maxmemory`, a database on a small
//! filesystem filled up): not a fault every store can be put in the same
//! way, so the backend passes what fills the store and what frees it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::error::{StoreError, ToolError};
use crate::store::IdemStore;
use crate::testing::fixtures::Counter;
use crate::testing::helpers::*;
use crate::tool::WriteOptions;

/// The store fills up (`fill`) while a body runs, for longer than the
/// body's lease, then is freed (`free`): new operations fail closed saying
/// the store is full; the result produced meanwhile is retried while the
/// heartbeat holds the lease, up to `max_hold`, and lands once the store
/// is freed; a duplicate is replayed even while the store is full again,
/// since a full store can still be read. The body runs once.
pub async fn full_store_is_waited_out(
    store: Arc<dyn IdemStore>,
    fill: impl Fn() + Send + Sync + 'static,
    free: impl Fn(),
) {
    let fill = Arc::new(fill);
    let in_body = fill.clone();
    let lease = Duration::from_secs(2);
    let counter = Counter::new(
        Duration::ZERO,
        WriteOptions::new().lease(lease).max_hold(LONG),
    )
    .on_run(move || in_body());
    let registry = Arc::new(registry(store, &namespace(), &counter));
    let running = registry.clone();
    let call = tokio::spawn(async move { running.call("r", "counter", json!({"n": 1})).await });
    while counter.finished() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Full for longer than the lease.
    for _ in 0..3 {
        match registry.call("r", "counter", json!({"n": 2})).await {
            Err(ToolError::Store {
                source: StoreError::Full { .. },
                ..
            }) => {}
            other => panic!("a claim on a full store must fail closed as full, got {other:?}"),
        }
        tokio::time::sleep(lease / 2).await;
    }
    assert!(
        !call.is_finished(),
        "the result was given up while the lease could still be held"
    );
    free();
    let out = call
        .await
        .expect("task")
        .expect("the result, recorded once the store was freed");
    fill();
    let replay = registry.call("r", "counter", json!({"n": 1})).await;
    free();
    assert_eq!(replay.ok(), Some(out), "replayed from a full store");
    assert_eq!(counter.total(), 1, "ran once");
}
