//! The context under another name, and a tool generic over any state that
//! meets a bound.
use idem::prelude::*;

trait HasPrefix {
    fn prefix(&self) -> &str;
}

struct App;

impl HasPrefix for App {
    fn prefix(&self) -> &str {
        "app-"
    }
}

type AppCtx = WriteCtx<App>;

/// Charge a card.
#[write_tool]
async fn charge(amount: u64, ctx: &AppCtx) -> Result<String, String> {
    Ok(format!("{}{amount}", ctx.state().prefix()))
}

/// Refund a card, in any application with a prefix.
#[write_tool]
async fn refund<S: HasPrefix>(amount: u64, ctx: &WriteCtx<S>) -> Result<String, String> {
    Ok(format!("{}refund-{amount}", ctx.state().prefix()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::builder(App)
        .tool(charge)
        .tool(refund)
        .build()
        .expect("a registry");
    let charged = registry
        .call("r", "charge", serde_json::json!({"amount": 5}))
        .await;
    assert_eq!(charged.expect("charge"), serde_json::json!("app-5"));
    let refunded = registry
        .call("r", "refund", serde_json::json!({"amount": 5}))
        .await;
    assert_eq!(refunded.expect("refund"), serde_json::json!("app-refund-5"));
}
