//! Faults made for real on the network between a store and its server,
//! through a [`Proxy`]: cut, stalled, black-holed and silently frozen
//! connections while a tool runs. A store without a server passes them at once.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::error::ToolError;
use crate::store::IdemStore;
use crate::testing::fixtures::Counter;
use crate::testing::harness::Harness;
use crate::testing::helpers::*;
use crate::testing::proxy::Proxy;
use crate::tool::{OnInFlight, OnStoreError, WriteOptions};

/// A proxy in front of the harness's server and a store through it, with
/// the registry's usual settings; `None` for a store without a server.
async fn proxied<H: Harness>(h: &H) -> Option<(Proxy, Arc<H::Store>)> {
    let server = h.server()?;
    let proxy = Proxy::start(server).await.expect("start a proxy");
    let store = h.store_via(proxy.addr()).await;
    Some((proxy, store))
}

/// Connections cut before a claim and between the body and its record:
/// the operation still runs once, its result is recorded and replayed.
pub async fn net_cut_connections_lose_nothing<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let proxy = Arc::new(proxy);
    let cut = proxy.clone();
    let counter = Counter::new(Duration::ZERO, WriteOptions::new()).on_run(move || cut.cut());
    let ns = namespace();
    // A call after a cut reconnects at once: a store operation that waited
    // for anything else (a dead connection's answer, another task's
    // dialing) would wait out this bound and fail the call. Five seconds,
    // not the usual one: on a loaded machine a reconnection (and an ACL
    // user's AUTH) can take longer than a second.
    let registry = registry_with(store, &ns, &counter, |b| {
        b.store_timeout(Duration::from_secs(5))
    });
    let direct = registry_with(h.store(), &ns, &counter, |b| b);
    for n in 0..3u64 {
        // The body cuts every connection: the record goes over a new one.
        let out = registry
            .call("r", "counter", json!({ "n": n }))
            .await
            .expect("the call survives the cut");
        // Cut again while idle: the replay goes over a new one too.
        proxy.cut();
        let replay = registry
            .call("r", "counter", json!({ "n": n }))
            .await
            .expect("the replay survives the cut");
        assert_eq!(out, replay);
        assert_eq!(
            direct.call("r", "counter", json!({ "n": n })).await.ok(),
            Some(out),
            "the result is recorded in the store"
        );
    }
    assert_eq!(counter.total(), 3, "each operation ran once");
    assert!(proxy.accepted() > 1, "the cuts forced new connections");
}

/// Every open connection freezes silently (half-open TCP) while new ones
/// are served: a store judges its connections by their answers, so the
/// result produced during the freeze is recorded over a new connection and
/// replayed, at most one call after an idle freeze fails (its operation
/// timed out, which retires the connection), and a tool that runs when its
/// store is unreachable does not run unclaimed, nor twice, while the store
/// can be reached over a new connection.
pub async fn net_frozen_connections_are_replaced<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    frozen_connections_are_replaced(store, h.store(), move || proxy.freeze()).await;
}

/// [`net_frozen_connections_are_replaced`] for a store whose server is
/// several, each behind a proxy of its own (a cluster): `store` connects
/// through the proxies, `direct` to the servers (or, for a cluster whose
/// nodes announce the proxies, through them too: it then meets the
/// freezes as `store` does), and `freeze` freezes every proxy's
/// connections.
pub async fn frozen_connections_are_replaced(
    store: Arc<dyn IdemStore>,
    direct: Arc<dyn IdemStore>,
    freeze: impl Fn() + Send + Sync + 'static,
) {
    let freeze = Arc::new(freeze);
    let in_body = freeze.clone();
    let counter = Counter::new(Duration::ZERO, WriteOptions::new()).on_run(move || in_body());
    let ns = namespace();
    let bounded = |b: crate::RegistryBuilder<()>| b.store_timeout(Duration::from_millis(500));
    let proxied = registry_with(store.clone(), &ns, &counter, bounded);
    let checks = registry_with(direct.clone(), &ns, &counter, bounded);
    for n in 0..3u64 {
        // The body freezes every open connection: its result goes over a
        // new one.
        let out = proxied
            .call("r", "counter", json!({ "n": n }))
            .await
            .expect("the call survives the freeze");
        let recorded = served_after_a_freeze(&checks, n).await;
        assert_eq!(
            recorded, out,
            "the result produced during the freeze is recorded"
        );
        // Frozen while idle: the first call may time out on the frozen
        // connection; the one after it goes over a new one.
        freeze();
        assert_eq!(served_after_a_freeze(&proxied, n).await, out);
    }
    assert_eq!(counter.total(), 3, "each operation ran once");

    // A tool that runs when its store is unreachable: the store is not.
    let runs = Counter::new(
        Duration::ZERO,
        WriteOptions::new().on_store_error(OnStoreError::Run),
    );
    let open = registry_with(store, &ns, &runs, bounded);
    open.call("r", "counter", json!({ "n": 10 }))
        .await
        .expect("a first call, claimed");
    freeze();
    let out = open
        .call("r", "counter", json!({ "n": 11 }))
        .await
        .expect("the call goes over a new connection");
    assert_eq!(out.get("unclaimed"), None, "ran without a claim: {out}");
    let checks = registry_with(direct, &ns, &runs, bounded);
    let replay = served_after_a_freeze(&checks, 11).await;
    assert_eq!(replay, out, "the result is recorded and replayed");
    assert_eq!(runs.total(), 2, "each operation ran once");
}

/// The counter's call for `n` on a registry whose connections may have
/// frozen: the first call may fail with a store error (its operation timed
/// out on a frozen connection, which retires it); the next must be served.
async fn served_after_a_freeze(registry: &crate::Registry<()>, n: u64) -> serde_json::Value {
    match registry.call("r", "counter", json!({ "n": n })).await {
        Ok(out) => out,
        Err(ToolError::Store { .. }) => registry
            .call("r", "counter", json!({ "n": n }))
            .await
            .expect("the call after a timed-out one goes over a new connection"),
        Err(e) => panic!("a frozen connection must read as a store error, got {e:?}"),
    }
}

/// Connections being opened when the path froze (a handshake whose
/// bytes were held, then frozen for good, as a failover behind a virtual
/// IP leaves them) give way: the store is served again once the path is
/// back, however many were being opened. A pool that waits on them forever
/// is exhausted for good (the chaos run's PostgreSQL workers were, and
/// retried a record until `max_hold`).
pub async fn net_connections_opened_into_a_freeze_give_way<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let ns = namespace();
    let registry = registry_with(store, &ns, &counter, |b| {
        b.store_timeout(Duration::from_millis(500))
    });
    registry
        .call("r", "counter", json!({ "n": 0 }))
        .await
        .expect("a first call, before the fault");
    // Every open connection closed, the path held: the calls meanwhile
    // open new connections, more than any pool keeps, whose handshakes
    // wait in the proxy; then they freeze, and the path comes back.
    proxy.cut();
    proxy.stall();
    let calls = (1..=40u64).map(|n| {
        let registry = registry.clone();
        tokio::spawn(async move { registry.call("r", "counter", json!({ "n": n })).await })
    });
    for call in calls.collect::<Vec<_>>() {
        let _ = call.await.expect("task");
    }
    proxy.freeze();
    proxy.forward();
    // A liveness bound, not a speed: a store bounds each connection's
    // opening by seconds.
    let served = tokio::time::timeout(Duration::from_secs(90), async {
        loop {
            match registry.call("r", "counter", json!({ "n": 100 })).await {
                Ok(out) => return out,
                Err(ToolError::Store { .. }) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("only the store may be away, got {e:?}"),
            }
        }
    })
    .await;
    assert!(
        served.is_ok(),
        "the store was never served again: connections opened into the freeze hold it"
    );
    assert_eq!(counter.runs(100).len(), 1, "the operation ran once");
}

/// A renewal stalled on the network never holds the body up: the body
/// finishes while the renewal is still stalled.
pub async fn net_stalled_renewal_does_not_block_the_body<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let proxy = Arc::new(proxy);
    let stall = proxy.clone();
    // The body stalls the network, then works for several lease periods:
    // renewals are due meanwhile and hang until the stall ends.
    let counter =
        Counter::new(SHORT * 3, WriteOptions::new().lease(SHORT)).on_run(move || stall.stall());
    let registry = registry_with(store, &namespace(), &counter, |b| {
        b.store_timeout(Duration::from_secs(120))
    });
    let call = tokio::spawn(async move { registry.call("r", "counter", json!({"n": 1})).await });
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while counter.finished() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    proxy.forward();
    assert!(
        waited.is_ok(),
        "the body did not finish while a renewal was stalled: the heartbeat blocks it"
    );
    assert_eq!(counter.saw_lease_lost(), 1, "the stall outlasted the lease");
    let out = call.await.expect("task");
    // Nobody claimed meanwhile: the late renewal and the record land.
    assert!(out.is_ok(), "{out:?}");
}

/// The store stalls longer than the store timeout while the result is
/// recorded: the record is retried until it lands, and never runs twice.
pub async fn net_slow_record_is_retried_until_it_lands<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let proxy = Arc::new(proxy);
    let stall = proxy.clone();
    let counter = Counter::new(Duration::ZERO, WriteOptions::new()).on_run(move || stall.stall());
    let ns = namespace();
    let proxied = registry_with(store, &ns, &counter, |b| {
        b.store_timeout(Duration::from_millis(200))
    });
    let call = tokio::spawn(async move { proxied.call("r", "counter", json!({"n": 1})).await });
    while counter.finished() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Several tries time out meanwhile.
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.forward();
    let out = call.await.expect("task").expect("the result");
    let direct = registry(h.store(), &ns, &counter);
    let replay = direct
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replay");
    assert_eq!(out, replay, "the recorded result is the one returned");
    assert_eq!(counter.total(), 1);
}

/// Renewals vanish (a partition): the body is told its lease is lost and
/// stops; another worker takes the key over; the first one's late result
/// is fenced off.
pub async fn net_body_sees_its_lease_lost<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let proxy = Arc::new(proxy);
    let hole = proxy.clone();
    let ns = namespace();
    let slow = Counter::new(Duration::from_secs(60), WriteOptions::new().lease(SHORT))
        .stop_when_lease_lost()
        .on_run(move || hole.black_hole());
    let worker_a = registry_with(store, &ns, &slow, |b| {
        b.store_timeout(Duration::from_millis(200))
    });
    let a = tokio::spawn(async move { worker_a.call("r", "counter", json!({"n": 1})).await });
    let told = tokio::time::timeout(Duration::from_secs(30), async {
        while slow.finished() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(told.is_ok(), "the body was never told its lease was lost");
    assert_eq!(slow.saw_lease_lost(), 1);
    // A counts its lease from when it sent the claim, so the store may see
    // it a moment longer: B waits for the key, as a duplicate may.
    let fast = Counter::new(
        Duration::ZERO,
        WriteOptions::new().on_in_flight(OnInFlight::Wait(Duration::from_secs(30))),
    );
    let worker_b = registry(h.store(), &ns, &fast);
    let b = worker_b
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("B takes over");
    assert_eq!(b["attempt"], 1);
    proxy.forward();
    match a.await.expect("task") {
        Err(ToolError::LeaseLost { .. }) => {}
        other => panic!("A must get LeaseLost, got {other:?}"),
    }
    assert_eq!(
        slow.runs(1)[0].0,
        fast.runs(1)[0].0,
        "both ran under one key"
    );
    let replay = worker_b
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replay");
    assert_eq!(replay, b, "the new owner's result stands");
}

/// With its store black-holed, a tool with `on_store_error = run` runs
/// without a claim and records nothing, while a fail-closed one refuses;
/// once the store is back, a duplicate of the unclaimed run runs again
/// (nothing was recorded), under the same key, and is then replayed.
pub async fn net_a_run_tool_runs_unclaimed_while_the_store_is_away<H: Harness>(h: &H) {
    let Some((proxy, store)) = proxied(h).await else {
        return;
    };
    let ns = namespace();
    let runs = Counter::new(
        Duration::ZERO,
        WriteOptions::new().on_store_error(OnStoreError::Run),
    );
    let refuses = Counter::new(Duration::ZERO, WriteOptions::new());
    // The tool runs unclaimed once a new connection also failed, which the
    // store says within its connect timeout (1 s): within the second
    // claim's bound, twice the store timeout.
    let bounded = |b: crate::RegistryBuilder<()>| b.store_timeout(Duration::from_secs(1));
    let open = registry_with(store.clone(), &ns, &runs, bounded);
    let closed = registry_with(store, &ns, &refuses, bounded);
    proxy.black_hole();
    let unclaimed = open
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("runs without a claim");
    assert_eq!(unclaimed["unclaimed"], true);
    match closed.call("r", "counter", json!({"n": 1})).await {
        Err(ToolError::Store { .. }) => {}
        other => panic!("a fail-closed tool must refuse, got {other:?}"),
    }
    assert_eq!((runs.total(), refuses.total()), (1, 0));
    proxy.forward();
    let direct = registry(h.store(), &ns, &runs);
    let claimed = direct
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("runs, claimed");
    assert_eq!(claimed.get("unclaimed"), None, "{claimed}");
    assert_eq!(
        claimed["key"], unclaimed["key"],
        "one key, for a downstream"
    );
    let replayed = direct.call("r", "counter", json!({"n": 1})).await;
    assert_eq!(replayed.ok(), Some(claimed));
    assert_eq!(runs.total(), 2);
}

/// The connection a store listens for announcements on, cut: the store
/// listens again on a new one, and hears them again; meanwhile a watch
/// still ends when its time is up.
pub async fn net_a_cut_listener_listens_again<H: Harness>(h: &H) {
    let Some((proxy, watcher)) = proxied(h).await else {
        return;
    };
    let announcer = h.store();
    let k = key(&namespace(), "watched");
    assert!(
        hears(&*watcher, &*announcer, &k).await,
        "a watch did not end in a minute of announcements"
    );
    let before = proxy.accepted();
    proxy.cut();
    let watched = tokio::time::timeout(LONG, watcher.watch(&k, SHORT)).await;
    assert!(watched.is_ok(), "a watch outlived its time");
    assert!(
        hears(&*watcher, &*announcer, &k).await,
        "after its connection was cut, the store never heard an announcement again"
    );
    assert!(
        proxy.accepted() > before,
        "the listener's new connection went through the proxy"
    );
}
