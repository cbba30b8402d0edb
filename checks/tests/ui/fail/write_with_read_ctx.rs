use idem::prelude::*;

/// Charge a customer's card.
#[write_tool]
async fn charge_card(amount: u64, ctx: &Ctx) -> Result<String, String> {
    Ok(format!("charged {amount} in {}", ctx.run_id()))
}

fn main() {}
