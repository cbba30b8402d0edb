use idem::prelude::*;

/// Pay an order.
#[write_tool(key = [order])]
async fn pay(order_id: String, amount: u64, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order_id, amount, ctx);
    Ok(())
}

fn main() {}
