// A crate that reaches idem under another path (a re-export here; a
// renamed dependency alike) names it with `crate = ".."`.
mod tools {
    pub use idem::*;
}

use tools::prelude::{Deserialize, JsonSchema, Registry, Serialize, WriteCtx, read_tool, write_tool};

#[derive(Serialize, Deserialize, JsonSchema)]
struct Order {
    id: String,
}

/// Pay an order.
#[write_tool(crate = "crate::tools")]
async fn pay(#[args] order: Order, ctx: &WriteCtx) -> Result<String, String> {
    Ok(format!("{} {}", order.id, ctx.idem_key()))
}

/// Look an order up.
#[read_tool(crate = "crate::tools")]
async fn look_up(id: String) -> Result<String, String> {
    Ok(id)
}

fn main() {
    let registry = Registry::builder(()).tool(pay).tool(look_up).build();
    assert!(registry.is_ok());
}
