use idem::prelude::*;

#[derive(Serialize)]
struct Receipt {
    id: String,
}

/// Charge a card.
#[write_tool]
async fn charge_card(amount: u64, ctx: &WriteCtx) -> Result<Receipt, String> {
    Ok(Receipt { id: format!("{amount}{}", ctx.attempt()) })
}

fn main() {
    let _ = Registry::builder(()).tool(charge_card);
}
