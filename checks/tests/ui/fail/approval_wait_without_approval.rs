use idem::prelude::*;

/// Send an invoice: it needs no approval, so nothing to wait for.
#[write_tool(approval_wait = "10m")]
async fn send_invoice(order: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order, ctx);
    Ok(())
}

fn main() {}
