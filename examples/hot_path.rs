//! Drives the write path in a loop, for profilers:
//! `valgrind --tool=callgrind target/release/examples/hot_path 100000`.

use idem::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema)]
struct Args {
    order_id: u64,
    amount: u64,
    currency: String,
}

/// Charge an order.
#[write_tool]
async fn charge(#[args] a: Args, _ctx: &WriteCtx) -> Result<u64, String> {
    Ok(a.order_id + a.amount)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);
    let registry = Registry::builder(()).tool(charge).build()?;
    let mut sum = 0u64;
    let started = std::time::Instant::now();
    for i in 0..n {
        let args = serde_json::json!({"order_id": i, "amount": 4200, "currency": "eur"});
        if let Ok(v) = registry.call("run-1", "charge", args).await {
            sum += v.as_u64().unwrap_or(0);
        }
    }
    eprintln!(
        "{:.0} ns per call",
        started.elapsed().as_nanos() as f64 / n as f64
    );
    println!("{sum}");
    Ok(())
}
