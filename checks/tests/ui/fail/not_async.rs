use idem::prelude::*;

/// Look a customer up.
#[read_tool]
fn find_customer(id: String) -> Result<String, String> {
    Ok(id)
}

fn main() {}
