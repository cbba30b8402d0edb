use idem::prelude::*;

trait Billing {
    /// Charge a card.
    #[write_tool]
    async fn charge(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
        let _ = ctx;
        Ok(amount)
    }
}

fn main() {}
