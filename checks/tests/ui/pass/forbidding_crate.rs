//! The generated code carries no `allow` a `#![forbid(..)]` would refuse,
//! and a tool defined but never registered is not dead code.
#![forbid(dead_code, unsafe_code)]
#![deny(warnings)]

use idem::prelude::*;

/// Charge a card.
#[write_tool]
async fn charge(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

/// Look a customer up; defined, never registered.
#[read_tool]
async fn find_customer(id: String) -> Result<String, String> {
    Ok(id)
}

fn main() {
    let registry = Registry::builder(()).tool(charge).build();
    assert!(registry.is_ok());
}
