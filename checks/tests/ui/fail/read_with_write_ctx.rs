use idem::prelude::*;

/// Look a customer up.
#[read_tool]
async fn find_customer(id: String, ctx: &WriteCtx) -> Result<String, String> {
    Ok(format!("{id} {}", ctx.idem_key()))
}

fn main() {}
