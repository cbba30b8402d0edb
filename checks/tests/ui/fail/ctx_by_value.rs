use idem::prelude::*;

/// Pay an order.
#[write_tool]
async fn pay(order_id: String, ctx: WriteCtx) -> Result<(), String> {
    let _ = (order_id, ctx);
    Ok(())
}

fn main() {}
