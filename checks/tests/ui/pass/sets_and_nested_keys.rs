//! A set among the arguments keys the same whatever its order; a key may
//! name a field of a nested object; an `#[args]` struct's key fields are
//! checked when the registry is built.
use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};

use idem::prelude::*;
use serde_json::json;

/// Tag an order.
#[write_tool]
async fn tag(order_id: u64, tags: HashSet<String>, ctx: &WriteCtx<AtomicU32>) -> Result<usize, String> {
    ctx.state().fetch_add(1, Ordering::SeqCst);
    Ok(tags.len() + order_id as usize)
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Customer {
    id: u64,
    name: String,
}

/// Greet a customer, once per customer id.
#[write_tool(key = [customer.id])]
async fn greet(customer: Customer, ctx: &WriteCtx<AtomicU32>) -> Result<String, String> {
    ctx.state().fetch_add(1, Ordering::SeqCst);
    Ok(format!("hello {}", customer.name))
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Refund {
    order_id: u64,
}

/// Refund, keyed on a field the struct does not have.
#[write_tool(key = [order])]
async fn refund(#[args] r: Refund, ctx: &WriteCtx<AtomicU32>) -> Result<u64, String> {
    let _ = ctx;
    Ok(r.order_id)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::builder(AtomicU32::new(0))
        .tool(tag)
        .tool(greet)
        .build()
        .expect("a registry");
    for tags in [json!(["a", "b", "c"]), json!(["c", "a", "b"])] {
        let args = json!({"order_id": 1, "tags": tags});
        registry.call("r", "tag", args).await.expect("tag");
    }
    let first = json!({"customer": {"id": 7, "name": "Ada"}});
    registry.call("r", "greet", first).await.expect("greet");
    let renamed = json!({"customer": {"id": 7, "name": "Ada L."}});
    let conflict = registry.call("r", "greet", renamed).await;
    assert!(matches!(conflict, Err(ToolError::KeyConflict { .. })));
    assert_eq!(registry.state().load(Ordering::SeqCst), 2, "each ran once");

    let refused = Registry::builder(AtomicU32::new(0)).tool(refund).build();
    assert!(refused.is_err(), "a key field the struct does not have");
}
