//! Signatures people write: a lifetime named on the context, with and
//! without a state type, and an optional plain struct as a flat parameter
//! (no `Default` needed).
use idem::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};

struct App {
    runs: AtomicU32,
}

/// Queue a mail.
#[write_tool]
async fn enqueue<'a>(to: String, ctx: &'a WriteCtx<App>) -> Result<String, String> {
    let runs = ctx.state().runs.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("{to} queued, run {runs}"))
}

/// Note something, in any application.
#[write_tool]
async fn note<'a>(text: String, ctx: &'a WriteCtx) -> Result<String, String> {
    Ok(format!("{text} under {}", ctx.idem_key().as_str().len()))
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Payment {
    amount: u64,
    currency: String,
}

/// Pay, or record that nothing was to pay.
#[write_tool]
async fn pay(payment: Option<Payment>, ctx: &WriteCtx<App>) -> Result<String, String> {
    let runs = ctx.state().runs.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(match payment {
        Some(p) => format!("paid {} {}, run {runs}", p.amount, p.currency),
        None => format!("nothing to pay, run {runs}"),
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::builder(App { runs: AtomicU32::new(0) })
        .tool(enqueue)
        .tool(note)
        .tool(pay)
        .build()
        .expect("a registry");
    let mail = serde_json::json!({"to": "ada@example.com"});
    let first = registry.call("r", "enqueue", mail.clone()).await.expect("runs");
    let again = registry.call("r", "enqueue", mail).await.expect("replays");
    assert_eq!(first, serde_json::json!("ada@example.com queued, run 1"));
    assert_eq!(again, first);
    let noted = registry
        .call("r", "note", serde_json::json!({"text": "hi"}))
        .await
        .expect("runs");
    assert!(noted.as_str().expect("a string").starts_with("hi under "));

    let payment = serde_json::json!({"payment": {"amount": 5, "currency": "eur"}});
    let paid = registry.call("r", "pay", payment.clone()).await.expect("runs");
    assert_eq!(paid, serde_json::json!("paid 5 eur, run 2"));
    assert_eq!(registry.call("r", "pay", payment).await.expect("replays"), paid);
    let nothing = registry.call("r", "pay", serde_json::json!({})).await;
    assert_eq!(nothing.expect("runs"), serde_json::json!("nothing to pay, run 3"));
    assert_eq!(registry.state().runs.load(Ordering::SeqCst), 3);
}
