//! A result alias and a return type a `macro_rules!` passes in.
use idem::prelude::*;

#[derive(Debug)]
struct ShopError;

impl std::fmt::Display for ShopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the shop is closed")
    }
}

type Res<T> = Result<T, ShopError>;

/// Charge a card.
#[write_tool]
async fn charge(amount: u64, ctx: &WriteCtx) -> Res<u64> {
    let _ = ctx;
    Ok(amount)
}

macro_rules! refund_tool {
    ($name:ident, $ret:ty) => {
        /// Refund a card.
        #[write_tool]
        async fn $name(amount: u64, ctx: &WriteCtx) -> $ret {
            let _ = ctx;
            Ok(amount)
        }
    };
}

refund_tool!(refund, Result<u64, String>);

fn main() {
    let registry = Registry::builder(())
        .tool(charge)
        .tool(refund)
        .build()
        .expect("a registry");
    assert_eq!(registry.definitions().len(), 2);
}
