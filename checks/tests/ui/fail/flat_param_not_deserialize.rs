use idem::prelude::*;

struct Money {
    cents: u64,
}

/// Charge a card.
#[write_tool]
async fn charge_card(amount: Money, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount.cents)
}

fn main() {}
