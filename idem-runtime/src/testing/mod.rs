//! The store conformance suite, written once and run against every backend,
//! and fault injection for the wrapper's fail-closed guarantees.
//!
//! - this module: the [`Harness`] a backend implements, the macros that
//!   make one test per case, and helpers the cases share;
//! - `cases`: the cases;
//! - `fixtures`: [`Counter`], the write tool the cases call;
//! - `faults`: [`FaultyStore`], injected failures for in-process stores;
//! - `proxy`: [`Proxy`], real network faults between a client and its
//!   server.
//!
//! A backend's test file is three lines:
//!
//! ```ignore
//! idem_runtime::conformance_tests!(async {
//!     idem_runtime::testing::MemoryHarness::new()
//! });
//! ```
//!
//! The macro expands to one `#[test]` per case, each on its own
//! multi-threaded Tokio runtime, each with keys under a namespace of its
//! own, so cases never see each other's records and never need the store
//! emptied. Cases that need time to pass (lease expiry, TTL) sleep real
//! time, since a remote store judges expiry by its own clock; none asserts
//! how long anything took.

pub mod cases;
mod faults;
mod fixtures;
mod proxy;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use self::faults::{Fault, FaultyStore, Op};
pub use self::fixtures::{Counter, CounterArgs, CounterOut};
pub use self::proxy::{Flow, Proxy};
use crate::store::{Claim, Entry, IdemStore, LeaseToken};
use crate::{
    DynIdemStore, Fingerprint, IdemKey, MemoryStore, OnInFlight, Registry, RegistryBuilder, Scope,
    StoreError, ToolError, ToolInfo, WriteCtx, WriteOptions, WriteTool,
};

/// What the suite needs from a backend.
pub trait Harness: Send + Sync + 'static {
    /// The backend under test.
    type Store: IdemStore;

    /// The store, shared.
    fn store(&self) -> Arc<Self::Store>;

    /// Writes a record under `key` that the backend cannot understand
    /// (garbage bytes, a foreign format, an unknown version). For a backend
    /// that holds typed records, a recorded result that is not JSON.
    fn corrupt(&self, key: &IdemKey, fingerprint: &Fingerprint) -> impl Future<Output = ()> + Send;

    /// The address of the server the store talks to, so that the network
    /// fault cases can put a [`Proxy`] in front of it. `None` (the default)
    /// for a store without a connection, where those cases have nothing to
    /// break and pass at once.
    fn server(&self) -> Option<SocketAddr> {
        None
    }

    /// Another store over the same records whose connections go to `addr`
    /// (a [`Proxy`] in front of [`server`](Self::server)) instead of the
    /// server itself. Only called when `server` is `Some`.
    fn store_via(&self, addr: SocketAddr) -> impl Future<Output = Arc<Self::Store>> + Send {
        async move { panic!("this harness names no server, so nothing connects via {addr}") }
    }

    /// Removes what the harness created (a schema, a file), after each case
    /// that did not panic. Does nothing by default.
    fn cleanup(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The suite's harness for [`MemoryStore`].
#[derive(Debug, Default)]
pub struct MemoryHarness {
    store: Arc<MemoryStore>,
}

impl MemoryHarness {
    /// A harness over a fresh store.
    pub fn new() -> MemoryHarness {
        MemoryHarness::default()
    }
}

impl Harness for MemoryHarness {
    type Store = MemoryStore;

    fn store(&self) -> Arc<MemoryStore> {
        self.store.clone()
    }

    async fn corrupt(&self, key: &IdemKey, fingerprint: &Fingerprint) {
        self.store
            .plant_done(key, fingerprint, "\u{0}{not json", Duration::from_secs(60));
    }
}

/// Runs the suite through `Arc<dyn DynIdemStore>`, as the registry holds
/// stores, instead of the backend's own type.
#[derive(Debug)]
pub struct Erased<H>(pub H);

impl<H: Harness> Harness for Erased<H> {
    type Store = Arc<dyn DynIdemStore>;

    fn store(&self) -> Arc<Arc<dyn DynIdemStore>> {
        let erased: Arc<dyn DynIdemStore> = self.0.store();
        Arc::new(erased)
    }

    fn corrupt(&self, key: &IdemKey, fingerprint: &Fingerprint) -> impl Future<Output = ()> + Send {
        self.0.corrupt(key, fingerprint)
    }

    fn server(&self) -> Option<SocketAddr> {
        self.0.server()
    }

    async fn store_via(&self, addr: SocketAddr) -> Arc<Arc<dyn DynIdemStore>> {
        let erased: Arc<dyn DynIdemStore> = self.0.store_via(addr).await;
        Arc::new(erased)
    }

    fn cleanup(&self) -> impl Future<Output = ()> + Send {
        self.0.cleanup()
    }
}

/// Runs `fut` on a fresh multi-threaded runtime; what the generated tests
/// call.
pub fn run<F: Future<Output = ()>>(fut: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    match rt {
        Ok(rt) => rt.block_on(fut),
        Err(e) => panic!("could not start a Tokio runtime: {e}"),
    }
}

/// Calls `$crate::$mac!` with `$args`, `;` and the list of every
/// conformance case: the one place the cases are named.
#[doc(hidden)]
#[macro_export]
macro_rules! __idem_with_cases {
    ($mac:ident; $($args:tt)*) => {
        $crate::$mac! { $($args)*;
            claim_complete_replay,
            concurrent_claims_acquire_once,
            lapsed_lease_lets_a_new_claim_in,
            renew_keeps_the_lease,
            stale_token_is_fenced,
            lapsed_but_unclaimed_may_still_record,
            release_counts_the_attempt,
            permanent_failure_is_replayed,
            result_ttl_expires,
            purge_removes_only_expired_records,
            absent_key_refuses_token_ops,
            fingerprint_is_kept,
            corrupt_record_is_an_error,
            registry_runs_once_in_sequence,
            registry_concurrent_duplicate_is_in_flight,
            registry_stress_runs_each_key_once,
            registry_wait_returns_the_first_result,
            registry_fails_closed_on_outage,
            registry_returns_result_when_recording_fails,
            registry_fences_a_worker_that_lost_its_lease,
            settle_repeated_by_its_token_succeeds,
            claims_after_a_release_have_one_winner,
            registry_records_any_error_text,
            registry_result_too_large_is_never_run_again,
            net_cut_connections_lose_nothing,
            net_stalled_renewal_does_not_block_the_body,
            net_slow_record_is_retried_until_it_lands,
            net_body_sees_its_lease_lost,
        }
    };
}

/// Generates one `#[test]` per conformance case. `$make` is an expression
/// of a future yielding `Option<impl Harness>`: `None` when the backend is
/// not reachable and the harness has said why (it must not say `None`
/// under `CI=true`).
#[macro_export]
macro_rules! conformance_tests {
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::testing::run(async {
                    if let ::core::option::Option::Some(harness) = $make.await {
                        $crate::testing::cases::$case(&harness).await;
                        $crate::testing::Harness::cleanup(&harness).await;
                    }
                });
            }
        )*
    };
    ($make:expr) => {
        $crate::__idem_with_cases!(conformance_tests; @cases $make);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __idem_run_cases {
    (@run $h:expr; $($case:ident),* $(,)?) => {
        $( $crate::testing::cases::$case($h).await; )*
    };
}

/// Runs every conformance case in turn against one harness: for a backend
/// that is costly to set up per case (a cluster the test starts).
pub async fn run_all<H: Harness>(harness: &H) {
    crate::__idem_with_cases!(__idem_run_cases; @run harness);
}

/// A fresh namespace per case, so cases share no keys.
fn namespace() -> String {
    format!("idem-test-{:016x}", LeaseToken::generate(0).id() as u64)
}

fn key(ns: &str, tag: &str) -> IdemKey {
    IdemKey::derive(Scope::Run(tag), "conformance", 1, &json!({ "tag": tag })).with_namespace(ns)
}

fn fp(n: u64) -> Fingerprint {
    Fingerprint::of(&json!({ "n": n }))
}

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(250);

/// Sleeps well past a [`SHORT`] lease or TTL.
async fn past_short() {
    tokio::time::sleep(SHORT * 3).await;
}

fn acquired(claim: Result<Claim, StoreError>) -> LeaseToken {
    match claim {
        Ok(Claim::Acquired(token)) => token,
        other => panic!("expected the claim to be acquired, got {other:?}"),
    }
}

fn existing(claim: Result<Claim, StoreError>) -> Entry {
    match claim {
        Ok(Claim::Existing(entry)) => entry,
        other => panic!("expected an existing entry, got {other:?}"),
    }
}

fn lease_lost(result: Result<(), StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::LeaseLost)),
        "{what}: expected LeaseLost, got {result:?}"
    );
}

/// A registry over `store` in namespace `ns` with `counter`, configured
/// further by `configure`.
fn registry_with(
    store: Arc<dyn DynIdemStore>,
    ns: &str,
    counter: &Counter,
    configure: impl FnOnce(RegistryBuilder<()>) -> RegistryBuilder<()>,
) -> Registry<()> {
    let builder = Registry::builder(())
        .shared_store(store)
        .namespace(ns)
        .tool(counter.clone());
    match configure(builder).build() {
        Ok(r) => r,
        Err(e) => panic!("registry: {e}"),
    }
}

fn registry(store: Arc<dyn DynIdemStore>, ns: &str, counter: &Counter) -> Registry<()> {
    registry_with(store, ns, counter, |b| b)
}

/// For a backend's own malformed-record tests: `plant(i, key)` writes the
/// `i`th malformed record (of `count`) under `key`; each must make a write
/// call over it a `Corrupt` store error, and a read of it an error, without
/// running anything.
pub async fn malformed_records_are_refused<S, F, Fut>(store: Arc<S>, count: usize, plant: F)
where
    S: IdemStore,
    F: Fn(usize, IdemKey) -> Fut,
    Fut: Future<Output = ()>,
{
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = registry(store.clone(), &namespace(), &counter);
    for i in 0..count {
        let args = json!({ "n": i });
        let key = match registry.identify("r", "counter", args.clone()) {
            Ok(Some((key, _))) => key,
            other => panic!("identify: {other:?}"),
        };
        plant(i, key.clone()).await;
        match registry.call("r", "counter", args).await {
            Err(ToolError::Store {
                source: StoreError::Corrupt { reason, .. },
                ..
            }) => {
                assert!(!reason.is_empty(), "record {i}: a reason");
            }
            other => panic!("record {i}: expected a Corrupt store error, got {other:?}"),
        }
        assert!(
            store.get(&key).await.is_err(),
            "record {i}: reading it is an error too"
        );
    }
    assert_eq!(
        counter.total(),
        0,
        "nothing may run over a malformed record"
    );
}
