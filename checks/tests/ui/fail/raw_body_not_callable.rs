use idem::prelude::*;

/// Charge a card.
#[write_tool]
async fn charge_card(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

async fn sneaky(ctx: &WriteCtx) {
    let _ = charge_card(100, ctx).await;
}

fn main() {}
