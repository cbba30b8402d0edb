//! A deliberate repeat (docs/gateway.md, "A repeat on purpose"): a long
//! session that creates a file, deletes it and creates it again means the
//! third call, yet it is the first's duplicate. Every write tool the
//! gateway lists takes one more optional argument, [`REPEAT`]: left out
//! (or 1), the call is the operation its other arguments make, and a
//! retry, a resumed run or a re-sent turn, which send the same arguments,
//! is caught as ever; `2`, `3`, .. make the second, third, .. operation of
//! those arguments, which runs. The model learns which happened from the
//! replay's note: when the first call was done, and the number to give to
//! do it again. The argument is keyed, never sent upstream.

use std::time::Duration;

use serde_json::{Map, Value, json};

/// The argument that asks for a deliberate repeat.
pub(crate) const REPEAT: &str = "idem_repeat";

/// How the argument is described to the model.
const DESCRIPTION: &str = "Leave this out. Give 2 (then 3, ..) only when the user asks for this \
                           exact operation to be done again after it was done: a call with the \
                           same arguments is otherwise answered with the first call's result, \
                           without doing it again.";

/// Whether a write tool (as the upstream lists it) can take [`REPEAT`]: its
/// input has no member of that name.
pub(crate) fn offered(tool: &Value) -> bool {
    tool.pointer("/inputSchema/properties")
        .and_then(Value::as_object)
        .is_none_or(|properties| !properties.contains_key(REPEAT))
}

/// `input_schema` with [`REPEAT`] among its properties.
pub(crate) fn with_argument(mut input_schema: Value) -> Value {
    if let Some(schema) = input_schema.as_object_mut() {
        let properties = schema
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(properties) = properties.as_object_mut() {
            let argument = json!({"type": "integer", "minimum": 2, "description": DESCRIPTION});
            properties.insert(REPEAT.into(), argument);
        }
    }
    input_schema
}

/// Takes [`REPEAT`] out of the client's request `message` (it never goes
/// upstream), and leaves in `args` (what the operation is keyed on) only a
/// repeat: a 1 is the first operation, keyed as a call without it. The
/// repeat's number, or why it is not one.
pub(crate) fn take(message: &mut Value, args: &mut Value) -> Result<u64, String> {
    if let Some(arguments) = message
        .pointer_mut("/params/arguments")
        .and_then(Value::as_object_mut)
    {
        arguments.remove(REPEAT);
    }
    let Some(given) = args.as_object_mut().and_then(|a| a.remove(REPEAT)) else {
        return Ok(1);
    };
    let number = match &given {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        Value::Null => Some(1),
        _ => None,
    };
    match number {
        Some(0) | None => Err(format!(
            "`{REPEAT}` is {given}: leave it out, or give 2, 3, .. to do the operation again on \
             purpose"
        )),
        Some(1) => Ok(1),
        Some(n) => {
            if let Some(args) = args.as_object_mut() {
                args.insert(REPEAT.into(), n.into());
            }
            Ok(n)
        }
    }
}

/// What a replay of repeat `number` tells the model: when the operation
/// was done (`age` ago, if known), that it was not done again, and how to
/// do it again on purpose, where the tool takes [`REPEAT`].
pub(crate) fn note(age: Option<Duration>, number: u64, offered: bool) -> String {
    let when = match age {
        Some(age) => format!(" {} ago", ago(age)),
        None => String::new(),
    };
    let mut note = format!(
        "(This is the recorded result of an identical earlier call, done{when}: the operation \
         was not done again."
    );
    if offered {
        note.push_str(&format!(
            " If the user asked for it to be done again, call again with the same arguments and \
             \"{REPEAT}\": {}.",
            number + 1
        ));
    }
    note.push(')');
    note
}

/// `age` as a person says it: seconds, minutes, hours or days.
fn ago(age: Duration) -> String {
    let secs = age.as_secs();
    let (n, unit) = match secs {
        0..60 => (secs, "second"),
        60..3600 => (secs / 60, "minute"),
        3600..86_400 => (secs / 3600, "hour"),
        _ => (secs / 86_400, "day"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_keyed_and_never_sent_upstream() {
        let mut message = json!({"params": {"arguments": {"path": "a", "idem_repeat": 2}}});
        let mut args = json!({"path": "a", "idem_repeat": "2"});
        assert_eq!(take(&mut message, &mut args), Ok(2));
        assert_eq!(message["params"]["arguments"], json!({"path": "a"}));
        assert_eq!(args, json!({"path": "a", "idem_repeat": 2}));
        // 1 is the first operation, as if left out.
        let mut first = json!({"path": "a", "idem_repeat": 1});
        assert_eq!(take(&mut json!({}), &mut first), Ok(1));
        assert_eq!(first, json!({"path": "a"}));
        for wrong in [json!(0), json!(-1), json!("twice"), json!(2.5)] {
            let mut args = json!({"idem_repeat": wrong});
            let said = take(&mut json!({}), &mut args).expect_err("refused");
            assert!(said.contains("give 2, 3"), "{said}");
        }
    }

    #[test]
    fn the_note_says_when_and_how_to_repeat() {
        let note = note(Some(Duration::from_secs(180)), 1, true);
        assert!(note.contains("done 3 minutes ago:"), "{note}");
        assert!(note.contains("\"idem_repeat\": 2"), "{note}");
        let plain = super::note(None, 2, false);
        assert!(!plain.contains("idem_repeat"), "{plain}");
        assert_eq!(ago(Duration::from_secs(1)), "1 second");
        assert_eq!(ago(Duration::from_secs(7200)), "2 hours");
    }
}
