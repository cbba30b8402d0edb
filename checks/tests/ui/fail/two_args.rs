use idem::prelude::*;

#[derive(Serialize, Deserialize, JsonSchema)]
struct Order {
    id: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Payment {
    amount: u64,
}

/// Pay an order.
#[write_tool]
async fn pay(#[args] order: Order, #[args] payment: Payment, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (order.id, payment.amount, ctx);
    Ok(())
}

fn main() {}
