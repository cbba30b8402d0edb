//! Descriptions a macro writes: a doc attribute and the `description` key.
use idem::prelude::*;

#[doc = concat!("Charge ", "a card.")]
/// Amounts are in cents.
#[write_tool]
async fn charge(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

#[write_tool(description = concat!("Refund ", "a card."))]
async fn refund(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

fn main() {
    let registry = Registry::builder(())
        .tool(charge)
        .tool(refund)
        .build()
        .expect("a registry");
    let descriptions: Vec<&str> = registry
        .definitions()
        .iter()
        .map(|d| d.description.as_str())
        .collect();
    assert_eq!(
        descriptions,
        ["Charge a card.\nAmounts are in cents.", "Refund a card."]
    );
}
