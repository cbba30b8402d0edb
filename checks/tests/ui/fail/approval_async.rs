use idem::prelude::*;

/// Asks a service whether the charge needs approval: async, which a
/// decision cannot be.
async fn over_limit(amount: &u64, ctx: &Ctx) -> bool {
    let _ = ctx;
    *amount > 1_000
}

/// Charge an order.
#[write_tool(approval = over_limit)]
async fn charge(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

fn main() {}
