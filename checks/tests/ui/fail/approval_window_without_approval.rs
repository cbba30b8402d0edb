use idem::prelude::*;

/// Send an invoice: it needs no approval, so no approval window.
#[write_tool(approval_window = "30m")]
async fn send_invoice(order: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order, ctx);
    Ok(())
}

fn main() {}
