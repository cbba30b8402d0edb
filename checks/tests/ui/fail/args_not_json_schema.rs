use idem::prelude::*;

#[derive(Serialize, Deserialize)]
struct ChargeArgs {
    amount: u64,
}

/// Charge a card.
#[write_tool]
async fn charge_card(#[args] a: ChargeArgs, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(a.amount)
}

fn main() {}
