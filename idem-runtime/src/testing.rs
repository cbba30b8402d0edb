//! The store conformance suite, written once and run against every backend,
//! and fault injection for the wrapper's fail-closed guarantees.
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

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

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

/// Per operation, the (key, attempt) of each run.
type Runs = HashMap<u64, Vec<(String, u32)>>;

/// A write tool that counts how often each argument set ran.
#[derive(Clone, Default)]
pub struct Counter {
    runs: Arc<Mutex<Runs>>,
    total: Arc<AtomicUsize>,
    delay: Duration,
    options: WriteOptions,
}

/// [`Counter`]'s arguments.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CounterArgs {
    /// Which operation.
    pub n: u64,
    /// Whether to fail (transiently).
    #[serde(default)]
    pub fail: bool,
}

/// [`Counter`]'s result.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct CounterOut {
    /// The operation.
    pub n: u64,
    /// The key it ran under.
    pub key: String,
    /// Its attempt number.
    pub attempt: u32,
}

impl Counter {
    /// A counter whose body sleeps `delay`, with `options`.
    pub fn new(delay: Duration, options: WriteOptions) -> Counter {
        Counter {
            delay,
            options,
            ..Counter::default()
        }
    }

    /// How many bodies ran in all.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }

    /// The (key, attempt) of each run of operation `n`.
    pub fn runs(&self, n: u64) -> Vec<(String, u32)> {
        self.runs
            .lock()
            .map(|r| r.get(&n).cloned().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl WriteTool<()> for Counter {
    type Args = CounterArgs;
    type Output = CounterOut;
    type Error = String;

    fn info(&self) -> ToolInfo {
        ToolInfo::new("counter", "Counts its runs.")
    }

    fn options(&self) -> WriteOptions {
        self.options
    }

    async fn call(&self, args: CounterArgs, ctx: &WriteCtx<()>) -> Result<CounterOut, String> {
        self.total.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut runs) = self.runs.lock() {
            runs.entry(args.n)
                .or_default()
                .push((ctx.idem_key().to_string(), ctx.attempt()));
        }
        tokio::time::sleep(self.delay).await;
        if args.fail {
            return Err("transient failure".into());
        }
        Ok(CounterOut {
            n: args.n,
            key: ctx.idem_key().to_string(),
            attempt: ctx.attempt(),
        })
    }
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

/// Which store operation a [`FaultyStore`] disturbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Op {
    /// `claim`
    Claim,
    /// `complete`
    Complete,
    /// `release`
    Release,
    /// `fail`
    Fail,
    /// `renew`
    Renew,
    /// `get`
    Get,
}

/// How a [`FaultyStore`] disturbs an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Fault {
    /// Pass it through.
    None = 0,
    /// Answer `StoreError::Unavailable` without touching the store.
    Unavailable = 1,
    /// Never answer.
    Hang = 2,
}

/// A store wrapper that makes chosen operations fail or hang, to show how
/// the wrapper behaves when the store is down or slow. Everything else goes
/// to the real backend underneath.
pub struct FaultyStore<S> {
    inner: S,
    faults: [AtomicU8; 6],
}

impl<S: IdemStore> FaultyStore<S> {
    /// Wraps `inner`, faultless.
    pub fn new(inner: S) -> FaultyStore<S> {
        FaultyStore {
            inner,
            faults: Default::default(),
        }
    }

    /// Sets how `op` behaves from now on.
    pub fn set(&self, op: Op, fault: Fault) {
        self.faults[op as usize].store(fault as u8, Ordering::SeqCst);
    }

    /// Makes every operation behave as `fault`.
    pub fn set_all(&self, fault: Fault) {
        for f in &self.faults {
            f.store(fault as u8, Ordering::SeqCst);
        }
    }

    async fn gate<T>(
        &self,
        op: Op,
        fut: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match self.faults[op as usize].load(Ordering::SeqCst) {
            1 => Err(StoreError::unavailable("injected outage")),
            2 => std::future::pending().await,
            _ => fut.await,
        }
    }
}

impl<S: IdemStore> IdemStore for FaultyStore<S> {
    async fn claim(
        &self,
        key: &IdemKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        self.gate(Op::Claim, self.inner.claim(key, fingerprint, lease))
            .await
    }
    async fn complete(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        result: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.gate(Op::Complete, self.inner.complete(key, token, result, ttl))
            .await
    }
    async fn release(&self, key: &IdemKey, token: &LeaseToken) -> Result<(), StoreError> {
        self.gate(Op::Release, self.inner.release(key, token)).await
    }
    async fn fail(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        error: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.gate(Op::Fail, self.inner.fail(key, token, error, ttl))
            .await
    }
    async fn renew(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        self.gate(Op::Renew, self.inner.renew(key, token, lease))
            .await
    }
    async fn get(&self, key: &IdemKey) -> Result<Option<Entry>, StoreError> {
        self.gate(Op::Get, self.inner.get(key)).await
    }
    async fn purge_expired(&self) -> Result<u64, StoreError> {
        self.inner.purge_expired().await
    }
}

/// The cases; each takes the harness and panics on a violation.
pub mod cases {
    use super::*;

    /// Claim, complete, and every later claim replays the result.
    pub async fn claim_complete_replay<H: Harness>(h: &H) {
        let store = h.store();
        let (ns, f) = (namespace(), fp(1));
        let k = key(&ns, "a");
        assert_eq!(
            store.get(&k).await.ok(),
            Some(None),
            "a fresh key holds nothing"
        );
        let token = acquired(store.claim(&k, &f, LONG).await);
        assert_eq!(token.attempt(), 0);
        assert_eq!(
            store.get(&k).await.ok(),
            Some(Some(Entry::Running {
                fingerprint: f,
                attempt: 0
            }))
        );
        store
            .complete(&k, &token, r#"{"ok":true}"#, LONG)
            .await
            .expect("complete");
        let done = Entry::Done {
            result: r#"{"ok":true}"#.into(),
            fingerprint: f,
        };
        assert_eq!(existing(store.claim(&k, &f, LONG).await), done);
        assert_eq!(existing(store.claim(&k, &f, LONG).await), done);
        assert_eq!(store.get(&k).await.ok(), Some(Some(done)));
        lease_lost(
            store.complete(&k, &token, "1", LONG).await,
            "complete after complete",
        );
        lease_lost(store.release(&k, &token).await, "release after complete");
    }

    /// Many tasks claim one key at once: exactly one acquires.
    pub async fn concurrent_claims_acquire_once<H: Harness>(h: &H) {
        let store = h.store();
        let ns = namespace();
        for round in 0..5 {
            let k = key(&ns, &format!("race-{round}"));
            let tasks: Vec<_> = (0..64)
                .map(|_| {
                    let (store, k) = (store.clone(), k.clone());
                    tokio::spawn(async move { store.claim(&k, &fp(1), LONG).await })
                })
                .collect();
            let mut acquired = 0;
            for t in tasks {
                match t.await.expect("task") {
                    Ok(Claim::Acquired(_)) => acquired += 1,
                    Ok(Claim::Existing(Entry::Running { .. })) => {}
                    other => panic!("unexpected claim result {other:?}"),
                }
            }
            assert_eq!(acquired, 1, "round {round}: exactly one claim must acquire");
        }
    }

    /// A lapsed lease lets the next claim in, one attempt higher.
    pub async fn lapsed_lease_lets_a_new_claim_in<H: Harness>(h: &H) {
        let store = h.store();
        let (ns, f) = (namespace(), fp(1));
        let k = key(&ns, "lapse");
        let first = acquired(store.claim(&k, &f, SHORT).await);
        assert!(matches!(
            existing(store.claim(&k, &f, SHORT).await),
            Entry::Running { .. }
        ));
        past_short().await;
        let second = acquired(store.claim(&k, &f, LONG).await);
        assert_eq!((first.attempt(), second.attempt()), (0, 1));
        assert_ne!(first, second);
    }

    /// Renewing keeps other claims out past the original lease.
    pub async fn renew_keeps_the_lease<H: Harness>(h: &H) {
        let store = h.store();
        let (ns, f) = (namespace(), fp(1));
        let k = key(&ns, "renew");
        let lease = Duration::from_millis(1000);
        let token = acquired(store.claim(&k, &f, lease).await);
        for _ in 0..8 {
            tokio::time::sleep(lease / 5).await;
            store
                .renew(&k, &token, lease)
                .await
                .expect("renew by the holder");
        }
        // 1.5 leases have passed since the claim; the renewals kept it.
        assert!(matches!(
            existing(store.claim(&k, &f, lease).await),
            Entry::Running { attempt: 0, .. }
        ));
        store
            .complete(&k, &token, "1", LONG)
            .await
            .expect("the holder records");
    }

    /// A worker whose lease lapsed and was taken over can change nothing.
    pub async fn stale_token_is_fenced<H: Harness>(h: &H) {
        let store = h.store();
        let (ns, f) = (namespace(), fp(1));
        let k = key(&ns, "fence");
        let stale = acquired(store.claim(&k, &f, SHORT).await);
        past_short().await;
        let owner = acquired(store.claim(&k, &f, LONG).await);
        lease_lost(
            store.complete(&k, &stale, r#""stale""#, LONG).await,
            "stale complete",
        );
        lease_lost(store.fail(&k, &stale, "stale", LONG).await, "stale fail");
        lease_lost(store.renew(&k, &stale, LONG).await, "stale renew");
        lease_lost(store.release(&k, &stale).await, "stale release");
        assert_eq!(
            store.get(&k).await.ok(),
            Some(Some(Entry::Running {
                fingerprint: f,
                attempt: 1
            })),
            "the stale worker changed the owner's record"
        );
        store
            .complete(&k, &owner, r#""owner""#, LONG)
            .await
            .expect("owner completes");
        lease_lost(
            store.complete(&k, &stale, r#""stale""#, LONG).await,
            "stale complete after owner",
        );
        assert_eq!(
            existing(store.claim(&k, &f, LONG).await),
            Entry::Done {
                result: r#""owner""#.into(),
                fingerprint: f
            }
        );
    }

    /// A lapsed lease nobody claimed since may still be renewed and recorded.
    pub async fn lapsed_but_unclaimed_may_still_record<H: Harness>(h: &H) {
        let store = h.store();
        let (ns, f) = (namespace(), fp(1));
        let k = key(&ns, "late");
        let token = acquired(store.claim(&k, &f, SHORT).await);
        past_short().await;
        store
            .renew(&k, &token, LONG)
            .await
            .expect("re-claim by renewing");
        assert!(matches!(
            existing(store.claim(&k, &f, LONG).await),
            Entry::Running { .. }
        ));
        store
            .complete(&k, &token, "7", LONG)
            .await
            .expect("late complete");
        assert_eq!(
            existing(store.claim(&k, &f, LONG).await),
            Entry::Done {
                result: "7".into(),
                fingerprint: f
            }
        );
        let k2 = key(&ns, "late-2");
        let token = acquired(store.claim(&k2, &f, SHORT).await);
        past_short().await;
        store
            .complete(&k2, &token, "8", LONG)
            .await
            .expect("late complete without renewal");
    }

    /// Release frees the key at once; the next claim counts the attempt.
    pub async fn release_counts_the_attempt<H: Harness>(h: &H) {
        let store = h.store();
        let (ns, f) = (namespace(), fp(1));
        let k = key(&ns, "release");
        let t0 = acquired(store.claim(&k, &f, LONG).await);
        store.release(&k, &t0).await.expect("release");
        assert_eq!(
            store.get(&k).await.ok(),
            Some(None),
            "a released key holds no entry"
        );
        lease_lost(
            store.complete(&k, &t0, "1", LONG).await,
            "complete after release",
        );
        let t1 = acquired(store.claim(&k, &f, LONG).await);
        store.release(&k, &t1).await.expect("release");
        let t2 = acquired(store.claim(&k, &f, LONG).await);
        assert_eq!((t0.attempt(), t1.attempt(), t2.attempt()), (0, 1, 2));
        store.complete(&k, &t2, "2", LONG).await.expect("complete");
    }

    /// A permanent failure is recorded and replayed.
    pub async fn permanent_failure_is_replayed<H: Harness>(h: &H) {
        let store = h.store();
        let (ns, f) = (namespace(), fp(1));
        let k = key(&ns, "fail");
        let token = acquired(store.claim(&k, &f, LONG).await);
        store
            .fail(&k, &token, "card declined: \"insufficient funds\"", LONG)
            .await
            .expect("fail");
        let failed = Entry::Failed {
            error: "card declined: \"insufficient funds\"".into(),
            fingerprint: f,
        };
        assert_eq!(existing(store.claim(&k, &f, LONG).await), failed);
        assert_eq!(store.get(&k).await.ok(), Some(Some(failed)));
    }

    /// A recorded result is forgotten after its TTL.
    pub async fn result_ttl_expires<H: Harness>(h: &H) {
        let store = h.store();
        let (ns, f) = (namespace(), fp(1));
        let k = key(&ns, "ttl");
        let token = acquired(store.claim(&k, &f, LONG).await);
        store
            .complete(&k, &token, "1", SHORT)
            .await
            .expect("complete");
        assert!(matches!(
            existing(store.claim(&k, &f, LONG).await),
            Entry::Done { .. }
        ));
        past_short().await;
        assert_eq!(store.get(&k).await.ok(), Some(None));
        assert_eq!(acquired(store.claim(&k, &f, LONG).await).attempt(), 0);
    }

    /// Purging frees expired records and leaves live ones alone.
    pub async fn purge_removes_only_expired_records<H: Harness>(h: &H) {
        let store = h.store();
        let (ns, f) = (namespace(), fp(1));
        let (live, dead) = (key(&ns, "live"), key(&ns, "dead"));
        let t = acquired(store.claim(&live, &f, LONG).await);
        store
            .complete(&live, &t, "1", LONG)
            .await
            .expect("complete");
        let t = acquired(store.claim(&dead, &f, LONG).await);
        store
            .complete(&dead, &t, "2", SHORT)
            .await
            .expect("complete");
        past_short().await;
        store.purge_expired().await.expect("purge");
        assert_eq!(store.get(&dead).await.ok(), Some(None));
        assert_eq!(
            store.get(&live).await.ok(),
            Some(Some(Entry::Done {
                result: "1".into(),
                fingerprint: f
            })),
            "purging must not touch a live record"
        );
        assert_eq!(
            store.purge_expired().await.ok(),
            Some(0),
            "nothing left to purge"
        );
    }

    /// Token operations on a key nobody claimed are refused.
    pub async fn absent_key_refuses_token_ops<H: Harness>(h: &H) {
        let store = h.store();
        let k = key(&namespace(), "absent");
        let token = LeaseToken::generate(0);
        lease_lost(store.complete(&k, &token, "1", LONG).await, "complete");
        lease_lost(store.fail(&k, &token, "x", LONG).await, "fail");
        lease_lost(store.renew(&k, &token, LONG).await, "renew");
        lease_lost(store.release(&k, &token).await, "release");
        assert_eq!(
            store.get(&k).await.ok(),
            Some(None),
            "refused ops must not create records"
        );
    }

    /// The first claim's fingerprint stays with the record.
    pub async fn fingerprint_is_kept<H: Harness>(h: &H) {
        let store = h.store();
        let k = key(&namespace(), "fp");
        let token = acquired(store.claim(&k, &fp(1), LONG).await);
        assert_eq!(
            existing(store.claim(&k, &fp(2), LONG).await),
            Entry::Running {
                fingerprint: fp(1),
                attempt: 0
            }
        );
        store
            .complete(&k, &token, "1", LONG)
            .await
            .expect("complete");
        assert_eq!(
            *existing(store.claim(&k, &fp(2), LONG).await).fingerprint(),
            fp(1)
        );
        // As the registry passes it for a tool keyed on all its arguments:
        // the digest the key ends with (which a store may keep implicitly).
        let k = key(&namespace(), "fp-digest");
        let digest = Fingerprint::from_hex(&k.as_str()[k.as_str().len() - 64..])
            .expect("a derived key ends with its digest");
        let token = acquired(store.claim(&k, &digest, LONG).await);
        assert_eq!(
            *existing(store.claim(&k, &fp(2), LONG).await).fingerprint(),
            digest
        );
        store
            .complete(&k, &token, "2", LONG)
            .await
            .expect("complete");
        let entry = store.get(&k).await.expect("get").expect("recorded");
        assert_eq!(*entry.fingerprint(), digest);
    }

    /// A record the backend cannot understand is an error, never a panic,
    /// never a run.
    pub async fn corrupt_record_is_an_error<H: Harness>(h: &H) {
        let ns = namespace();
        let counter = Counter::new(Duration::ZERO, WriteOptions::new());
        let registry = registry(h.store(), &ns, &counter);
        let args = json!({ "n": 1 });
        let (k, f) = match registry.identify("run", "counter", args.clone()) {
            Ok(Some(id)) => id,
            other => panic!("identify: {other:?}"),
        };
        h.corrupt(&k, &f).await;
        for _ in 0..2 {
            match registry.call("run", "counter", args.clone()).await {
                Err(ToolError::Store {
                    source: StoreError::Corrupt { .. },
                    ..
                }) => {}
                other => {
                    panic!("a corrupt record must give ToolError::Store(Corrupt), got {other:?}")
                }
            }
        }
        assert_eq!(counter.total(), 0, "nothing may run over a corrupt record");
        // The store answers for the key without panicking.
        let _ = h.store().get(&k).await;
    }

    /// The same call twice in sequence runs once and returns equal results,
    /// whatever the key order and formatting of the arguments.
    pub async fn registry_runs_once_in_sequence<H: Harness>(h: &H) {
        let counter = Counter::new(Duration::ZERO, WriteOptions::new());
        let registry = registry(h.store(), &namespace(), &counter);
        let first = registry
            .call("r", "counter", json!({"n": 1, "fail": false}))
            .await
            .expect("first");
        let again = registry
            .call("r", "counter", json!({"fail": false, "n": 1.0}))
            .await
            .expect("again");
        let as_text = registry
            .call("r", "counter", Value::String(r#"{ "n" : 1 }"#.into()))
            .await
            .expect("text");
        assert_eq!(first, again);
        assert_eq!(first, as_text);
        assert_eq!(counter.total(), 1);
        registry
            .call("r", "counter", json!({"n": 2}))
            .await
            .expect("other args");
        registry
            .call("other-run", "counter", json!({"n": 1}))
            .await
            .expect("other run");
        assert_eq!(
            counter.total(),
            3,
            "other arguments and other runs are other operations"
        );
    }

    /// Two concurrent identical calls: one runs, the other is `InFlight`.
    pub async fn registry_concurrent_duplicate_is_in_flight<H: Harness>(h: &H) {
        let counter = Counter::new(Duration::from_millis(300), WriteOptions::new());
        let registry = registry(h.store(), &namespace(), &counter);
        let (a, b) = tokio::join!(
            registry.call("r", "counter", json!({"n": 1})),
            registry.call("r", "counter", json!({"n": 1})),
        );
        let (ok, in_flight) = match (a, b) {
            (Ok(v), Err(e)) | (Err(e), Ok(v)) => (v, e),
            other => panic!("expected one success and one InFlight, got {other:?}"),
        };
        assert!(
            matches!(in_flight, ToolError::InFlight { .. }),
            "got {in_flight:?}"
        );
        assert!(in_flight.is_retryable());
        assert_eq!(counter.total(), 1);
        let replay = registry
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("replay");
        assert_eq!(replay, ok);
    }

    /// 1,000 concurrent calls over 100 operations: each runs exactly once.
    pub async fn registry_stress_runs_each_key_once<H: Harness>(h: &H) {
        let counter = Counter::new(
            Duration::from_millis(2),
            WriteOptions::new().on_in_flight(OnInFlight::Wait(Duration::from_secs(30))),
        );
        let registry = registry(h.store(), &namespace(), &counter);
        let tasks: Vec<_> = (0..1000u64)
            .map(|i| {
                let registry = registry.clone();
                tokio::spawn(async move {
                    let n = i % 100;
                    let out = registry.call("r", "counter", json!({ "n": n })).await;
                    (n, out)
                })
            })
            .collect();
        let mut results: HashMap<u64, Value> = HashMap::new();
        for t in tasks {
            let (n, out) = t.await.expect("task");
            let out = out.expect("every call returns the result");
            let first = results.entry(n).or_insert_with(|| out.clone());
            assert_eq!(*first, out, "every duplicate sees the first result");
        }
        assert_eq!(
            counter.total(),
            100,
            "executions must equal distinct operations"
        );
        for n in 0..100 {
            assert_eq!(counter.runs(n).len(), 1, "operation {n}");
        }
    }

    /// `on_in_flight = wait`: the duplicate waits and returns the result.
    pub async fn registry_wait_returns_the_first_result<H: Harness>(h: &H) {
        let counter = Counter::new(
            Duration::from_millis(300),
            WriteOptions::new().on_in_flight(OnInFlight::Wait(Duration::from_secs(30))),
        );
        let registry = registry(h.store(), &namespace(), &counter);
        let (a, b) = tokio::join!(
            registry.call("r", "counter", json!({"n": 1})),
            registry.call("r", "counter", json!({"n": 1})),
        );
        assert_eq!(a.expect("first"), b.expect("waiting duplicate"));
        assert_eq!(counter.total(), 1);
    }

    /// With the store down or hanging, nothing runs and the caller hears so.
    pub async fn registry_fails_closed_on_outage<H: Harness>(h: &H) {
        let faulty = Arc::new(FaultyStore::new(h.store()));
        let counter = Counter::new(Duration::ZERO, WriteOptions::new());
        let registry = registry_with(faulty.clone(), &namespace(), &counter, |b| {
            b.store_timeout(Duration::from_millis(200))
        });
        for fault in [Fault::Unavailable, Fault::Hang] {
            faulty.set_all(fault);
            match registry.call("r", "counter", json!({"n": 1})).await {
                Err(e @ ToolError::Store { .. }) => assert!(e.is_retryable()),
                other => panic!("{fault:?}: expected ToolError::Store, got {other:?}"),
            }
        }
        assert_eq!(counter.total(), 0, "no body may run without a claim");
        faulty.set_all(Fault::None);
        registry
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("after recovery");
        assert_eq!(counter.total(), 1);
    }

    /// The body ran but `complete` failed: the caller still gets the result,
    /// and a retry after the lease reuses the same key, one attempt higher.
    pub async fn registry_returns_result_when_recording_fails<H: Harness>(h: &H) {
        let faulty = Arc::new(FaultyStore::new(h.store()));
        let counter = Counter::new(Duration::ZERO, WriteOptions::new().lease(SHORT));
        let registry = registry(faulty.clone(), &namespace(), &counter);
        faulty.set(Op::Complete, Fault::Unavailable);
        let first = registry
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("the result, though unrecorded");
        faulty.set(Op::Complete, Fault::None);
        past_short().await;
        let second = registry
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("retry");
        let runs = counter.runs(1);
        assert_eq!(runs.len(), 2);
        assert_eq!(
            runs[0].0, runs[1].0,
            "a retry must reuse the idempotency key"
        );
        assert_eq!((runs[0].1, runs[1].1), (0, 1));
        assert_eq!(first["key"], second["key"]);
        let replay = registry
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("replay");
        assert_eq!(replay, second);
        assert_eq!(counter.total(), 2);
    }

    /// A worker that cannot renew loses its lease to another worker; its
    /// late result does not overwrite the new owner's (`LeaseLost`).
    pub async fn registry_fences_a_worker_that_lost_its_lease<H: Harness>(h: &H) {
        let ns = namespace();
        let faulty = Arc::new(FaultyStore::new(h.store()));
        faulty.set(Op::Renew, Fault::Unavailable);
        let slow = Counter::new(SHORT * 8, WriteOptions::new().lease(SHORT));
        let worker_a = registry(faulty.clone(), &ns, &slow);
        let fast = Counter::new(Duration::ZERO, WriteOptions::new().lease(SHORT));
        let worker_b = registry(h.store(), &ns, &fast);

        let a = tokio::spawn(async move { worker_a.call("r", "counter", json!({"n": 1})).await });
        while slow.total() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        past_short().await; // A's lease lapsed: its renewals fail.
        let b = worker_b
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("B takes over");
        match a.await.expect("task") {
            Err(e @ ToolError::LeaseLost { .. }) => assert!(e.is_retryable()),
            other => panic!("A must get LeaseLost, got {other:?}"),
        }
        assert_eq!(b["attempt"], 1);
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
        assert_eq!(fast.total(), 1);
    }
}
