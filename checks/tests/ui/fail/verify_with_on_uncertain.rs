use idem::prelude::*;

/// Asks the mail gateway whether the email went out.
async fn was_sent(to: String, ctx: &WriteCtx) -> Result<Verified<u64>, String> {
    let _ = (to, ctx);
    Ok(Verified::NotDone)
}

/// Send the customer an email.
#[write_tool(verify = was_sent, on_uncertain = "refuse")]
async fn send(to: String, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = (to, ctx);
    Ok(1)
}

fn main() {}
