use idem::prelude::*;

/// Send an SMS: it runs again by itself when its outcome is uncertain, so
/// nobody resolves anything to wait for.
#[write_tool(uncertain_wait = "5m")]
async fn send_sms(to: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (to, ctx);
    Ok(())
}

fn main() {}
