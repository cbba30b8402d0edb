use idem::prelude::*;

struct Crm;

impl Crm {
    /// Look a customer up.
    #[read_tool]
    async fn find_customer(&self, id: String) -> Result<String, String> {
        Ok(id)
    }
}

fn main() {}
