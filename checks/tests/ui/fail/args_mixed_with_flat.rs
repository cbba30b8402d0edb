use idem::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema)]
struct Order {
    id: String,
}

/// Pay an order.
#[write_tool]
async fn pay(#[args] order: Order, amount: u64, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order.id, amount, ctx);
    Ok(())
}

fn main() {}
