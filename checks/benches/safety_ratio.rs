//! What each part of idem's safety work costs a write call, measured side
//! by side with the call without it: the variants alternate in slices of
//! about 20 ms (`support/alternate.rs`), and each round gives each variant
//! one ratio to the plain call. The call is a new operation each time on
//! the in-memory store (results kept 1 ms), as in the criterion `safety`
//! group of `checks/benches/idem.rs`, whose figures drift with the machine
//! between benchmarks; these ratios do not.
//!
//! `cargo bench -p idem-checks --bench safety_ratio [-- ROUNDS]` prints one
//! line of JSON per variant:
//! `{"variant":"sealed","ns":..,"off_ns":..,"ratio":..,"ratio_p10":..,"ratio_p90":..,"rounds":..}`,
//! the times being medians over the rounds.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use idem::prelude::*;
use idem::{CallContext, ResultKeys};
use serde_json::json;

#[path = "support/alternate.rs"]
mod alternate;

/// A write tool like the criterion `safety` group's: results kept 1 ms, so the
/// store stays small.
#[write_tool(ttl = "1ms")]
async fn charge_brief(
    order_id: u64,
    amount: u64,
    currency: String,
    _ctx: &WriteCtx,
) -> Result<u64, String> {
    Ok(black_box(order_id + amount + currency.len() as u64))
}

/// Which parts a variant turns on.
#[derive(Clone, Copy)]
struct Variant {
    name: &'static str,
    tenant: bool,
    sealed: bool,
    spans: bool,
    metrics: bool,
}

const VARIANTS: [Variant; 6] = [
    Variant {
        name: "off",
        tenant: false,
        sealed: false,
        spans: false,
        metrics: false,
    },
    Variant {
        name: "tenant",
        tenant: true,
        sealed: false,
        spans: false,
        metrics: false,
    },
    Variant {
        name: "sealed",
        tenant: false,
        sealed: true,
        spans: false,
        metrics: false,
    },
    Variant {
        name: "spans",
        tenant: false,
        sealed: false,
        spans: true,
        metrics: false,
    },
    Variant {
        name: "metrics",
        tenant: false,
        sealed: false,
        spans: false,
        metrics: true,
    },
    Variant {
        name: "all",
        tenant: true,
        sealed: true,
        spans: true,
        metrics: true,
    },
];

fn main() {
    let rounds = alternate::rounds_from_args();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let build = |sealed: bool| {
        let builder = Registry::builder(()).tool(charge_brief);
        let builder = if sealed {
            builder.encrypt_results(ResultKeys::new("bench", [7; 32]).expect("keys"))
        } else {
            builder
        };
        builder.build().expect("registry")
    };
    let (plain, sealed) = (build(false), build(true));
    // A `fmt` subscriber at INFO writing to nowhere, and metrics-util's
    // debugging recorder, installed around a variant's slice only.
    let dispatch = tracing::Dispatch::new(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(std::io::sink)
            .finish(),
    );
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let n = AtomicU64::new(0);
    let mut sides: Vec<Box<dyn FnMut(u32) + '_>> = VARIANTS
        .iter()
        .map(|&v| {
            let registry = if v.sealed { &sealed } else { &plain };
            let context = if v.tenant {
                CallContext::run("run-1").tenant("acme")
            } else {
                CallContext::run("run-1")
            };
            let (rt, n, dispatch, recorder) = (&rt, &n, &dispatch, &recorder);
            Box::new(move |calls: u32| {
                let slice = || {
                    for _ in 0..calls {
                        let args = json!({"order_id": n.fetch_add(1, Ordering::Relaxed), "amount": 4200, "currency": "eur"});
                        let out = rt.block_on(registry.call(context, "charge_brief", args));
                        assert!(out.is_ok(), "{}: {out:?}", v.name);
                    }
                };
                match (v.spans, v.metrics) {
                    (true, true) => tracing::dispatcher::with_default(dispatch, || {
                        metrics::with_local_recorder(recorder, slice)
                    }),
                    (true, false) => tracing::dispatcher::with_default(dispatch, slice),
                    (false, true) => metrics::with_local_recorder(recorder, slice),
                    (false, false) => slice(),
                }
            }) as Box<dyn FnMut(u32) + '_>
        })
        .collect();
    // tracing decides once per call site whether anyone may want it, when
    // the site is first reached, asking the dispatcher in scope if only
    // one exists: reach every site first with the subscriber in scope, or
    // no span is ever recorded.
    for side in sides.iter_mut().rev() {
        side(1);
    }
    let mut refs: Vec<alternate::Side<'_>> = sides.iter_mut().map(|s| &mut **s as _).collect();
    let times = alternate::alternate(rounds, &mut refs);
    let names: Vec<&str> = VARIANTS.iter().map(|v| v.name).collect();
    alternate::print_ratios(&names, &times, rounds);
}
