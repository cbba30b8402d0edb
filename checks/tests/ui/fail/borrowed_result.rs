use idem::prelude::*;

/// Send a greeting.
#[write_tool]
async fn greet(name: String, ctx: &WriteCtx) -> Result<&'static str, String> {
    let _ = (name, ctx);
    Ok("hello")
}

fn main() {}
