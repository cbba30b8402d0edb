//! A rig agent (rig-agent 0.44) whose model is scripted (rig-core's
//! `MockCompletionModel`: no network) calls the registry's tools through
//! `Registry::rig_tools`.

#[path = "../../tests/support/shop.rs"]
mod shop;

use idem::prelude::*;
use idem::rig::{run_context, run_context_as};
use rig_agent::agent::AgentBuilder;
use rig_core::message::Message;
use rig_core::test_utils::{MockCompletionModel, MockTurn};
use rig_core::tool::ToolContext;
use serde_json::json;
use shop::{Shop, builder, executions, registry};

/// A model that charges order o-1, charges it again under a new call id
/// (arguments reordered, as a model repeats itself), then answers.
fn model() -> MockCompletionModel {
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

/// Runs the scripted agent once with `context`; the run's transcript as
/// JSON text.
async fn run(registry: &Registry<Shop>, context: ToolContext) -> String {
    let agent = AgentBuilder::new(model())
        .dynamic_tools(registry.rig_tools().expect("rig tools"))
        .build();
    let response = agent
        .prompt(Message::user("Charge order o-1 for 42 EUR."))
        .tool_context(context)
        .max_turns(5)
        .run()
        .await
        .expect("agent run");
    serde_json::to_string(&response.messages).expect("transcript")
}

#[tokio::test]
async fn a_rig_agent_repeating_a_write_runs_it_once() {
    let registry = registry();
    let definitions = registry.rig_tools().expect("rig tools");
    let names: Vec<String> = definitions
        .iter()
        .map(|t| t.definition().name.to_string())
        .collect();
    assert_eq!(names, ["charge_card", "lookup_order"]);
    assert_eq!(
        definitions[0].definition().parameters["required"],
        json!(["order_id", "amount"])
    );

    // The model calls charge_card twice: one execution, both tool results
    // carry the first charge.
    let transcript = run(&registry, run_context("run-1").expect("context")).await;
    assert_eq!(executions(&registry), 1);
    assert_eq!(transcript.matches("ch_0001").count(), 2, "{transcript}");

    // Our own retry of the whole run (a provider timeout, a resumed
    // checkpoint) under the same run id: replayed, not charged again.
    let transcript = run(&registry, run_context("run-1").expect("context")).await;
    assert_eq!(executions(&registry), 1);
    assert_eq!(transcript.matches("ch_0001").count(), 2, "{transcript}");

    // Another run is another operation.
    let transcript = run(&registry, run_context("run-2").expect("context")).await;
    assert_eq!(executions(&registry), 2);
    assert!(transcript.contains("ch_0002"), "{transcript}");
}

#[tokio::test]
async fn without_a_run_id_writes_do_not_run_and_the_model_reads_a_neutral_note() {
    let registry = registry();
    let transcript = run(&registry, ToolContext::new()).await;
    assert_eq!(executions(&registry), 0);
    assert!(
        transcript.contains("not available right now"),
        "{transcript}"
    );
    // The fix is for the developer (in the logs and the error), not the model.
    assert!(!transcript.contains("tool_context"), "{transcript}");
}

#[tokio::test]
async fn read_tools_need_no_run_and_tools_can_be_picked() {
    let registry = registry();
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("call_1", "lookup_order", json!({"order_id": "o-7"})),
        MockTurn::text("It awaits payment."),
    ]);
    let lookup = registry
        .rig_tool("lookup_order")
        .expect("a registered tool");
    let agent = AgentBuilder::new(model).dynamic_tools(vec![lookup]).build();
    let response = agent
        .prompt(Message::user("Where is order o-7?"))
        .max_turns(3)
        .run()
        .await
        .expect("agent run");
    let transcript = serde_json::to_string(&response.messages).expect("transcript");
    assert!(transcript.contains("o-7: awaiting payment"), "{transcript}");
    assert!(matches!(
        registry.rig_tool("refund"),
        Err(idem::rig::RigToolError::UnknownTool(name)) if name == "refund"
    ));
}

#[tokio::test]
async fn tenants_in_the_agent_context_never_share_a_record() {
    let registry = builder().require_tenant().build().expect("registry");
    // A run that names no tenant: refused, nothing runs.
    let transcript = run(&registry, run_context("run-1").expect("context")).await;
    assert_eq!(executions(&registry), 0);
    assert!(transcript.contains("tenant"), "{transcript}");
    // Two tenants, the same run id: one charge each, neither sees the
    // other's; each tenant's retry of its run is replayed.
    let alice = run_context_as("alice", "run-1").expect("context");
    let bob = run_context_as("bob", "run-1").expect("context");
    let transcript = run(&registry, alice.clone()).await;
    assert_eq!(transcript.matches("ch_0001").count(), 2, "{transcript}");
    let transcript = run(&registry, bob).await;
    assert_eq!(executions(&registry), 2);
    assert_eq!(transcript.matches("ch_0002").count(), 2, "{transcript}");
    let transcript = run(&registry, alice).await;
    assert_eq!(executions(&registry), 2);
    assert_eq!(transcript.matches("ch_0001").count(), 2, "{transcript}");
}
