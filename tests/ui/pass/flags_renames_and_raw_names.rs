//! Attribute flags, renamed and raw-named parameters as keys, and a
//! deprecated tool in a crate that denies warnings.
#![deny(warnings)]

use idem::prelude::*;

/// Delete an order; keyed on its id, which the model sends as `orderId`.
#[write_tool(destructive, open_world, key = [order_id])]
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

/// The old way to charge.
#[deprecated(note = "use charge_card")]
#[write_tool]
async fn old_charge(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

fn main() {
    #[allow(deprecated)]
    let builder = Registry::builder(()).tool(old_charge);
    let registry = builder
        .tool(delete_order)
        .tool(set_type)
        .build()
        .expect("a registry");
    let _ = registry;
}
