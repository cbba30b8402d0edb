use idem::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema)]
struct Item {
    sku: String,
    quantity: u32,
}

/// Ship the items of an order.
#[write_tool(check = [items.sku])]
async fn ship(order_id: String, items: Vec<Item>, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order_id, items, ctx);
    Ok(())
}

fn main() {}
