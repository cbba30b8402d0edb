use idem::prelude::*;

/// Charge a card.
#[write_tool(hide = [card_number])]
async fn charge(card: String, amount: u64, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (card, amount, ctx);
    Ok(())
}

fn main() {}
