use idem::prelude::*;

/// Post to the team channel.
#[write_tool(on_store_error = "fail_open")]
async fn post(text: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (text, ctx);
    Ok(())
}

fn main() {}
