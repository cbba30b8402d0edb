use idem::prelude::*;

#[read_tool]
async fn find_customer(id: String) -> Result<String, String> {
    Ok(id)
}

fn main() {}
