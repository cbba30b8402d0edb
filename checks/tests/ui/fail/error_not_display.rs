use idem::prelude::*;

#[derive(Debug)]
enum PaymentError {
    Declined,
}

/// Charge a card.
#[write_tool]
async fn charge_card(amount: u64, ctx: &WriteCtx) -> Result<u64, PaymentError> {
    let _ = ctx;
    if amount == 0 {
        return Err(PaymentError::Declined);
    }
    Ok(amount)
}

fn main() {}
