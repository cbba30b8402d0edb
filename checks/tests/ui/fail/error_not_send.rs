use idem::prelude::*;

/// Charge a card.
#[write_tool]
async fn charge_card(amount: u64, ctx: &WriteCtx) -> Result<u64, Box<dyn std::error::Error>> {
    let _ = ctx;
    Ok(amount)
}

fn main() {}
