use idem::prelude::*;

/// Look a customer up.
#[read_tool]
async fn find_the_customer_by_id_in_the_crm_and_return_every_field_we_have(
    id: String,
) -> Result<String, String> {
    Ok(id)
}

fn main() {}
