use idem::prelude::*;

/// Delete an account: `approval` and `approval_window` written as flags.
#[write_tool(approval, approval_window, destructive)]
async fn delete_account(account: String, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (account, ctx);
    Ok(())
}

fn main() {}
