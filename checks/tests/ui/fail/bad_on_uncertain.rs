use idem::prelude::*;

/// Send the customer an email.
#[write_tool(on_uncertain = "verify")]
async fn send(text: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (text, ctx);
    Ok(())
}

fn main() {}
