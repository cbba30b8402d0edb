use idem::prelude::*;

struct Shop;

/// Charge a card.
#[write_tool]
async fn charge_card(amount: u64, ctx: &WriteCtx<Shop>) -> Result<u64, String> {
    let _ = ctx.state();
    Ok(amount)
}

fn main() {
    let _ = Registry::builder(42u8).tool(charge_card).build();
}
