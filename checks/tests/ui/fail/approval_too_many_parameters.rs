use idem::prelude::*;

fn never(_args: &u8) -> bool {
    false
}

/// Record a reading of sixteen sensors: too many parameters for a function
/// that decides approval.
#[write_tool(approval = never)]
async fn record(p0: u8, p1: u8, p2: u8, p3: u8, p4: u8, p5: u8, p6: u8, p7: u8, p8: u8, p9: u8, p10: u8, p11: u8, p12: u8, p13: u8, p14: u8, p15: u8, ctx: &WriteCtx) -> Result<(), String> {
    let _ = (p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, ctx);
    Ok(())
}

fn main() {}
