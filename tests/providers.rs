//! Provider tool calls as they arrive (tests/data/providers: responses in
//! the shapes OpenAI, Anthropic and Gemini send), dispatched through the
//! registry, and the replies compared with the golden files in
//! `tests/golden/providers/`. After a deliberate change, rewrite them with
//! `IDEM_BLESS=1 cargo test --test providers` and read the diff.

#[path = "support/shop.rs"]
mod shop;
mod support;

use std::path::PathBuf;

use idem::prelude::*;
use idem::{MalformedCall, ToolReply};
use serde_json::{Value, json};
use shop::{executions, registry};

fn data(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/providers")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn golden(name: &str, replies: &[ToolReply]) {
    let messages = Value::Array(replies.iter().map(|r| r.message.clone()).collect());
    support::golden(&format!("providers/{name}"), &messages);
}

fn charge_id(reply: &ToolReply) -> Option<&Value> {
    reply.outcome.as_ref().ok().map(|v| &v["charge_id"])
}

#[tokio::test]
async fn openai_chat_tool_calls() {
    let registry = registry();
    let response = data("openai_chat");
    let calls = response["choices"][0]["message"]["tool_calls"]
        .as_array()
        .expect("tool_calls");
    let mut replies = Vec::new();
    for call in calls {
        replies.push(
            registry
                .reply(Provider::OpenAiChat, "run-42", call)
                .await
                .expect("well formed"),
        );
    }
    // The repeated charge (new call id, reordered arguments) ran once.
    assert_eq!(executions(&registry), 1);
    assert_eq!(charge_id(&replies[0]), Some(&json!("ch_0001")));
    assert_eq!(replies[1].message["content"], replies[0].message["content"]);
    assert_eq!(replies[1].message["tool_call_id"], "call_9yLr3W2qRnA4bC8d");
    // A missing argument: an error for the model, naming the field.
    assert!(matches!(
        replies[2].outcome,
        Err(ToolError::InvalidArgs { .. })
    ));
    assert!(
        replies[2].message["content"]
            .as_str()
            .is_some_and(|c| c.contains("amount"))
    );
    assert_eq!(replies[3].message["content"], "o-1001: awaiting payment");
    golden("openai_chat", &replies);
}

#[tokio::test]
async fn openai_responses_function_calls() {
    let registry = registry();
    let response = data("openai_responses");
    let mut replies = Vec::new();
    for item in response["output"].as_array().expect("output") {
        replies.push(
            registry
                .reply(Provider::OpenAiResponses, "run-42", item)
                .await
                .expect("well formed"),
        );
    }
    assert_eq!(executions(&registry), 1);
    assert_eq!(replies[0].message["output"], replies[1].message["output"]);
    golden("openai_responses", &replies);
}

#[tokio::test]
async fn anthropic_tool_use_blocks() {
    let registry = registry();
    let response = data("anthropic");
    let mut replies = Vec::new();
    for block in response["content"].as_array().expect("content") {
        if block["type"] == "tool_use" {
            replies.push(
                registry
                    .reply(Provider::Anthropic, "run-42", block)
                    .await
                    .expect("well formed"),
            );
        }
    }
    assert_eq!(executions(&registry), 1);
    assert_eq!(replies[1].message["content"], replies[2].message["content"]);
    assert_eq!(replies[1].message.get("is_error"), None);
    // An unknown tool is an error result the model can read.
    assert!(matches!(
        replies[3].outcome,
        Err(ToolError::UnknownTool { .. })
    ));
    assert_eq!(replies[3].message["is_error"], true);
    assert_eq!(
        replies[3].message["tool_use_id"],
        "toolu_01D39t23tz23ot240168ot2"
    );
    golden("anthropic", &replies);
}

#[tokio::test]
async fn gemini_function_calls() {
    let registry = registry();
    let response = data("gemini");
    let mut replies = Vec::new();
    for part in response["candidates"][0]["content"]["parts"]
        .as_array()
        .expect("parts")
    {
        replies.push(
            registry
                .reply(Provider::Gemini, "run-42", part)
                .await
                .expect("well formed"),
        );
    }
    // `4200.0` is the integer 4200: the same operation, run once.
    assert_eq!(executions(&registry), 1);
    assert_eq!(
        replies[0].message["functionResponse"]["response"],
        replies[1].message["functionResponse"]["response"]
    );
    assert_eq!(replies[1].message["functionResponse"]["id"], "fc-2");
    assert!(replies[2].message["functionResponse"]["response"]["error"].is_string());
    golden("gemini", &replies);
}

#[tokio::test]
async fn calls_without_an_id_or_a_name_are_refused_not_run() {
    let registry = registry();
    let no_id = json!({"type": "function", "function": {"name": "charge_card", "arguments": "{}"}});
    let err = registry
        .reply(Provider::OpenAiChat, "run-42", &no_id)
        .await
        .expect_err("no id");
    assert_eq!(
        err,
        MalformedCall {
            shape: "an OpenAI tool_calls entry",
            problem: "`id` is missing".into()
        }
    );
    let no_name = json!({"type": "tool_use", "id": "toolu_1", "name": 7, "input": {}});
    let err = registry
        .reply(Provider::Anthropic, "run-42", &no_name)
        .await
        .expect_err("no name");
    assert_eq!(
        err.to_string(),
        "not an Anthropic tool_use block: `name` is not a non-empty string"
    );
    let not_a_call = json!({"text": "hello"});
    assert!(
        registry
            .reply(Provider::Gemini, "run-42", &not_a_call)
            .await
            .is_err()
    );
    assert_eq!(executions(&registry), 0);
}

#[tokio::test]
async fn blocks_of_another_type_are_refused_not_run() {
    let registry = registry();
    let args = json!({"order_id": "o-1", "amount": 4200});
    let server_tool = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "charge_card", "input": args});
    let err = registry
        .reply(Provider::Anthropic, "run-42", &server_tool)
        .await
        .expect_err("a server tool's block");
    assert_eq!(
        err.to_string(),
        "not an Anthropic tool_use block: its `type` is \"server_tool_use\", not \"tool_use\""
    );
    let custom = json!({"id": "call_1", "type": "custom", "function": {"name": "charge_card", "arguments": args.to_string()}});
    assert!(
        registry
            .reply(Provider::OpenAiChat, "run-42", &custom)
            .await
            .is_err()
    );
    let output = json!({"type": "function_call_output", "call_id": "c1", "name": "charge_card", "arguments": args.to_string()});
    assert!(
        registry
            .reply(Provider::OpenAiResponses, "run-42", &output)
            .await
            .is_err()
    );
    assert_eq!(executions(&registry), 0);
}

#[cfg(feature = "async-openai")]
#[tokio::test]
async fn async_openai_typed_calls_run_once_and_get_typed_tool_messages() {
    use idem::async_openai::async_openai::types::chat::{
        ChatCompletionMessageToolCalls, ChatCompletionRequestToolMessageContent,
    };
    let registry = registry();
    let typed = |id: &str, kind: &str| -> ChatCompletionMessageToolCalls {
        let call = json!({
            "id": id,
            "type": kind,
            "function": {"name": "charge_card", "arguments": r#"{"order_id": "o-1", "amount": 4200}"#},
            "custom_tool": {"name": "charge_card", "input": "o-1"},
        });
        serde_json::from_value(call).expect("an async-openai tool call")
    };
    let first = registry
        .async_openai_tool_call("run-42", &typed("call_1", "function"))
        .await
        .expect("a function call");
    // The model asks again under a new id: replayed, answered under it.
    let again = registry
        .async_openai_tool_call("run-42", &typed("call_2", "function"))
        .await
        .expect("a function call");
    assert_eq!(executions(&registry), 1);
    assert_eq!(first.message.tool_call_id, "call_1");
    assert_eq!(again.message.tool_call_id, "call_2");
    let text = |content: &ChatCompletionRequestToolMessageContent| match content {
        ChatCompletionRequestToolMessageContent::Text(text) => text.clone(),
        other => panic!("expected text, got {other:?}"),
    };
    assert_eq!(text(&first.message.content), text(&again.message.content));
    assert!(text(&first.message.content).contains("ch_0001"));
    // A custom tool call is not a function call: refused, not run.
    assert!(
        registry
            .async_openai_tool_call("run-42", &typed("call_3", "custom"))
            .await
            .is_err()
    );
    assert_eq!(executions(&registry), 1);
}

/// MCP's `tools/call` params are answered with the `CallToolResult` the
/// MCP SDK's own constructors make: the result as text and as structured
/// content, a tool's error as text flagged `isError`; and the MCP server
/// answers the same.
#[cfg(feature = "mcp")]
#[tokio::test]
async fn mcp_calls_are_answered_with_the_sdks_tool_results() {
    use idem::mcp::rmcp::model::{CallToolResult, ContentBlock};
    let registry = registry();
    let server = shop::registry().into_mcp_server();
    let receipt = json!({"charge_id": "ch_0001", "order_id": "o-1", "amount": 4200});
    let mut charged = CallToolResult::success(vec![ContentBlock::text(receipt.to_string())]);
    charged.structured_content = Some(receipt);
    let missing =
        "Error: invalid arguments: missing field `amount`. Fix the arguments and call again.";
    let cases = [
        (
            json!({"name": "charge_card", "arguments": {"order_id": "o-1", "amount": 4200}}),
            charged,
        ),
        (
            json!({"name": "charge_card", "arguments": {"order_id": "o-1"}}),
            CallToolResult::error(vec![ContentBlock::text(missing)]),
        ),
        (
            json!({"name": "lookup_order", "arguments": {"order_id": "o-1001"}}),
            CallToolResult::success(vec![ContentBlock::text("o-1001: awaiting payment")]),
        ),
    ];
    for (call, expected) in cases {
        let expected = serde_json::to_value(expected).expect("JSON");
        let reply = registry
            .reply(Provider::Mcp, "run-42", &call)
            .await
            .expect("well formed");
        assert_eq!(reply.message, expected, "{call}");
        let name = call["name"].as_str().expect("a name");
        let served = server
            .call(name, call["arguments"].as_object().cloned(), Some("run-42"))
            .await
            .expect("a tool result");
        assert_eq!(
            serde_json::to_value(served).expect("JSON"),
            expected,
            "{call}"
        );
    }
    assert_eq!(executions(&registry), 1);
}
