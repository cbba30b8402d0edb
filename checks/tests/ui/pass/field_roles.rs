//! Field roles as users write them: on flat parameters (raw and renamed
//! ones included), on an `#[args]` struct's fields by path, and beside the
//! other keys; a duplicate that differs only in an ignored field replays.
use std::sync::atomic::{AtomicU32, Ordering};

use idem::prelude::*;
use idem::IdemStore;
use serde_json::json;

/// Charge a customer.
#[write_tool(check = [r#type], ignore = [reason], hide = [customer], scope = "global", version = 2)]
async fn charge(
    customer: String,
    r#type: String,
    #[serde(rename = "why")] reason: String,
    ctx: &WriteCtx<AtomicU32>,
) -> Result<u32, String> {
    let _ = (customer, r#type, reason);
    Ok(ctx.state().fetch_add(1, Ordering::SeqCst) + 1)
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Ticket {
    title: String,
    meta: Meta,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Meta {
    team: String,
    trace: String,
}

/// Open a ticket.
#[write_tool(key = [title, meta.team], ignore = [meta.trace])]
async fn open(#[args] ticket: Ticket, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
    let _ = ticket;
    Ok(ctx.state().fetch_add(1, Ordering::SeqCst) + 1)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::builder(AtomicU32::new(0))
        .tool(charge)
        .tool(open)
        .build()
        .expect("a registry");
    for why in ["order 42", "payment for order 42"] {
        let args = json!({"customer": "c", "type": "card", "why": why});
        assert_eq!(registry.call("r", "charge", args).await.expect("charge"), json!(1));
    }
    // The record shows its arguments to operators, but a hidden field.
    let args = json!({"customer": "c", "type": "card", "why": "x"});
    let (key, _) = registry.identify("r", "charge", args).expect("valid").expect("a write");
    let record = registry.store().inspect(&key).await.expect("inspect").expect("a record");
    let about = record.about.expect("what it is about");
    assert!(about.contains(r#""customer":"(hidden)""#), "{about}");
    assert!(about.contains(r#""type":"card""#), "{about}");
    for trace in ["t-1", "t-2"] {
        let args = json!({"title": "down", "meta": {"team": "ops", "trace": trace}});
        assert_eq!(registry.call("r", "open", args).await.expect("open"), json!(2));
    }
}
