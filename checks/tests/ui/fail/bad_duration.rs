use idem::prelude::*;

/// Pay an order.
#[write_tool(lease = "30 seconds", on_in_flight = "wait(forever)")]
async fn pay(order_id: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order_id, ctx);
    Ok(())
}

fn main() {}
