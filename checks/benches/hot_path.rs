//! Drives the write path in a loop and prints the time per call, for
//! profilers and for comparing two builds run in turn:
//! `cargo bench -p idem-checks --bench hot_path -- 300000`, or under callgrind the binary
//! cargo prints (`target/release/deps/hot_path-*`).

use clap::Parser;
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

/// Calls one write tool with fresh arguments, in a loop.
#[derive(Parser)]
struct Cli {
    /// How many calls.
    #[arg(default_value_t = 100_000)]
    calls: u64,
    /// What `cargo bench` passes; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = Cli::parse().calls.max(1);
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
