//! What webhooks cost the calls that send them, when the receiver fails:
//! a write call that asks for approval (a new operation each time, so
//! each call sends `approval.requested`) with no `notify` (`off`), and
//! with `notify` to a receiver that is not there (`dead`: every
//! connection refused) or that answers after 5 s (`slow`), side by side
//! in alternating slices of about 20 ms (`support/alternate.rs`), each
//! round giving one ratio to `off`.
//!
//! `cargo bench -p idem-checks --bench notify_ratio [-- ROUNDS]` prints one
//! line of JSON per variant:
//! `{"variant":"dead","ns":..,"off_ns":..,"ratio":..,"ratio_p10":..,"ratio_p90":..,"rounds":..}`,
//! the times being medians over the rounds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idem::notify::{Notify, WebhookSecret};
use idem::prelude::*;
use idem::testing::Receiver;
use serde_json::json;

#[path = "support/alternate.rs"]
mod alternate;

/// Refund an order once a person approves; awaiting records kept 1 ms, so
/// the store stays small.
#[write_tool(approval = "required", ttl = "1ms")]
async fn refund(order_id: u64, _ctx: &WriteCtx) -> Result<u64, String> {
    Ok(order_id)
}

const VARIANTS: [&str; 3] = ["off", "dead", "slow"];

fn main() {
    let rounds = alternate::rounds_from_args();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let slow = rt.block_on(Receiver::start());
    slow.delay(Duration::from_secs(5));
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        format!(
            "http://{}/hooks",
            listener.local_addr().expect("its address")
        )
    };
    let secret = WebhookSecret::generate();
    let build = |url: Option<&str>| {
        let builder = Registry::builder(()).tool(refund);
        let builder = match url {
            Some(url) => builder.notify(Notify::standard(url, secret.clone()).expect("notify")),
            None => builder,
        };
        builder.build().expect("registry")
    };
    let registries = [build(None), build(Some(&dead)), build(Some(slow.url()))];
    let n = AtomicU64::new(0);
    let mut sides: Vec<Box<dyn FnMut(u32) + '_>> = registries
        .iter()
        .zip(VARIANTS)
        .map(|(registry, name)| {
            let (rt, n) = (&rt, &n);
            Box::new(move |calls: u32| {
                for _ in 0..calls {
                    let args = json!({ "order_id": n.fetch_add(1, Ordering::Relaxed) });
                    let out = rt.block_on(registry.call("run-1", "refund", args));
                    assert!(
                        matches!(out, Err(ToolError::ApprovalRequired { .. })),
                        "{name}: {out:?}"
                    );
                }
            }) as Box<dyn FnMut(u32) + '_>
        })
        .collect();
    let mut refs: Vec<alternate::Side<'_>> = sides.iter_mut().map(|s| &mut **s as _).collect();
    let times = alternate::alternate(rounds, &mut refs);
    alternate::print_ratios(&VARIANTS, &times, rounds);
}
