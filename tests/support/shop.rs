//! A small shop for the ecosystem tests (`tests/providers.rs`,
//! `integrations/tests/rig.rs`): a write tool that counts its executions, and a read tool.

use std::sync::atomic::{AtomicU64, Ordering};

use idem::prelude::*;
use serde_json::{Value, json};

/// The application state: how many charges really ran.
#[derive(Default)]
pub(crate) struct Shop {
    charges: AtomicU64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ChargeArgs {
    /// The order to charge for.
    order_id: String,
    /// Amount in cents.
    amount: u64,
}

/// Charge a card.
#[write_tool]
async fn charge_card(#[args] a: ChargeArgs, ctx: &WriteCtx<Shop>) -> Result<Value, String> {
    let n = ctx.state().charges.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(json!({ "charge_id": format!("ch_{n:04}"), "order_id": a.order_id, "amount": a.amount }))
}

/// Look an order up.
#[read_tool]
async fn lookup_order(order_id: String) -> Result<String, String> {
    Ok(format!("{order_id}: awaiting payment"))
}

/// A registry of `charge_card` and `lookup_order` on a fresh shop.
pub(crate) fn registry() -> Registry<Shop> {
    builder().build().expect("registry")
}

/// The builder of [`registry`], to set more before building.
pub(crate) fn builder() -> idem::RegistryBuilder<Shop> {
    Registry::builder(Shop::default())
        .tool(charge_card)
        .tool(lookup_order)
}

/// How many times `charge_card` really ran.
pub(crate) fn executions(registry: &Registry<Shop>) -> u64 {
    registry.state().charges.load(Ordering::SeqCst)
}
