use idem::prelude::*;

fn timed_out(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::TimedOut
}

/// Charge a card.
#[write_tool(uncertain_errors = timed_out)]
async fn charge_card(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

fn main() {}
