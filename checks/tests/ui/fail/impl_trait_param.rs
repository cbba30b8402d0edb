use idem::prelude::*;

/// Search the catalogue.
#[read_tool]
async fn search(query: impl Into<String>) -> Result<String, String> {
    Ok(query.into())
}

fn main() {}
