use idem::prelude::*;

/// Look a customer up.
#[read_tool(name = "find customer")]
async fn find_customer(id: String) -> Result<String, String> {
    Ok(id)
}

fn main() {}
