//! The write wrapper's guarantees (docs/spec.md, "Guarantees") that need a
//! controllable clock, and the registry's dispatch. Tokio's paused clock drives the
//! `MemoryStore`'s leases here, so nothing sleeps for real and nothing
//! depends on how fast the machine is.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::testing::{Counter, Fault, FaultyStore};
use idem::{
    Approval, Ctx, IdemStore, MemoryStore, OnInFlight, OnUncertain, ReadTool, Registry,
    RegistryError, ScopeKind, StoreError, ToolError, ToolInfo, WriteCtx, WriteOptions, WriteTool,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn build(tool: Counter) -> Registry<()> {
    Registry::builder(()).tool(tool).build().expect("registry")
}

async fn sleep(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

#[tokio::test(start_paused = true)]
async fn heartbeat_keeps_a_long_body_exclusive() {
    let counter = Counter::new(
        Duration::from_secs(2),
        WriteOptions::new().lease(Duration::from_millis(100)),
    );
    let registry = build(counter.clone());
    let (first, dup) = tokio::join!(registry.call("r", "counter", json!({"n": 1})), async {
        sleep(1000).await; // ten leases later
        registry.call("r", "counter", json!({"n": 1})).await
    });
    assert!(first.is_ok());
    assert!(
        matches!(dup, Err(ToolError::InFlight { .. })),
        "got {dup:?}"
    );
    assert_eq!(counter.total(), 1);
}

#[tokio::test(start_paused = true)]
async fn max_hold_caps_renewal_so_a_hung_body_cannot_hold_the_key() {
    let counter = Counter::new(
        Duration::from_secs(5),
        WriteOptions::new()
            .lease(Duration::from_millis(100))
            .max_hold(Duration::from_millis(300)),
    );
    let registry = build(counter.clone());
    let (hung, next) = tokio::join!(registry.call("r", "counter", json!({"n": 1})), async {
        sleep(1000).await;
        registry.call("r", "counter", json!({"n": 1})).await
    });
    // The second call took the key over once the capped lease lapsed...
    let next = next.expect("the key is free after max_hold + lease");
    assert_eq!(next["attempt"], 1);
    // ...so the hung body's late result is fenced off.
    assert!(
        matches!(hung, Err(ToolError::LeaseLost { .. })),
        "got {hung:?}"
    );
    let runs = counter.runs(1);
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].0, runs[1].0, "both ran under one idem_key");
}

/// A worker that crashed in the body of operation `n`: its call dropped
/// mid-body (as a killed process drops it), its claim left to lapse.
async fn crash_in_the_body(registry: &Registry<()>, counter: &Counter, n: u64) {
    let before = counter.total();
    let call = registry.call("r", "counter", json!({ "n": n }));
    assert!(
        tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .is_err(),
        "the body was still running when the worker died"
    );
    assert_eq!(counter.total(), before + 1, "the body had started");
}

/// An at-most-once tool (`refuse`) remembers a crashed attempt for as long
/// as its result would have been kept, not the hour a lapsed claim of a
/// `rerun` tool is: a duplicate a day later (an agent resumed from
/// yesterday's checkpoint) is refused, not run; after the TTL it is a first
/// call, as a duplicate of a recorded result then is. Under `rerun` nothing
/// changed: within the hour the call is taken over (attempt 1), after it
/// the record is gone and the call runs at attempt 0.
#[tokio::test(start_paused = true)]
async fn a_crashed_at_most_once_call_is_refused_for_the_whole_ttl() {
    const HOUR: u64 = 3600 * 1000;
    let ttl = Duration::from_secs(2 * 24 * 3600);
    let refuse = Counter::new(
        Duration::from_secs(3600),
        WriteOptions::new()
            .on_uncertain(OnUncertain::Refuse)
            .lease(Duration::from_secs(1))
            .ttl(ttl),
    );
    let registry = build(refuse.clone());
    crash_in_the_body(&registry, &refuse, 1).await;
    crash_in_the_body(&registry, &refuse, 2).await;
    sleep(24 * HOUR).await;
    match registry.call("r", "counter", json!({ "n": 1 })).await {
        Err(ToolError::OutcomeUnknown { attempt: 1, .. }) => {}
        other => panic!("a day after the crash the call must be refused, got {other:?}"),
    }
    assert_eq!(refuse.total(), 2, "nothing ran again within the TTL");
    sleep(25 * HOUR).await; // past the TTL after operation 2's lease
    let after = registry
        .call("r", "counter", json!({ "n": 2 }))
        .await
        .expect("past the TTL, a first call");
    assert_eq!((refuse.total(), after["attempt"].clone()), (3, json!(0)));

    let rerun = Counter::new(
        Duration::from_secs(3600),
        WriteOptions::new().lease(Duration::from_secs(1)).ttl(ttl),
    );
    let registry = build(rerun.clone());
    crash_in_the_body(&registry, &rerun, 1).await;
    crash_in_the_body(&registry, &rerun, 2).await;
    sleep(HOUR / 2).await;
    let within = registry.call("r", "counter", json!({ "n": 1 })).await;
    assert_eq!(within.expect("run again")["attempt"], 1, "taken over");
    // Operation 2's claim lapsed more than an hour ago by now.
    let after = registry.call("r", "counter", json!({ "n": 2 })).await;
    assert_eq!(after.expect("a first call")["attempt"], 0, "forgotten");
}

#[tokio::test(start_paused = true)]
async fn transient_failure_releases_and_the_retry_counts_the_attempt() {
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = build(counter.clone());
    let args = json!({"n": 7, "fail": true});
    for expected_attempt in 0..3 {
        match registry.call("r", "counter", args.clone()).await {
            Err(
                e @ ToolError::Failed {
                    permanent: false, ..
                },
            ) => assert!(e.is_retryable()),
            other => panic!("expected a transient failure, got {other:?}"),
        }
        assert_eq!(counter.runs(7).last().map(|r| r.1), Some(expected_attempt));
    }
    let runs = counter.runs(7);
    assert!(
        runs.iter().all(|r| r.0 == runs[0].0),
        "one idem_key across retries"
    );
}

/// A payment-like tool: declines are permanent, keyed on the order only.
#[derive(Clone)]
struct Pay {
    runs: Arc<AtomicUsize>,
    /// Key on `order_id` alone (true) or on all arguments.
    keyed_on_order: bool,
}

impl Default for Pay {
    fn default() -> Self {
        Pay {
            runs: Arc::default(),
            keyed_on_order: true,
        }
    }
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct PayArgs {
    order_id: String,
    amount: u64,
    lines: Vec<Line>,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct Line {
    sku: String,
    qty: u32,
}

#[derive(Serialize, Deserialize)]
struct Receipt {
    charged: u64,
}

#[derive(Debug)]
enum PayError {
    Declined,
    Timeout,
}

impl std::fmt::Display for PayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PayError::Declined => "card declined",
            PayError::Timeout => "provider timed out",
        })
    }
}

impl WriteTool<()> for Pay {
    type Args = PayArgs;
    type Output = Receipt;
    type Error = PayError;

    fn info(&self) -> ToolInfo {
        ToolInfo::new("pay", "Charge an order.")
    }

    fn options(&self) -> WriteOptions {
        if self.keyed_on_order {
            WriteOptions::new().key_fields(&["order_id"])
        } else {
            WriteOptions::new()
        }
    }

    fn is_permanent(&self, error: &PayError) -> bool {
        matches!(error, PayError::Declined)
    }

    async fn call(&self, args: PayArgs, _: &WriteCtx<()>) -> Result<Receipt, PayError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        match args.amount {
            0 => Err(PayError::Declined),
            1 => Err(PayError::Timeout),
            amount => Ok(Receipt { charged: amount }),
        }
    }
}

fn pay_registry(pay: &Pay) -> Registry<()> {
    Registry::builder(())
        .namespace("shop")
        .tool(pay.clone())
        .build()
        .expect("registry")
}

#[tokio::test]
async fn permanent_failure_is_recorded_and_replayed_without_running() {
    let pay = Pay::default();
    let registry = pay_registry(&pay);
    let args = json!({"order_id": "o1", "amount": 0, "lines": []});
    for _ in 0..3 {
        match registry.call("r", "pay", args.clone()).await {
            Err(
                e @ ToolError::Failed {
                    permanent: true, ..
                },
            ) => {
                assert!(!e.is_retryable());
                assert!(e.model_message().contains("card declined"));
            }
            other => panic!("expected the recorded decline, got {other:?}"),
        }
    }
    assert_eq!(pay.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn same_key_fields_with_another_payload_is_a_conflict() {
    let pay = Pay::default();
    let registry = pay_registry(&pay);
    let first = json!({"order_id": "o2", "amount": 500, "lines": [{"sku": "a", "qty": 1}]});
    registry
        .call("r", "pay", first.clone())
        .await
        .expect("first");
    registry
        .call("r", "pay", first)
        .await
        .expect("exact duplicate replays");
    let changed = json!({"order_id": "o2", "amount": 900, "lines": [{"sku": "a", "qty": 1}]});
    match registry.call("r", "pay", changed).await {
        Err(e @ ToolError::KeyConflict { .. }) => assert!(!e.is_retryable()),
        other => panic!("expected KeyConflict, got {other:?}"),
    }
    assert_eq!(pay.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn reordered_nested_arguments_replay_and_a_changed_nested_field_runs() {
    let pay = Pay {
        keyed_on_order: false,
        ..Pay::default()
    };
    let registry = Registry::builder(())
        .tool(pay.clone())
        .build()
        .expect("registry");
    let a = json!({"order_id": "o3", "amount": 700, "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}]});
    let reordered = serde_json::from_str::<Value>(
        r#"{ "lines": [ {"qty": 2.0, "sku": "a"}, {"qty": 1, "sku": "b"} ],
             "amount": 700, "order_id": "o3" }"#,
    )
    .expect("json");
    let r1 = registry.call("r", "pay", a).await.expect("first");
    let r2 = registry.call("r", "pay", reordered).await.expect("replay");
    assert_eq!(r1, r2);
    assert_eq!(pay.runs.load(Ordering::SeqCst), 1);
    let nested = json!({"order_id": "o3", "amount": 700, "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 3}]});
    registry
        .call("r", "pay", nested.clone())
        .await
        .expect("changed nested field");
    assert_eq!(
        pay.runs.load(Ordering::SeqCst),
        2,
        "a changed nested field is another operation"
    );
    registry.call("r", "pay", nested).await.expect("its replay");
    assert_eq!(pay.runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn key_fields_key_on_the_subset_and_fingerprint_everything() {
    let registry = pay_registry(&Pay::default());
    let id = |args: Value| {
        registry
            .identify("r", "pay", args)
            .expect("identify")
            .expect("a write tool")
    };
    let base = id(json!({"order_id": "o3", "amount": 700, "lines": [{"sku": "a", "qty": 2}]}));
    let nested = id(json!({"order_id": "o3", "amount": 700, "lines": [{"sku": "a", "qty": 3}]}));
    assert_eq!(base.0, nested.0, "pay keys on order_id only");
    assert_ne!(base.1, nested.1, "but fingerprints the nested change");
    let expected =
        idem::IdemKey::derive(idem::Scope::Run("r"), "pay", 1, &json!({"order_id": "o3"}))
            .with_namespace("shop");
    assert_eq!(base.0, expected);
}

#[tokio::test]
async fn invalid_arguments_name_the_field_and_nothing_runs() {
    let pay = Pay::default();
    let store = Arc::new(MemoryStore::new());
    let registry = Registry::builder(())
        .store(store.clone())
        .tool(pay.clone())
        .build()
        .expect("registry");
    let cases = [
        (
            json!({"order_id": "o", "amount": "lots", "lines": []}),
            "field `amount`: invalid type: string \"lots\", expected u64",
        ),
        (
            json!({"order_id": "o", "amount": 5, "lines": [{"sku": "a", "qty": -1}]}),
            "field `lines[0].qty`: invalid value: integer `-1`, expected u32",
        ),
        (
            json!({"amount": 5, "lines": []}),
            "missing field `order_id`",
        ),
        (
            json!([1, 2]),
            "expected a JSON object of named arguments, got an array",
        ),
        (
            json!(r#"{"order_id": "o", "amount": 5"#),
            "the arguments string is not valid JSON: EOF while parsing an object at line 1 column 29",
        ),
        (
            json!("not json"),
            "the arguments string is not valid JSON: expected ident at line 1 column 2",
        ),
        (
            json!("[1, 2]"),
            "the arguments string holds an array, not a JSON object of named arguments",
        ),
    ];
    for (args, expected) in cases {
        match registry.call("r", "pay", args).await {
            Err(ToolError::InvalidArgs { message, .. }) => {
                assert_eq!(message, expected);
                // Fields are named by their path; only text that is not
                // JSON at all is placed by line and column.
                assert!(
                    expected.contains("not valid JSON") || !message.contains("line 1"),
                    "no parser positions: {message}"
                );
            }
            other => panic!("expected InvalidArgs, got {other:?}"),
        }
    }
    assert_eq!(pay.runs.load(Ordering::SeqCst), 0);
    assert!(
        registry
            .store()
            .get(&idem::IdemKey::from_raw("x"))
            .await
            .is_ok()
    );
}

#[derive(Default, Serialize, Deserialize, schemars::JsonSchema)]
struct NoArgs {
    limit: Option<u32>,
}

struct Ping;

impl ReadTool<String> for Ping {
    type Args = NoArgs;
    type Output = String;
    type Error = std::convert::Infallible;

    fn info(&self) -> ToolInfo {
        ToolInfo::new("ping", "Answer with the run id and the state.")
    }

    async fn call(&self, args: NoArgs, ctx: &Ctx<String>) -> Result<String, Self::Error> {
        Ok(format!("{} {} {:?}", ctx.run_id(), ctx.state(), args.limit))
    }
}

#[tokio::test]
async fn null_and_empty_arguments_mean_no_arguments_and_reads_skip_the_store() {
    let store = Arc::new(FaultyStore::new(MemoryStore::new()));
    store.set_all(Fault::Hang);
    let registry = Registry::builder("state".to_owned())
        .store(store)
        .tool(Ping)
        .build()
        .expect("registry");
    for args in [Value::Null, json!(""), json!({}), json!("  ")] {
        // The store hangs: a read tool that touched it would never answer.
        assert_eq!(
            registry.call("run-9", "ping", args).await.expect("ping"),
            json!("run-9 state None")
        );
    }
    assert_eq!(
        registry
            .call("run-9", "ping", json!(r#"{"limit": 3}"#))
            .await
            .expect("ping"),
        json!("run-9 state Some(3)")
    );
}

/// A store chosen at run time, `Arc<dyn IdemStore>`, is held as it is,
/// not wrapped again: registries given the same one share its records, and
/// each hands back that very store.
#[tokio::test]
async fn an_erased_store_is_shared_as_it_is() {
    let erased: Arc<dyn IdemStore> = Arc::new(MemoryStore::new());
    let counter = Counter::default();
    let registry = |store: Arc<dyn IdemStore>| {
        Registry::builder(())
            .store(store)
            .tool(counter.clone())
            .build()
            .expect("registry")
    };
    let (one, two) = (registry(erased.clone()), registry(erased.clone()));
    assert!(Arc::ptr_eq(one.store(), &erased));
    assert!(Arc::ptr_eq(two.store(), &erased));
    let first = one
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("runs");
    let again = two
        .call("r", "counter", json!({"n": 1}))
        .await
        .expect("replays");
    assert_eq!(first, again);
    assert_eq!(counter.total(), 1);
}

#[tokio::test]
async fn unknown_tools_and_empty_run_ids_are_rejected() {
    let registry = build(Counter::default());
    let unknown = registry.call("r", "nope", json!({})).await;
    assert!(matches!(&unknown, Err(ToolError::UnknownTool { name }) if name == "nope"));
    let empty = registry.call("", "counter", json!({"n": 1})).await;
    assert!(matches!(empty, Err(ToolError::InvalidRunId)));
}

#[tokio::test]
async fn a_cached_result_that_no_longer_fits_is_an_error_not_a_run() {
    let store = Arc::new(MemoryStore::new());
    let counter = Counter::default();
    let registry = Registry::builder(())
        .store(store.clone())
        .tool(counter.clone())
        .build()
        .expect("registry");
    let args = json!({"n": 3});
    let (key, fp) = registry
        .identify("r", "counter", args.clone())
        .expect("id")
        .expect("write");
    // What an older version of the tool might have recorded.
    store.plant_done(&key, &fp, r#""a bare string""#, Duration::from_secs(60));
    match registry.call("r", "counter", args).await {
        Err(ToolError::Store {
            source: StoreError::Corrupt { reason, .. },
            ..
        }) => {
            assert!(reason.contains("no longer fits"), "{reason}");
        }
        other => panic!("expected a Corrupt store error, got {other:?}"),
    }
    assert_eq!(counter.total(), 0);
}

#[tokio::test]
async fn scope_namespace_and_version_shape_the_key() {
    struct Global;
    impl WriteTool<()> for Global {
        type Args = idem::testing::CounterArgs;
        type Output = u64;
        type Error = String;
        fn info(&self) -> ToolInfo {
            ToolInfo::new("welcome", "Send the welcome mail.")
        }
        fn options(&self) -> WriteOptions {
            WriteOptions::new().scope(ScopeKind::Global).version(2)
        }
        async fn call(&self, args: Self::Args, _: &WriteCtx<()>) -> Result<u64, String> {
            Ok(args.n)
        }
    }
    let registry = Registry::builder(())
        .namespace("prod")
        .tool(Global)
        .build()
        .expect("registry");
    let (k1, _) = registry
        .identify("run-a", "welcome", json!({"n": 7}))
        .expect("id")
        .expect("write");
    let (k2, _) = registry
        .identify("run-b", "welcome", json!({"n": 7}))
        .expect("id")
        .expect("write");
    assert_eq!(k1, k2, "global keys ignore the run");
    let expected = idem::IdemKey::derive(
        idem::Scope::Global,
        "welcome",
        2,
        &json!({"n": 7, "fail": false}),
    )
    .with_namespace("prod");
    assert_eq!(k1, expected);
    assert!(k1.as_str().starts_with("prod:idem:"));
}

#[tokio::test]
async fn build_rejects_bad_registries() {
    let dup = Registry::builder(())
        .tool(Counter::default())
        .tool(Counter::default())
        .build();
    assert!(matches!(dup, Err(RegistryError::DuplicateName { name }) if name == "counter"));
    let ns = Registry::builder(())
        .namespace("has space")
        .tool(Counter::default())
        .build();
    assert!(matches!(ns, Err(RegistryError::InvalidNamespace { .. })));
    let lease = Registry::builder(())
        .tool(Counter::new(
            Duration::ZERO,
            WriteOptions::new().lease(Duration::ZERO),
        ))
        .build();
    assert!(matches!(lease, Err(RegistryError::InvalidSetting { .. })));
    let hold = Registry::builder(())
        .default_max_hold(Duration::from_secs(1))
        .tool(Counter::default())
        .build();
    assert!(
        matches!(hold, Err(RegistryError::InvalidSetting { .. })),
        "max_hold below the 30 s lease"
    );
    // Durations no store can keep are refused, never a panic later.
    let max = Duration::MAX;
    let too_long = [
        ("ttl", Registry::builder(()).default_ttl(max)),
        ("max_hold", Registry::builder(()).default_max_hold(max)),
        (
            "lease",
            Registry::builder(())
                .default_lease(max)
                .default_max_hold(max),
        ),
        (
            "on_in_flight",
            Registry::builder(()).default_on_in_flight(OnInFlight::Wait(max)),
        ),
        ("store_timeout", Registry::builder(()).store_timeout(max)),
    ];
    for (setting, builder) in too_long {
        match builder.tool(Counter::default()).build() {
            Err(RegistryError::InvalidSetting { message, .. }) => {
                assert!(message.contains(setting), "{message}");
                assert!(message.contains("at most 100 years"), "{message}");
            }
            other => panic!(
                "{setting} of Duration::MAX was accepted: {:?}",
                other.map(|_| ())
            ),
        }
    }
    let per_tool = Registry::builder(())
        .tool(Counter::new(
            Duration::ZERO,
            WriteOptions::new().on_in_flight(OnInFlight::Wait(max)),
        ))
        .build();
    assert!(
        matches!(per_tool, Err(RegistryError::InvalidSetting { tool, .. }) if tool == "counter")
    );
    let key = Registry::builder(())
        .tool(Counter::new(
            Duration::ZERO,
            WriteOptions::new().key_fields(&["nope"]),
        ))
        .build();
    assert!(
        matches!(key, Err(RegistryError::InvalidSetting { message, .. }) if message.contains("`nope`"))
    );
    struct Named(&'static str, &'static str);
    impl ReadTool<()> for Named {
        type Args = NoArgs;
        type Output = ();
        type Error = String;
        fn info(&self) -> ToolInfo {
            ToolInfo::new(self.0, self.1)
        }
        async fn call(&self, _: NoArgs, _: &Ctx<()>) -> Result<(), String> {
            Ok(())
        }
    }
    for bad in ["", "1abc", "-x", "has space", "é", &"x".repeat(65)] {
        let r = Registry::builder(())
            .tool(Named(Box::leak(bad.to_owned().into_boxed_str()), "d"))
            .build();
        assert!(
            matches!(r, Err(RegistryError::InvalidName { .. })),
            "{bad:?} must be rejected"
        );
    }
    for good in ["a", "_x", "search-2", &"x".repeat(64)] {
        let r = Registry::builder(())
            .tool(Named(Box::leak(good.to_owned().into_boxed_str()), "d"))
            .build();
        assert!(r.is_ok(), "{good:?} must be accepted");
    }
    let nodesc = Registry::builder(()).tool(Named("quiet", "  ")).build();
    assert!(matches!(
        nodesc,
        Err(RegistryError::MissingDescription { .. })
    ));
    // Arguments must be named (a JSON object), which a bare number is not.
    struct Scalar;
    impl ReadTool<()> for Scalar {
        type Args = u64;
        type Output = ();
        type Error = String;
        fn info(&self) -> ToolInfo {
            ToolInfo::new("scalar", "Takes a bare number.")
        }
        async fn call(&self, _: u64, _: &Ctx<()>) -> Result<(), String> {
            Ok(())
        }
    }
    let scalar = Registry::builder(()).tool(Scalar).build();
    assert!(
        matches!(&scalar, Err(RegistryError::InvalidSchema { tool, message })
            if tool == "scalar" && message.contains("named fields")),
        "{scalar:?}"
    );
}

/// A wait for a person is checked when the registry is built: only where
/// the tool asks (for an approval; for an unknown outcome to be resolved),
/// and never longer than an approval stays good, the registry's default
/// included.
#[test]
fn waits_are_checked_when_the_registry_is_built() {
    let minutes = |m: u64| Duration::from_secs(60 * m);
    let asks = WriteOptions::new().approval(Approval::Required);
    let refused = |options: WriteOptions, default: Option<Duration>| {
        let mut builder = Registry::builder(()).tool(Counter::new(Duration::ZERO, options));
        if let Some(wait) = default {
            builder = builder.default_approval_wait(wait);
        }
        match builder.build() {
            Err(RegistryError::InvalidSetting { tool, message }) => format!("{tool}: {message}"),
            other => panic!("accepted: {:?}", other.map(|_| ())),
        }
    };
    let message = refused(WriteOptions::new().approval_wait(minutes(5)), None);
    assert!(message.contains("asks for none"), "{message}");
    let message = refused(asks.approval_wait(minutes(90)), None);
    assert!(
        message.contains("longer than `approval_window`"),
        "{message}"
    );
    let message = refused(asks.approval_window(minutes(5)), Some(minutes(10)));
    assert!(
        message.starts_with("counter: "),
        "the tool is named: {message}"
    );
    let message = refused(WriteOptions::new().uncertain_wait(minutes(5)), None);
    assert!(message.contains("on_uncertain"), "{message}");
    let accepted = Registry::builder(())
        .default_approval_wait(minutes(10))
        .default_uncertain_wait(minutes(10))
        .tool(Counter::new(
            Duration::ZERO,
            asks.approval_wait(minutes(60)),
        ))
        .build();
    assert!(
        accepted.is_ok(),
        "a wait as long as the window, and defaults for tools that do not ask"
    );
}

#[tokio::test]
async fn definitions_carry_an_object_schema_with_required() {
    let pay = Pay::default();
    let registry = Registry::builder(()).tool(pay).build().expect("registry");
    let def = &registry.definitions()[0];
    assert_eq!(def.name, "pay");
    assert_eq!(def.kind, idem::ToolKind::Write);
    let schema = &def.input_schema;
    assert_eq!(schema["type"], "object");
    assert!(schema.get("title").is_none());
    assert_eq!(schema["required"], json!(["order_id", "amount", "lines"]));
}

#[tokio::test(start_paused = true)]
async fn waiting_duplicate_gives_up_with_in_flight_after_its_bound() {
    let counter = Counter::new(
        Duration::from_secs(10),
        WriteOptions::new().on_in_flight(OnInFlight::Wait(Duration::from_secs(1))),
    );
    let registry = build(counter.clone());
    let (first, dup) = tokio::join!(
        registry.call("r", "counter", json!({"n": 1})),
        registry.call("r", "counter", json!({"n": 1})),
    );
    assert!(first.is_ok());
    assert!(
        matches!(dup, Err(ToolError::InFlight { .. })),
        "got {dup:?}"
    );
    assert_eq!(counter.total(), 1);
}

#[tokio::test(start_paused = true)]
async fn registry_defaults_apply_to_tools_that_set_nothing() {
    let counter = Counter::new(Duration::from_secs(3), WriteOptions::new());
    let registry = Registry::builder(())
        .default_on_in_flight(OnInFlight::Wait(Duration::from_secs(60)))
        .default_lease(Duration::from_millis(500))
        .tool(counter.clone())
        .build()
        .expect("registry");
    let (first, dup) = tokio::join!(
        registry.call("r", "counter", json!({"n": 1})),
        registry.call("r", "counter", json!({"n": 1})),
    );
    assert_eq!(
        first.expect("first"),
        dup.expect("the duplicate waited for it")
    );
    assert_eq!(
        counter.total(),
        1,
        "the 500 ms lease was renewed over the 3 s body"
    );
}

#[test]
fn every_error_has_a_model_message_and_a_retry_verdict() {
    let store = |source| ToolError::Store {
        tool: "t".into(),
        source,
    };
    let cases: Vec<(ToolError, bool)> = vec![
        (ToolError::UnknownTool { name: "x".into() }, false),
        (
            ToolError::InvalidArgs {
                tool: "t".into(),
                message: "field `a`: bad".into(),
            },
            false,
        ),
        (ToolError::InvalidRunId, false),
        (
            ToolError::InFlight {
                tool: "t".into(),
                key: "k".into(),
            },
            true,
        ),
        (
            ToolError::KeyConflict {
                tool: "t".into(),
                key: "k".into(),
                fields: vec![],
            },
            false,
        ),
        (
            ToolError::KeyConflict {
                tool: "t".into(),
                key: "k".into(),
                fields: vec!["amount".into(), "order.note".into()],
            },
            false,
        ),
        (
            ToolError::Failed {
                tool: "t".into(),
                message: "the provider timed out".into(),
                permanent: false,
            },
            true,
        ),
        (
            ToolError::Failed {
                tool: "t".into(),
                message: "card declined".into(),
                permanent: true,
            },
            false,
        ),
        (store(StoreError::unavailable("down")), true),
        (
            store(StoreError::Timeout {
                op: "claim",
                after: Duration::from_secs(1),
            }),
            true,
        ),
        (store(StoreError::corrupt("k", "junk")), false),
        (
            ToolError::LeaseLost {
                tool: "t".into(),
                key: "k".into(),
            },
            true,
        ),
    ];
    for (error, retryable) in cases {
        assert_eq!(error.is_retryable(), retryable, "{error:?}");
        let message = error.model_message();
        assert!(
            message.len() > 10 && !message.contains("idem:"),
            "{error:?}: {message}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn memory_store_does_not_grow_without_bound() {
    let store = Arc::new(MemoryStore::new());
    let counter = Counter::new(
        Duration::ZERO,
        WriteOptions::new().ttl(Duration::from_millis(10)),
    );
    let registry = Registry::builder(())
        .store(store.clone())
        .tool(counter.clone())
        .build()
        .expect("registry");
    for n in 0..100_000u64 {
        registry
            .call("r", "counter", json!({"n": n}))
            .await
            .expect("call");
        if n % 1000 == 999 {
            sleep(20).await; // every result so far has expired
        }
    }
    assert_eq!(counter.total(), 100_000);
    let held = store.len();
    assert!(held < 25_000, "{held} records held for 1,000 live ones");
    sleep(20).await;
    let purged = IdemStore::purge_expired(&*store).await.expect("purge");
    assert_eq!(purged, held as u64, "every held record had expired");
    assert_eq!(store.len(), 0);
}

/// A write tool whose first run panics, as a buggy tool might.
#[derive(Clone, Default)]
struct Fragile {
    runs: Arc<AtomicUsize>,
}

impl WriteTool<()> for Fragile {
    type Args = idem::testing::CounterArgs;
    type Output = u32;
    type Error = String;
    fn info(&self) -> ToolInfo {
        ToolInfo::new("fragile", "Panics on its first run.")
    }
    fn options(&self) -> WriteOptions {
        WriteOptions::new().lease(Duration::from_secs(2))
    }
    async fn call(&self, _: Self::Args, ctx: &WriteCtx<()>) -> Result<u32, String> {
        if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("boom");
        }
        Ok(ctx.attempt())
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_tool_fails_its_call_and_its_claim_lapses_like_a_crash() {
    let tool = Fragile::default();
    let registry = Registry::builder(())
        .tool(tool.clone())
        .build()
        .expect("registry");
    let args = json!({"n": 1});
    match registry.call("r", "fragile", args.clone()).await {
        Err(ToolError::Failed {
            message,
            permanent: false,
            ..
        }) => assert!(message.contains("panicked (boom)"), "{message}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    // Whether it took effect is unknown: the key stays claimed, as after a
    // crash, until the lease lapses.
    assert!(matches!(
        registry.call("r", "fragile", args.clone()).await,
        Err(ToolError::InFlight { .. })
    ));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 1);
    sleep(2_100).await;
    // Then it runs again, counting the lapsed attempt, and is recorded.
    assert_eq!(
        registry.call("r", "fragile", args.clone()).await.ok(),
        Some(json!(1))
    );
    assert_eq!(
        registry.call("r", "fragile", args).await.ok(),
        Some(json!(1))
    );
    assert_eq!(tool.runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn oversized_and_overdeep_arguments_are_refused_before_anything_runs() {
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let registry = Registry::builder(())
        .tool(counter.clone())
        .max_args_bytes(64 * 1024)
        .max_args_depth(8)
        .build()
        .expect("registry");
    // A 2 MiB arguments string, as a provider would send it.
    let huge = Value::String(format!(r#"{{"n": 1, "extra": "{}"}}"#, "x".repeat(2 << 20)));
    match registry.call("r", "counter", huge).await {
        Err(ToolError::InvalidArgs { message, .. }) => {
            assert!(message.contains("max_args_bytes"), "{message}")
        }
        other => panic!("expected InvalidArgs, got {other:?}"),
    }
    let mut deep = json!(1);
    for _ in 0..1000 {
        deep = json!({ "d": deep });
    }
    match registry
        .call("r", "counter", json!({"n": 1, "extra": deep}))
        .await
    {
        Err(ToolError::InvalidArgs { message, .. }) => {
            assert!(message.contains("max_args_depth"), "{message}")
        }
        other => panic!("expected InvalidArgs, got {other:?}"),
    }
    assert_eq!(counter.total(), 0, "nothing ran");
    assert!(
        Registry::builder(())
            .tool(counter)
            .max_args_bytes(10)
            .build()
            .is_err(),
        "a limit too small to hold any arguments is refused"
    );
}

/// A write tool known only at run time (a proxied MCP tool): any JSON
/// object for arguments, its schema given with its info.
struct Dynamic {
    schema: Value,
    ran: Arc<AtomicUsize>,
}

impl WriteTool<()> for Dynamic {
    type Args = serde_json::Map<String, Value>;
    type Output = Value;
    type Error = String;
    fn info(&self) -> ToolInfo {
        ToolInfo::new("tag", "Tags a thing.").with_input_schema(self.schema.clone())
    }
    fn options(&self) -> WriteOptions {
        WriteOptions::new().ignore_fields(&["note"])
    }
    async fn call(&self, args: Self::Args, _: &WriteCtx<()>) -> Result<Value, String> {
        Ok(json!({"run": self.ran.fetch_add(1, Ordering::SeqCst), "tags": args["tags"]}))
    }
}

#[tokio::test]
async fn a_tool_known_at_run_time_is_keyed_by_the_schema_it_gives() {
    let schema = json!({
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "note": {"type": "string"},
        },
        "required": ["tags"],
    });
    let ran = Arc::new(AtomicUsize::new(0));
    let tool = Dynamic {
        schema: schema.clone(),
        ran: ran.clone(),
    };
    let registry = Registry::builder(()).tool(tool).build().expect("registry");
    assert_eq!(registry.definitions()[0].input_schema, schema);

    // The schema's set is put in order and its ignored field dropped: one
    // operation, whatever the order and the note.
    let first = registry
        .answer("run-1", "tag", json!({"tags": ["b", "a"], "note": "x"}))
        .await;
    let again = registry
        .answer("run-1", "tag", json!({"note": "y", "tags": ["a", "b"]}))
        .await;
    assert!(!first.replayed && again.replayed);
    assert_eq!(again.result.expect("replayed"), first.result.expect("ran"));
    assert_eq!(ran.load(Ordering::SeqCst), 1);

    // A schema that is no object, or a role it does not hold, is refused.
    let scalar = Dynamic {
        schema: json!({"type": "array"}),
        ran: ran.clone(),
    };
    let refused = Registry::builder(()).tool(scalar).build();
    assert!(
        matches!(&refused, Err(RegistryError::InvalidSchema { message, .. })
            if message.contains("must describe a JSON object")),
        "{refused:?}"
    );
    let noteless = Dynamic {
        schema: json!({"type": "object", "properties": {"tags": {"type": "array"}}}),
        ran,
    };
    let refused = Registry::builder(()).tool(noteless).build();
    assert!(
        matches!(&refused, Err(RegistryError::InvalidSetting { message, .. })
            if message.contains("`note`")),
        "{refused:?}"
    );
}

/// A result that cannot be serialized when it holds `false`.
#[derive(Debug, Deserialize)]
struct Picky(bool);

impl Serialize for Picky {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            true => serializer.serialize_bool(true),
            false => Err(serde::ser::Error::custom("not this one")),
        }
    }
}

/// A tool whose body fails in a way that leaves its outcome unknown and
/// whose `verify` says it took effect, with a result that cannot be
/// recorded.
struct Unrecordable {
    verifications: Arc<AtomicUsize>,
}

impl WriteTool<()> for Unrecordable {
    type Args = serde_json::Map<String, Value>;
    type Output = Picky;
    type Error = String;
    fn info(&self) -> ToolInfo {
        ToolInfo::new("unrecordable", "Times out, then is verified.")
    }
    fn options(&self) -> WriteOptions {
        WriteOptions::new().on_uncertain(idem::OnUncertain::Verify)
    }
    fn is_uncertain(&self, _: &String) -> bool {
        true
    }
    async fn verify(
        &self,
        _: Self::Args,
        _: &WriteCtx<()>,
    ) -> Result<idem::Verified<Picky>, String> {
        self.verifications.fetch_add(1, Ordering::SeqCst);
        Ok(idem::Verified::Done(Picky(false)))
    }
    async fn call(&self, _: Self::Args, _: &WriteCtx<()>) -> Result<Picky, String> {
        Err("the downstream timed out".into())
    }
}

#[tokio::test]
async fn a_verified_result_that_cannot_be_recorded_leaves_the_outcome_unknown() {
    let verifications = Arc::new(AtomicUsize::new(0));
    let tool = Unrecordable {
        verifications: verifications.clone(),
    };
    let registry = Registry::builder(()).tool(tool).build().expect("registry");
    for _ in 0..2 {
        let answer = registry.call("run-1", "unrecordable", json!({})).await;
        assert!(
            matches!(answer, Err(ToolError::OutcomeUnknown { .. })),
            "{answer:?}"
        );
    }
    assert_eq!(
        verifications.load(Ordering::SeqCst),
        1,
        "asked once, then left to an operator"
    );
}

/// The approval hook is told of each operation that comes to await a
/// person's approval, once (its duplicates are not asked again), with the
/// key the person approves and what the operation is; a hook that panics
/// changes nothing for the call or the record.
#[tokio::test]
async fn the_approval_hook_is_told_once_per_operation() {
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = told.clone();
    let counter = Counter::new(
        Duration::ZERO,
        WriteOptions::new().approval(idem::Approval::Required),
    );
    let registry = Registry::builder(())
        .tool(counter.clone())
        .on_approval_requested(move |request| {
            let told = {
                let mut seen = seen.lock().expect("lock");
                seen.push(request.clone());
                seen.len()
            };
            if told == 2 {
                panic!("a hook that panics");
            }
        })
        .build()
        .expect("registry");
    let context = idem::CallContext::run("run-9").tenant("acme");
    for n in [1, 1, 2, 2] {
        let asked = registry.call(context, "counter", json!({ "n": n })).await;
        assert!(
            matches!(asked, Err(ToolError::ApprovalRequired { .. })),
            "{asked:?}"
        );
    }
    let told = told.lock().expect("lock");
    assert_eq!(told.len(), 2, "one request per operation: {told:?}");
    let (key, _) = registry
        .identify(context, "counter", json!({ "n": 1 }))
        .expect("identify")
        .expect("a write tool");
    assert_eq!(told[0].key, key);
    assert_eq!(told[0].tool, "counter");
    assert_eq!(told[0].about.tenant.as_deref(), Some("acme"));
    assert_eq!(told[0].about.run.as_deref(), Some("run-9"));
    assert_eq!(told[0].about.arguments["n"], 1);
    assert_eq!(counter.total(), 0, "nothing ran");
}

/// A wait stopped by its caller (`stop_waiting_when`: an MCP client's
/// cancellation) ends with the awaiting answer, though its time is far
/// from up, and leaves the operation awaiting: approved then, the next
/// call runs it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_wait_leaves_the_operation_awaiting() {
    use std::sync::atomic::AtomicBool;

    let waits = WriteOptions::new()
        .approval(Approval::Required)
        .approval_wait(Duration::from_secs(600));
    let counter = Counter::new(Duration::ZERO, waits);
    let registry = Registry::builder(())
        .tool(counter.clone())
        .build()
        .expect("registry");
    let args = json!({ "n": 1 });
    let (key, _) = registry
        .identify("r", "counter", args.clone())
        .expect("identify")
        .expect("a write");
    let stop = AtomicBool::new(false);
    let stopped = || stop.load(Ordering::SeqCst);
    let call = registry.call(
        idem::CallContext::run("r").stop_waiting_when(&stopped),
        "counter",
        args.clone(),
    );
    let stopping = async {
        // Once the operation awaits, its call waits: stop it.
        while registry
            .store()
            .inspect(&key)
            .await
            .ok()
            .flatten()
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.store(true, Ordering::SeqCst);
    };
    // A guard against a hang, should the stop be missed: the wait itself
    // is ten minutes.
    let (answer, ()) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(call, stopping)
    })
    .await
    .expect("the stopped wait ended");
    assert!(
        matches!(answer, Err(ToolError::ApprovalRequired { .. })),
        "{answer:?}"
    );
    assert_eq!(counter.total(), 0);
    registry
        .approve(&key, "ana")
        .await
        .expect("it still awaits");
    let ran = registry.call("r", "counter", args).await;
    assert!(ran.is_ok(), "{ran:?}");
    assert_eq!(counter.total(), 1, "the approval ran it once");
}

/// The record's about says the call's run and its arguments as the tool
/// read them, the same value whichever way the key was derived: from all
/// the arguments (the about then reuses their canonical text) or from some
/// of them (the arguments written out again).
#[tokio::test]
async fn the_record_says_the_arguments_whichever_fields_are_keyed() {
    let args = json!({"order_id": "o-\u{e9}\"1", "amount": 7,
                      "lines": [{"sku": "b", "qty": 2}, {"qty": 1, "sku": "a"}]});
    for keyed_on_order in [false, true] {
        let pay = Pay {
            keyed_on_order,
            ..Pay::default()
        };
        let registry = pay_registry(&pay);
        let context = idem::CallContext::run("run-3").tenant("acme");
        registry
            .call(context, "pay", args.clone())
            .await
            .expect("paid");
        let (key, _) = registry
            .identify(context, "pay", args.clone())
            .expect("identify")
            .expect("a write tool");
        let record = registry.store().inspect(&key).await.expect("inspect");
        let about = record.and_then(|r| r.about).expect("an about");
        let about = idem::store::About::parse(&about).expect("an About");
        assert_eq!(about.tenant.as_deref(), Some("acme"), "{keyed_on_order}");
        assert_eq!(about.run.as_deref(), Some("run-3"), "{keyed_on_order}");
        assert_eq!(
            about.arguments, args,
            "keyed on the order: {keyed_on_order}"
        );
    }
}
