use idem::prelude::*;

/// Takes the amount by value: the approval function is given references.
fn over_limit(amount: u64, ctx: &Ctx) -> bool {
    let _ = ctx;
    amount > 1_000
}

/// Charge an order.
#[write_tool(approval = over_limit)]
async fn charge(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

fn main() {}
