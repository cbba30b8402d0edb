//! A deprecated tool in a crate that denies warnings warns only where it is
//! registered, and `destructive` / `open_world` work as flags.
#![deny(warnings)]

use idem::prelude::*;

/// The old way to charge.
#[deprecated(note = "use charge_card")]
#[write_tool(destructive, open_world)]
async fn old_charge(amount: u64, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(amount)
}

fn main() {
    #[allow(deprecated)]
    let builder = Registry::builder(()).tool(old_charge);
    let registry = builder.build().expect("a registry");
    let def = &registry.definitions()[0];
    assert!(def.destructive && def.open_world);
}
