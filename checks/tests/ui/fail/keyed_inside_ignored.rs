use idem::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema)]
struct Order {
    id: String,
    note: String,
}

/// Ship an order.
#[write_tool(key = [order.id], ignore = [order])]
async fn ship(order: Order, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order, ctx);
    Ok(())
}

fn main() {}
