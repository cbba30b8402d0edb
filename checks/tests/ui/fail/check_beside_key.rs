use idem::prelude::*;

/// Charge a customer.
#[write_tool(key = [customer], check = [amount])]
async fn charge(customer: String, amount: u64, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (customer, amount, ctx);
    Ok(())
}

fn main() {}
