use idem::prelude::*;

#[derive(Debug)]
enum PaymentError {
    Declined,
    Timeout,
}

impl std::fmt::Display for PaymentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

fn declined(e: &PaymentError) -> bool {
    matches!(e, PaymentError::Declined)
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ChargeArgs {
    order_id: String,
    amount: u64,
}

/// Charge an order.
#[write_tool(
    name = "charge-order",
    description = "Charge an order's card.",
    lease = "500ms",
    ttl = "7d",
    max_hold = "2m",
    max_result_bytes = 65536,
    scope = "global",
    key = [order_id],
    version = 2,
    on_in_flight = "wait(5s)",
    on_store_error = "fail_closed",
    on_uncertain = "refuse",
    permanent_errors = declined,
    destructive = true,
    open_world = false
)]
async fn charge(#[args] a: ChargeArgs, ctx: &WriteCtx) -> Result<u64, PaymentError> {
    let _ = (ctx.idem_key(), ctx.attempt(), ctx.run_id());
    match a.amount {
        0 => Err(PaymentError::Declined),
        1 => Err(PaymentError::Timeout),
        n => Ok(n),
    }
}

#[write_tool(
    permanent_errors = |e: &String| e.starts_with("no"),
    on_in_flight = "reject",
    on_store_error = "run",
    on_uncertain = "rerun"
)]
/// Cancel an order.
async fn cancel(order_id: String, ctx: &WriteCtx<()>) -> Result<(), String> {
    let _ = (order_id, ctx.is_claimed());
    Ok(())
}

fn timed_out(e: &PaymentError) -> bool {
    matches!(e, PaymentError::Timeout)
}

/// Asks the payment provider whether the refund went through.
async fn refunded(order_id: String, amount: u64, ctx: &WriteCtx) -> Result<Verified<u64>, std::io::Error> {
    let _ = (order_id, ctx.idem_key(), ctx.attempt(), ctx.tenant());
    Ok(if amount > 0 { Verified::Done(amount) } else { Verified::NotDone })
}

/// Refund an order.
#[write_tool(verify = refunded, uncertain_errors = timed_out)]
async fn refund(order_id: String, amount: u64, ctx: &WriteCtx) -> Result<u64, PaymentError> {
    let _ = (order_id, ctx);
    Ok(amount)
}

/// Asks whether the charge went through.
async fn charged(a: ChargeArgs, _: &WriteCtx) -> Result<Verified<u64>, String> {
    Ok(Verified::Done(a.amount))
}

/// Charge again.
#[write_tool(verify = charged, uncertain_errors = |e: &PaymentError| matches!(e, PaymentError::Timeout))]
async fn recharge(#[args] a: ChargeArgs, ctx: &WriteCtx) -> Result<u64, PaymentError> {
    let _ = ctx;
    Ok(a.amount)
}

fn main() {
    let registry = Registry::builder(())
        .tool(charge)
        .tool(cancel)
        .tool(refund)
        .tool(recharge)
        .build();
    assert!(registry.is_ok());
}
