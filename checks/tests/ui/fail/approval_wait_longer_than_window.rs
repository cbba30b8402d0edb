use idem::prelude::*;

/// Refund an order, once a person approves: the call would wait past the
/// hour an approval stays good.
#[write_tool(approval = "required", approval_window = "1h", approval_wait = "2h")]
async fn refund(order: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order, ctx);
    Ok(())
}

fn main() {}
