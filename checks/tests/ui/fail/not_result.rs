use idem::prelude::*;

/// Look a customer up.
#[read_tool]
async fn find_customer(id: String) -> String {
    id
}

fn main() {}
