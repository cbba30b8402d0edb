use idem::prelude::*;

/// Store a value.
#[write_tool]
async fn put<T: Serialize>(value: T, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (value, ctx);
    Ok(())
}

fn main() {}
