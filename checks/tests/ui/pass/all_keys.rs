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

fn main() {
    let registry = Registry::builder(()).tool(charge).tool(cancel).build();
    assert!(registry.is_ok());
}
