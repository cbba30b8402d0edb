use idem::prelude::*;

/// Charge a customer.
#[write_tool(ignore = [note])]
async fn charge(customer: String, amount: u64, reason: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (customer, amount, reason, ctx);
    Ok(())
}

fn main() {}
