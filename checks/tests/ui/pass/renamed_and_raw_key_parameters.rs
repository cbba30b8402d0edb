//! `key` names a parameter as written in Rust, keyed on its JSON name: a
//! renamed one (`orderId`) and a raw-named one (`r#type`); an `#[args]`
//! struct's fields by their JSON names.
use idem::prelude::*;
use serde_json::json;

/// Delete an order; the model sends its id as `orderId`.
#[write_tool(key = [order_id])]
async fn delete_order(
    #[serde(rename = "orderId")] order_id: u64,
    reason: String,
    ctx: &WriteCtx,
) -> Result<String, String> {
    let _ = ctx;
    Ok(format!("{order_id}: {reason}"))
}

/// Set an order's type; keyed on the type.
#[write_tool(key = [type])]
async fn set_type(r#type: String, note: String, ctx: &WriteCtx) -> Result<String, String> {
    let _ = ctx;
    Ok(format!("{type}: {note}", type = r#type))
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Cancel {
    #[serde(rename = "orderId")]
    order_id: u64,
    reason: String,
}

/// Cancel an order; keyed on its JSON field `orderId`.
#[write_tool(key = [orderId])]
async fn cancel(#[args] c: Cancel, ctx: &WriteCtx) -> Result<String, String> {
    let _ = ctx;
    Ok(format!("{}: {}", c.order_id, c.reason))
}

/// Calls `tool` twice with the same key and another payload: the second
/// is a key conflict, so the key covered the key field alone.
async fn keyed_on_one_field(registry: &Registry<()>, tool: &str, first: serde_json::Value, second: serde_json::Value) {
    registry.call("r", tool, first).await.expect("the first call runs");
    let again = registry.call("r", tool, second).await;
    assert!(matches!(again, Err(ToolError::KeyConflict { .. })), "{tool}: {again:?}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::builder(())
        .tool(delete_order)
        .tool(set_type)
        .tool(cancel)
        .build()
        .expect("renamed and raw key parameters register");
    assert!(registry.definitions()[0].input_schema["properties"].get("orderId").is_some());
    keyed_on_one_field(
        &registry,
        "delete_order",
        json!({"orderId": 7, "reason": "dup"}),
        json!({"orderId": 7, "reason": "other"}),
    )
    .await;
    keyed_on_one_field(
        &registry,
        "set_type",
        json!({"type": "rush", "note": "a"}),
        json!({"type": "rush", "note": "b"}),
    )
    .await;
    keyed_on_one_field(
        &registry,
        "cancel",
        json!({"orderId": 9, "reason": "a"}),
        json!({"orderId": 9, "reason": "b"}),
    )
    .await;
    let other = registry
        .call("r", "delete_order", json!({"orderId": 8, "reason": "other"}))
        .await;
    assert_eq!(other.expect("another id runs"), json!("8: other"));
}
