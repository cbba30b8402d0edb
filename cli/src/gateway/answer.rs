//! What a write is answered: a recorded result as a `tools/call` result
//! (as the upstream gave it, or a value an operator recorded, shaped as an
//! SDK would give it), marked when replayed, and idem's own errors as
//! results the model reads.

use serde_json::{Value, json};

use idem::mcp::REPLAYED_META;
use idem::{CallContext, Registry};

use super::jsonrpc;
use super::repeat;

/// The `_meta` member of a replayed result naming the `idem_repeat` that
/// would do its operation again on purpose.
const REPEAT_META: &str = "idem/repeat_with";

/// A recorded result as a `tools/call` result: as the upstream gave it
/// (content, or the task a call as a task was given), or, for a result an
/// operator recorded in another shape (`idem resolve --done '"moved 7"'`,
/// which fits it to the tool's output schema: `{"result": "moved 7"}` for
/// the Python SDK's), that value as `structuredContent` when an object,
/// and as a text block as an SDK writes one beside it, so that a
/// duplicate is never answered what MCP cannot read.
pub(super) fn tool_result(recorded: Value) -> Value {
    let readable = recorded
        .as_object()
        .is_some_and(|r| r.get("content").is_some_and(Value::is_array) || r.contains_key("task"));
    if readable {
        return recorded;
    }
    let text = text_of(&recorded);
    let mut result = json!({"content": [{"type": "text", "text": text}]});
    if recorded.is_object() {
        result["structuredContent"] = recorded;
    }
    result
}

/// The text an SDK writes beside a structured result: a string as it is,
/// a value wrapped in `{"result": ..}` as the value's, anything else as
/// indented JSON.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Object(members) if members.len() == 1 && members.contains_key("result") => {
            text_of(&members["result"])
        }
        Value::Object(_) | Value::Array(_) => {
            serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
        }
        other => other.to_string(),
    }
}

/// What a replayed result says besides the recorded one.
pub(super) struct Replay {
    /// The `idem_repeat` that would do the operation again on purpose,
    /// where the tool takes one.
    pub(super) next: Option<u64>,
    /// What `--note-replays` ends the content with.
    pub(super) note: Option<String>,
}

impl Replay {
    /// What a replay of repeat `repeat` of `call` (its context and tool)
    /// on `registry` says: the number that repeats it on purpose, where
    /// the tool takes one (`offered`), and, with `--note-replays` (which
    /// keeps the call's arguments, `noted`), the note the model reads
    /// (when the operation was done: its record's age, read for it).
    pub(super) async fn of(
        registry: &Registry<()>,
        (context, tool): (CallContext<'_>, &str),
        noted: Option<Value>,
        repeat: u64,
        offered: bool,
    ) -> Replay {
        let next = offered.then_some(repeat + 1);
        let Some(args) = noted else {
            return Replay { next, note: None };
        };
        let age = match registry.identify(context, tool, args) {
            Ok(Some((key, _))) => match registry.store().inspect(&key).await {
                Ok(Some(record)) => record.age,
                _ => None,
            },
            _ => None,
        };
        Replay {
            next,
            note: Some(repeat::note(age, repeat, offered)),
        }
    }
}

/// Marks a replayed `result` in its `_meta` (with the number that repeats
/// it on purpose), and ends its content with `replay`'s note.
pub(super) fn mark_replayed(result: &mut Value, replay: Replay) {
    let Some(object) = result.as_object_mut() else {
        return;
    };
    let meta = object.entry("_meta").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(REPLAYED_META.into(), true.into());
        if let Some(next) = replay.next {
            meta.insert(REPEAT_META.into(), next.into());
        }
    }
    if let (Some(note), Some(content)) = (
        replay.note,
        object.get_mut("content").and_then(Value::as_array_mut),
    ) {
        content.push(json!({"type": "text", "text": note}));
    }
}

/// The response to request `id` with an error result reading `text`.
pub(super) fn error_result(id: Value, text: &str) -> Value {
    jsonrpc::response(
        id,
        json!({"content": [{"type": "text", "text": text}], "isError": true}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_recorded_in_another_shape_is_answered_as_text() {
        let upstream = json!({"content": [{"type": "text", "text": "ok"}], "isError": false});
        assert_eq!(tool_result(upstream.clone()), upstream);
        let task = json!({"task": {"taskId": "t", "status": "working"}});
        assert_eq!(tool_result(task.clone()), task);
        assert_eq!(
            tool_result(json!("moved 7")),
            json!({"content": [{"type": "text", "text": "moved 7"}]})
        );
        // As an SDK writes the text beside a structured result: indented
        // JSON, or a wrapped value's own text.
        assert_eq!(
            tool_result(json!({"moved": 7})),
            json!({"content": [{"type": "text", "text": "{\n  \"moved\": 7\n}"}],
                   "structuredContent": {"moved": 7}})
        );
        assert_eq!(
            tool_result(json!({"result": 7})),
            json!({"content": [{"type": "text", "text": "7"}],
                   "structuredContent": {"result": 7}})
        );
    }
}
