use idem::prelude::*;

fn over_limit(amount: &u64, ctx: &Ctx) -> bool {
    let _ = ctx;
    *amount > 1_000
}

/// Charge an order: the function's name in quotes, as serde writes
/// `default = "path"`.
#[write_tool(approval = "over_limit")]
async fn charge(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

fn main() {}
