//! Criterion benchmarks of the hot path: key derivation against its floor
//! (`serde_json::to_vec` + SHA-256 of the same value), the in-memory store,
//! a write tool called through the registry against its body called
//! directly, and the same calls with results sealed at rest against
//! without. `cargo bench -p idem-checks --bench idem`; figures in BENCHMARKS.md.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use idem::prelude::*;
use idem::store::ClaimRequest;
use idem::store::Outcome;
use idem::{Fingerprint, IdemStore};
use serde_json::json;
use sha2::{Digest, Sha256};

#[path = "support/arguments.rs"]
mod arguments;
use arguments::{medium, nested, small};

fn keys(c: &mut Criterion) {
    let mut group = c.benchmark_group("keys");
    // Each derivation is measured right before its floor, and briefly: this
    // VM's speed drifts within seconds, which skews a ratio of two long
    // runs. `checks/benches/key_ratio.rs` interleaves the two for the ratio itself.
    group
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2));
    for (name, value) in [
        ("small", small()),
        ("medium", medium()),
        ("nested", nested()),
    ] {
        let size = serde_json::to_vec(&value).map_or(0, |v| v.len());
        group.bench_with_input(
            BenchmarkId::new("derive", format!("{name}-{size}B")),
            &value,
            |b, v| b.iter(|| IdemKey::derive(Scope::Run("run-1"), "charge_card", 1, black_box(v))),
        );
        group.bench_with_input(
            BenchmarkId::new("to_vec+sha256", format!("{name}-{size}B")),
            &value,
            |b, v| {
                b.iter(|| {
                    let bytes = serde_json::to_vec(black_box(v)).unwrap_or_default();
                    Sha256::digest(&bytes)
                })
            },
        );
    }
    group.finish();
}

fn memory_store(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = MemoryStore::new();
    let fp = Fingerprint::of(&json!({}));
    let n = AtomicU64::new(0);
    c.bench_function("memory_store/claim+complete", |b| {
        b.to_async(&rt).iter_batched(
            || IdemKey::from_raw(format!("bench:{}", n.fetch_add(1, Ordering::Relaxed))),
            |key| async {
                let key = key;
                let claim = store
                    .claim(
                        &key,
                        ClaimRequest::new("bench", &fp, std::time::Duration::from_secs(30)),
                    )
                    .await;
                if let Ok(idem::store::Claim::Acquired(token)) = claim {
                    let _ = store
                        .settle(
                            &key,
                            &token,
                            Outcome::Done {
                                result: "1",
                                ttl: std::time::Duration::from_secs(60),
                            },
                        )
                        .await;
                }
            },
            BatchSize::SmallInput,
        )
    });
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Args {
    order_id: u64,
    amount: u64,
    currency: String,
}

async fn charge_body(a: Args) -> Result<u64, String> {
    Ok(a.order_id + a.amount)
}

/// Charge an order (benchmark).
#[write_tool]
async fn charge(#[args] a: Args, _ctx: &WriteCtx) -> Result<u64, String> {
    charge_body(a).await
}

/// The same tool with results kept 1 ms, so that the store stays small:
/// the wrapper's own cost without a table of millions.
#[write_tool(ttl = "1ms")]
async fn charge_brief(#[args] a: Args, _ctx: &WriteCtx) -> Result<u64, String> {
    charge_body(a).await
}

/// The same, keyed on the order alone: the amount and currency are checked,
/// so its fingerprint carries their field tags (the cost of naming a
/// conflict's fields, paid on every call).
#[write_tool(ttl = "1ms", key = [order_id])]
async fn charge_keyed(#[args] a: Args, _ctx: &WriteCtx) -> Result<u64, String> {
    charge_body(a).await
}

fn registry(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let registry = Registry::builder(())
        .tool(charge)
        .tool(charge_brief)
        .tool(charge_keyed)
        .build()
        .expect("registry");
    let n = AtomicU64::new(0);
    for tool in ["charge", "charge_brief", "charge_keyed"] {
        let out = rt.block_on(registry.call(
            "run-0",
            tool,
            json!({"order_id": 0, "amount": 1, "currency": "eur"}),
        ));
        assert!(out.is_ok(), "{tool}: {out:?}");
    }
    let mut group = c.benchmark_group("write_call");
    group.bench_function("body_direct", |b| {
        b.to_async(&rt).iter_batched(
            || Args {
                order_id: n.fetch_add(1, Ordering::Relaxed),
                amount: 4200,
                currency: "eur".into(),
            },
            |a| async { black_box(charge_body(a).await) },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("registry_call", |b| {
        b.to_async(&rt).iter_batched(
            || json!({"order_id": n.fetch_add(1, Ordering::Relaxed), "amount": 4200, "currency": "eur"}),
            |args| async { black_box(registry.call("run-1", "charge", args).await) },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("registry_call_small_store", |b| {
        b.to_async(&rt).iter_batched(
            || json!({"order_id": n.fetch_add(1, Ordering::Relaxed), "amount": 4200, "currency": "eur"}),
            |args| async { black_box(registry.call("run-1", "charge_brief", args).await) },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("registry_call_keyed_on_one_field", |b| {
        b.to_async(&rt).iter_batched(
            || json!({"order_id": n.fetch_add(1, Ordering::Relaxed), "amount": 4200, "currency": "eur"}),
            |args| async { black_box(registry.call("run-1", "charge_keyed", args).await) },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("registry_replay", |b| {
        b.to_async(&rt).iter_batched(
            || json!({"order_id": 1, "amount": 4200, "currency": "eur"}),
            |args| async { black_box(registry.call("run-1", "charge", args).await) },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// A receipt of `size` bytes, kept 1 ms (sealing benchmark).
#[write_tool(ttl = "1ms")]
async fn receipt(order_id: u64, size: usize, _ctx: &WriteCtx) -> Result<String, String> {
    Ok(format!("{order_id:0>size$}"))
}

/// The write path with results sealed (`encrypt_results`) against the
/// same registry without, in one run: a new operation with a small and a
/// 4 KiB result, and a replay.
fn sealing(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let keys = idem::ResultKeys::new("bench", [7; 32]).expect("keys");
    let registries = [
        ("plain", Registry::builder(()).tool(receipt).build()),
        (
            "sealed",
            Registry::builder(())
                .tool(receipt)
                .encrypt_results(keys)
                .build(),
        ),
    ];
    let n = AtomicU64::new(0);
    let mut group = c.benchmark_group("sealing");
    for (name, registry) in &registries {
        let registry = registry.as_ref().expect("registry");
        for size in [8, 4096] {
            group.bench_function(format!("{name}/call_{size}b"), |b| {
                b.to_async(&rt).iter_batched(
                    || json!({"order_id": n.fetch_add(1, Ordering::Relaxed), "size": size}),
                    |args| async { black_box(registry.call("run-1", "receipt", args).await) },
                    BatchSize::SmallInput,
                )
            });
        }
        let replayed = json!({"order_id": u64::MAX, "size": 4096});
        let first = rt.block_on(registry.call("run-r", "receipt", replayed.clone()));
        assert!(first.is_ok(), "{first:?}");
        group.bench_function(format!("{name}/replay_4096b"), |b| {
            b.to_async(&rt).iter_batched(
                || replayed.clone(),
                |args| async { black_box(registry.call("run-r", "receipt", args).await) },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

/// The safety work of idem, each part on and off side by side in one run,
/// on the same call (a new operation each time, results kept 1 ms, the
/// in-memory store): nothing of it (`off`), a tenant in the call's
/// context, results sealed (`encrypt_results`), a `tracing` subscriber
/// formatting every span and event (to nowhere), a metrics recorder, and
/// all of them. What cannot be turned off (the argument limits, the
/// lease's heartbeat, recording retries) is in every variant; its cost is
/// the Redis comparison with the build before it (BENCHMARKS.md).
fn safety(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plain = Registry::builder(())
        .tool(charge_brief)
        .tool(charge_keyed)
        .build()
        .expect("registry");
    let keys = idem::ResultKeys::new("bench", [7; 32]).expect("keys");
    let sealed = Registry::builder(())
        .tool(charge_brief)
        .encrypt_results(keys)
        .build()
        .expect("registry");
    let n = AtomicU64::new(0);
    let mut group = c.benchmark_group("safety");
    for (name, tenant, sealing, subscriber, recorder) in [
        ("off", false, false, false, false),
        ("tenant", true, false, false, false),
        ("sealed", false, true, false, false),
        ("spans", false, false, true, false),
        ("metrics", false, false, false, true),
        ("all", true, true, true, true),
    ] {
        let _tracing = subscriber.then(|| {
            let sink = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::INFO)
                .with_writer(std::io::sink)
                .finish();
            tracing::subscriber::set_default(sink)
        });
        let debugging = metrics_util::debugging::DebuggingRecorder::new();
        let _metrics = recorder.then(|| metrics::set_default_local_recorder(&debugging));
        let registry = if sealing { &sealed } else { &plain };
        let context = if tenant {
            idem::CallContext::run("run-1").tenant("acme")
        } else {
            idem::CallContext::run("run-1")
        };
        group.bench_function(name, |b| {
            b.to_async(&rt).iter_batched(
                || json!({"order_id": n.fetch_add(1, Ordering::Relaxed), "amount": 4200, "currency": "eur"}),
                |args| async move { black_box(registry.call(context, "charge_brief", args).await) },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, keys, memory_store, registry, sealing, safety);
criterion_main!(benches);
