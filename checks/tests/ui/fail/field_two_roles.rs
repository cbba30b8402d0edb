use idem::prelude::*;

/// Charge a customer.
#[write_tool(key = [customer, amount], ignore = [amount])]
async fn charge(customer: String, amount: u64, reason: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (customer, amount, reason, ctx);
    Ok(())
}

/// Refund a customer.
#[write_tool(ignore = [reason, reason])]
async fn refund(customer: String, reason: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (customer, reason, ctx);
    Ok(())
}

fn main() {}
