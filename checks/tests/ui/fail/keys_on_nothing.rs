use idem::prelude::*;

/// Post a note.
#[write_tool(check = [channel], ignore = [text])]
async fn post(channel: String, text: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (channel, text, ctx);
    Ok(())
}

/// Post nothing.
#[write_tool(ignore = [])]
async fn ping(channel: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (channel, ctx);
    Ok(())
}

fn main() {}
