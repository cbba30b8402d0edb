use idem::prelude::*;

fn is_permanent(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::PermissionDenied
}

/// Charge a card.
#[write_tool(permanent_errors = is_permanent)]
async fn charge_card(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

fn main() {}
