use idem::prelude::*;

/// Delete an account.
#[write_tool(approval = "required", on_store_error = "run")]
async fn delete_account(account: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (account, ctx);
    Ok(())
}

fn main() {}
