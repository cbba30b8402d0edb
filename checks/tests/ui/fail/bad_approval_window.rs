use idem::prelude::*;

/// Refund an order.
#[write_tool(approval = "required", approval_window = 1800)]
async fn refund(order: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order, ctx);
    Ok(())
}

/// Close an account.
#[write_tool(approval = "required", approval_window = "half an hour")]
async fn close_account(account: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (account, ctx);
    Ok(())
}

fn main() {}
