use std::rc::Rc;

use idem::prelude::*;

async fn provider_call() {}

/// Charge a card.
#[write_tool]
async fn charge_card(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let counter = Rc::new(amount);
    provider_call().await;
    let _ = ctx;
    Ok(*counter)
}

fn main() {}
