use idem::prelude::*;

/// Pay an order.
#[write_tool(max_result_bytes = 100)]
async fn pay(order_id: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order_id, ctx);
    Ok(())
}

/// Refund an order.
#[write_tool(max_result_bytes = "1 MiB")]
async fn refund(order_id: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order_id, ctx);
    Ok(())
}

fn main() {}
