//! serde and schemars attributes on flat parameters act as on a struct's
//! fields, and a parameter compiled out by `#[cfg]` is not an argument.
use idem::prelude::*;
use serde_json::json;

fn ten() -> u32 {
    10
}

/// An id the model sends as a string.
mod as_text {
    use idem::prelude::{Deserialize, Serialize};

    pub fn serialize<S: idem::__private::serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        v.to_string().serialize(s)
    }

    pub fn deserialize<'de, D: idem::__private::serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(idem::__private::serde::de::Error::custom)
    }
}

/// Look orders up.
#[write_tool]
async fn find_orders(
    /// How many at most.
    #[serde(default = "ten")]
    limit: u32,
    /// The customer.
    #[serde(with = "as_text")]
    #[schemars(with = "String")]
    customer: u64,
    /// Which page.
    #[serde(default)]
    page: Option<u32>,
    #[cfg(any())] never_compiled: u32,
    ctx: &WriteCtx,
) -> Result<String, String> {
    let _ = ctx;
    Ok(format!("{customer}: {limit} from page {page:?}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::builder(())
        .tool(find_orders)
        .build()
        .expect("a registry");
    let schema = &registry.definitions()[0].input_schema;
    assert_eq!(schema["properties"]["customer"]["type"], json!("string"));
    assert!(schema["properties"].get("never_compiled").is_none());
    assert_eq!(schema["required"], json!(["customer"]));
    let found = registry
        .call("r", "find_orders", json!({"customer": "42"}))
        .await
        .expect("a call");
    assert_eq!(found, json!("42: 10 from page None"));
}
