use idem::prelude::*;

/// Send the welcome mail.
#[write_tool(scope = "tenant", version = -1)]
async fn welcome(user_id: u64, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (user_id, ctx);
    Ok(())
}

fn main() {}
