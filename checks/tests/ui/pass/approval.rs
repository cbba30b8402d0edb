use idem::prelude::*;

/// Whether a charge needs a person's approval: above a limit, or for a
/// tenant that asks for every one.
fn over_limit(order: &String, amount: &u64, ctx: &Ctx) -> bool {
    let _ = order;
    *amount > 1_000 || ctx.tenant() == Some("careful")
}

/// Charge an order.
#[write_tool(approval = over_limit)]
async fn charge(order: String, amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = (order, ctx);
    Ok(amount)
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Refund {
    order: String,
    amount: u64,
}

fn large(refund: &Refund, ctx: &Ctx) -> bool {
    let _ = ctx;
    refund.amount > 100
}

/// Refund an order: its arguments in one struct.
#[write_tool(approval = large)]
async fn refund(#[args] refund: Refund, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(refund.amount)
}

/// Close an account: the person at an MCP client is asked.
#[write_tool(approval = "ask")]
async fn close_account(account: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (account, ctx);
    Ok(())
}

/// Delete an account: always asks.
#[write_tool(
    approval = "required",
    approval_window = "30m",
    approval_wait = "10m",
    on_uncertain = "refuse",
    uncertain_wait = "5m"
)]
async fn delete_account(account: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (account, ctx);
    Ok(())
}

/// A state of the user's own naming: the approval function is given the
/// context with it.
#[write_tool(approval = careful)]
async fn archive<S: Send + Sync + 'static>(folder: String, ctx: &WriteCtx<S>) -> Result<(), String> {
    let _ = (folder, ctx);
    Ok(())
}

fn careful<S>(folder: &String, ctx: &Ctx<S>) -> bool {
    folder.starts_with("legal") || ctx.tenant().is_none()
}

/// Whether a transfer needs approval: the decision takes the parameters in
/// the tool's order, then the context, wherever the tool takes it.
fn large_transfer(to: &String, amount: &u64, ctx: &Ctx) -> bool {
    let _ = (to, ctx);
    *amount > 10_000
}

/// Transfer money: the context comes first.
#[write_tool(approval = large_transfer)]
async fn transfer(ctx: &WriteCtx, to: String, amount: u64) -> Result<u64, String> {
    let _ = (ctx, to);
    Ok(amount)
}

fn main() {
    let _ = Registry::builder(())
        .tool(transfer)
        .tool(charge)
        .tool(refund)
        .tool(close_account)
        .tool(delete_account)
        .tool(archive)
        .build();
}
