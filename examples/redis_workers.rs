//! A fleet of agent workers sharing one Redis: each worker has its own
//! connection and registry (as separate processes would), every worker
//! receives every job (at-least-once delivery), and each job still runs
//! once.
//!
//! ```text
//! cargo run --example redis_workers -- [redis://127.0.0.1:6379] [workers=4]
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::RedisStore;
use idem::prelude::*;

/// A worker's state: its number, and the mail server all workers share.
struct Worker {
    id: u32,
    mails_sent: Arc<AtomicUsize>,
}

/// Send the order confirmation mail, once per order.
#[write_tool(scope = "global", on_in_flight = "wait(10s)")]
async fn send_confirmation(order_id: u32, ctx: &WriteCtx<Worker>) -> Result<String, String> {
    // A real mailer would get ctx.idem_key() as the message id.
    tokio::time::sleep(Duration::from_millis(20)).await;
    ctx.state().mails_sent.fetch_add(1, Ordering::SeqCst);
    Ok(format!(
        "order {order_id} confirmed by worker {}",
        ctx.state().id
    ))
}

/// A fleet of workers on one Redis, each calling the same write tool for
/// the same orders.
#[derive(clap::Parser)]
struct Cli {
    /// The Redis every worker shares.
    #[arg(default_value = "redis://127.0.0.1:6379")]
    url: String,
    /// How many workers.
    #[arg(default_value_t = 4)]
    workers: u32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Cli { url, workers } = clap::Parser::parse();
    let orders = 25u32;
    let namespace = format!("workers-demo-{}", std::process::id());
    let mails_sent = Arc::new(AtomicUsize::new(0));

    let mut handles = Vec::new();
    for id in 0..workers {
        let registry = Registry::builder(Worker {
            id,
            mails_sent: mails_sent.clone(),
        })
        .store(RedisStore::connect(&url).await?)
        .namespace(&namespace)
        .tool(send_confirmation)
        .build()?;
        handles.push(tokio::spawn(async move {
            let mut confirmations = Vec::new();
            for order_id in 0..orders {
                let args = serde_json::json!({ "order_id": order_id });
                match registry.call("queue", "send_confirmation", args).await {
                    Ok(v) => confirmations.push(v),
                    Err(e) => eprintln!("worker {id}: {e}"),
                }
            }
            confirmations
        }));
    }
    for (id, h) in handles.into_iter().enumerate() {
        let confirmations = h.await?;
        println!(
            "worker {id}: {} confirmations, e.g. {}",
            confirmations.len(),
            confirmations[0]
        );
    }
    let sent = mails_sent.load(Ordering::SeqCst);
    println!(
        "{workers} workers × {orders} orders = {} deliveries; mails sent: {sent}",
        workers * orders
    );
    if sent != orders as usize {
        return Err(format!("expected {orders} mails, sent {sent}").into());
    }
    Ok(())
}
