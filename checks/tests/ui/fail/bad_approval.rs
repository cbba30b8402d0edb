use idem::prelude::*;

/// Delete an account.
#[write_tool(approval = "always")]
async fn delete_account(account: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (account, ctx);
    Ok(())
}

fn main() {}
