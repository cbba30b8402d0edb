//! A rig agent whose tools are an idem registry. The model is scripted
//! (rig-core's `MockCompletionModel`, so no network and no API key): it
//! charges an order, then charges it again under a new tool-call id, as a
//! model does when the first result looked unconvincing. The agent run is
//! then retried whole, as after a provider timeout. One charge is made.
//!
//! ```text
//! cargo run -p idem-integrations --example rig_agent
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use idem::prelude::*;
use idem::rig::run_context;
use rig_agent::agent::AgentBuilder;
use rig_core::message::Message;
use rig_core::test_utils::{MockCompletionModel, MockTurn};
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A stand-in for a payment provider.
#[derive(Default)]
struct Shop {
    charges: AtomicU64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ChargeArgs {
    /// The order to charge for.
    order_id: String,
    /// Amount in cents.
    amount: u64,
}

/// Charge the customer's card for an order.
#[write_tool]
async fn charge_card(#[args] a: ChargeArgs, ctx: &WriteCtx<Shop>) -> Result<Value, String> {
    let n = ctx.state().charges.fetch_add(1, Ordering::SeqCst) + 1;
    println!(
        "   provider: charged {} for order {} (ch_{n:04})",
        a.amount, a.order_id
    );
    Ok(json!({
        "charge_id": format!("ch_{n:04}"),
        "order_id": a.order_id,
        "idempotency_key": ctx.idem_key().as_str(),
    }))
}

fn scripted_model() -> MockCompletionModel {
    MockCompletionModel::from_turns([
        MockTurn::tool_call(
            "call_1",
            "charge_card",
            json!({"order_id": "o-1", "amount": 4200}),
        ),
        MockTurn::tool_call(
            "call_2",
            "charge_card",
            json!({"amount": 4200, "order_id": "o-1"}),
        ),
        MockTurn::text("The order is paid."),
    ])
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let registry = Registry::builder(Shop::default())
        .tool(charge_card)
        .build()?;
    for attempt in ["first run", "the same run retried after a timeout"] {
        println!("── {attempt} (run id run-42)");
        let agent = AgentBuilder::new(scripted_model())
            .dynamic_tools(registry.rig_tools()?)
            .build();
        let response = agent
            .prompt(Message::user("Charge order o-1 for 42 EUR."))
            .tool_context(run_context("run-42")?)
            .max_turns(5)
            .run()
            .await?;
        for message in &response.messages {
            let text = serde_json::to_string(message)?;
            if text.contains("charge_id") {
                println!("   tool result → {}", excerpt(&text));
            }
        }
    }
    let charges = registry.state().charges.load(Ordering::SeqCst);
    println!("── charges made: {charges} (four charge_card calls in all)");
    if charges != 1 {
        return Err(format!("expected one charge, the provider made {charges}").into());
    }
    Ok(())
}

/// The charge id out of a serialized tool-result message.
fn excerpt(text: &str) -> &str {
    text.find("ch_")
        .map_or(text, |i| &text[i..(i + 7).min(text.len())])
}
