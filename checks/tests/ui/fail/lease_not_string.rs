use idem::prelude::*;

/// Charge a card.
#[write_tool(lease = 30)]
async fn charge_card(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

fn main() {}
