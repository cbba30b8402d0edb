use idem::prelude::*;

/// Book a room for a range of nights.
#[write_tool(key = [range.0])]
async fn book(range: (u32, u32), ctx: &WriteCtx) -> Result<(), String> {
    let _ = (range, ctx);
    Ok(())
}

fn main() {}
