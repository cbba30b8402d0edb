//! A write tool implemented by hand, and the three sources of duplicates
//! made harmless: a replayed turn, a repeated tool call, a concurrent
//! duplicate. A fake payment provider counts the charges it makes.
//!
//! ```text
//! cargo run --example by_hand
//! ```

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use idem::prelude::*;
use idem::{ToolInfo, WriteOptions, WriteTool};
use serde_json::json;

/// A payment provider that honours `Idempotency-Key`, as Stripe does.
#[derive(Default)]
struct Provider {
    charges: Mutex<HashMap<String, u64>>,
}

impl Provider {
    async fn charge(&self, amount: u64, idempotency_key: &str) -> Result<String, String> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut charges = self.charges.lock().map_err(|e| e.to_string())?;
        let n = charges.len();
        charges.entry(idempotency_key.to_owned()).or_insert(amount);
        Ok(format!("ch_{n:04}"))
    }

    fn count(&self) -> usize {
        self.charges.lock().map(|c| c.len()).unwrap_or(0)
    }
}

struct Shop {
    provider: Provider,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ChargeArgs {
    /// Amount in minor units (cents).
    amount: u64,
    currency: String,
    customer_id: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Receipt {
    charge_id: String,
    amount: u64,
}

struct ChargeCard;

impl WriteTool<Shop> for ChargeCard {
    type Args = ChargeArgs;
    type Output = Receipt;
    type Error = String;

    fn info(&self) -> ToolInfo {
        ToolInfo::new("charge_card", "Charge a customer's card.")
    }

    fn options(&self) -> WriteOptions {
        WriteOptions::new().lease(Duration::from_secs(10))
    }

    async fn call(&self, a: ChargeArgs, ctx: &WriteCtx<Shop>) -> Result<Receipt, String> {
        println!(
            "    body runs: attempt {}, key {}",
            ctx.attempt(),
            ctx.idem_key()
        );
        let charge_id = ctx
            .state()
            .provider
            .charge(a.amount, ctx.idem_key().as_str())
            .await?;
        Ok(Receipt {
            charge_id,
            amount: a.amount,
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = Registry::builder(Shop {
        provider: Provider::default(),
    })
    .namespace("shop-demo")
    .tool(ChargeCard)
    .build()?;
    let args = json!({"amount": 4200, "currency": "eur", "customer_id": "cus_7"});

    println!("1. the model asks for a charge");
    let first = registry.call("run-1", "charge_card", args.clone()).await?;
    println!("   -> {first}");

    println!("2. our retry replays the turn (same arguments, new formatting)");
    let replayed = json!({"customer_id": "cus_7", "currency": "eur", "amount": 4200.0});
    let again = registry.call("run-1", "charge_card", replayed).await?;
    println!("   -> {again} (replayed, body did not run)");

    println!("3. two workers race on a new charge");
    let other = json!({"amount": 990, "currency": "eur", "customer_id": "cus_8"});
    let (a, b) = tokio::join!(
        registry.call("run-1", "charge_card", other.clone()),
        registry.call("run-1", "charge_card", other),
    );
    for r in [a, b] {
        match r {
            Ok(v) => println!("   -> {v}"),
            Err(e) => println!("   -> {e}; the model reads: {:?}", e.model_message()),
        }
    }

    let count = registry.state().provider.count();
    println!("provider made {count} charges for 2 distinct operations");
    if count != 2 {
        return Err(format!("expected 2 charges, the provider made {count}").into());
    }
    Ok(())
}
