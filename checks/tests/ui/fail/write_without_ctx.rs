use idem::prelude::*;

/// Charge a customer's card.
#[write_tool]
async fn charge_card(amount: u64, customer_id: String) -> Result<String, String> {
    Ok(format!("charged {customer_id} {amount}"))
}

fn main() {}
