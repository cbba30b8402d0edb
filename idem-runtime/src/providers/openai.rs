//! OpenAI's formats, Chat Completions' and the Responses API's: the tools,
//! plain and strict (structured outputs: the strict form closes every
//! object and makes every property required, or says which field it cannot
//! express), a call as each sends it, and the message answering it.

use serde_json::{Map, Value, json};

use super::call::{Call, MalformedCall, kind, outcome_text, string};
use super::walk::{RenderError, join, type_includes};
use crate::error::ToolError;
use crate::tool::ToolDef;

/// A Chat Completions `tool_calls` entry; its arguments arrive as JSON
/// text, as OpenAI sends them.
pub(super) fn read_chat<'a>(
    call: &'a Value,
    shape: &'static str,
) -> Result<(Call<'a>, Value), MalformedCall> {
    kind(call, "function", shape)?;
    let id = string(call, &["id"], shape)?;
    let name = string(call, &["function", "name"], shape)?;
    let args = call
        .pointer("/function/arguments")
        .cloned()
        .unwrap_or(Value::Null);
    Ok((
        Call {
            raw: call,
            id: Some(id),
            name,
        },
        args,
    ))
}

/// The `role: "tool"` message answering a Chat Completions call.
pub(super) fn answer_chat(call: &Call<'_>, outcome: &Result<Value, ToolError>) -> Value {
    let (content, _) = outcome_text(outcome);
    json!({ "role": "tool", "tool_call_id": call.id, "content": content })
}

/// A Responses API `function_call` output item.
pub(super) fn read_responses<'a>(
    item: &'a Value,
    shape: &'static str,
) -> Result<(Call<'a>, Value), MalformedCall> {
    kind(item, "function_call", shape)?;
    let call_id = string(item, &["call_id"], shape)?;
    let name = string(item, &["name"], shape)?;
    let args = item.get("arguments").cloned().unwrap_or(Value::Null);
    Ok((
        Call {
            raw: item,
            id: Some(call_id),
            name,
        },
        args,
    ))
}

/// The `function_call_output` input item answering a Responses API call.
pub(super) fn answer_responses(call: &Call<'_>, outcome: &Result<Value, ToolError>) -> Value {
    let (output, _) = outcome_text(outcome);
    json!({ "type": "function_call_output", "call_id": call.id, "output": output })
}

impl ToolDef {
    /// OpenAI Chat Completions: `{"type": "function", "function": {name,
    /// description, parameters}}`.
    pub(super) fn openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            }
        })
    }

    /// OpenAI with `"strict": true`: every object closed
    /// (`additionalProperties: false`) and every property required, the
    /// optional ones made nullable; `oneOf` becomes `anyOf` and keywords
    /// strict mode rejects are dropped. Fails, naming the field, where strict
    /// mode cannot express the schema: a map with free-form keys, a value of
    /// any type, `allOf`.
    pub(super) fn openai_strict(&self) -> Result<Value, RenderError> {
        Ok(json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.strict_parameters()?,
                "strict": true,
            }
        }))
    }

    /// The OpenAI Responses API: `{"type": "function", name, description,
    /// parameters, "strict": false}` (the API's default is strict, which
    /// the plain schema may not meet; see
    /// [`openai_responses_strict`](Self::openai_responses_strict)).
    pub(super) fn openai_responses(&self) -> Value {
        json!({
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.input_schema,
            "strict": false,
        })
    }

    /// The OpenAI Responses API with `"strict": true`: the parameters as
    /// [`openai_strict`](Self::openai_strict) makes them, or why they
    /// cannot be.
    pub(super) fn openai_responses_strict(&self) -> Result<Value, RenderError> {
        Ok(json!({
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": self.strict_parameters()?,
            "strict": true,
        }))
    }

    /// The input schema made strict, its `$defs` too.
    fn strict_parameters(&self) -> Result<Value, RenderError> {
        let mut parameters = self.input_schema.clone();
        let refused = |why| RenderError::new("OpenAI strict mode", &self.name, why);
        strict(&mut parameters, ".").map_err(refused)?;
        if let Some(Value::Object(defs)) = parameters.get_mut("$defs") {
            for (name, def) in defs.iter_mut() {
                strict(def, &format!("$defs.{name}")).map_err(refused)?;
            }
        }
        Ok(parameters)
    }
}

/// The keywords OpenAI strict mode accepts ("Supported schemas",
/// <https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>):
/// every other keyword (`default`, `uniqueItems`, `minLength`, ...) is
/// dropped, which only widens what the schema allows; the tool's own
/// deserialization still checks the arguments.
const STRICT_KEPT: &[&str] = &[
    "type",
    "description",
    "title",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "$ref",
    "$defs",
    "enum",
    "const",
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
    // Turned into `anyOf` or refused below.
    "oneOf",
    "allOf",
    "prefixItems",
];

/// String formats strict mode understands; others are dropped.
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

type StrictError = (String, String);

/// Makes `schema` (at `path`) strict, or says why it cannot be.
fn strict(schema: &mut Value, path: &str) -> Result<(), StrictError> {
    let fail = |reason: &str| Err((path.to_owned(), reason.to_owned()));
    let Value::Object(map) = schema else {
        return match schema {
            Value::Bool(true) => {
                fail("it accepts any JSON value; strict mode needs a definite type")
            }
            _ => fail("it accepts no value at all"),
        };
    };
    map.retain(|key, _| STRICT_KEPT.contains(&key.as_str()));
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !STRICT_FORMATS.contains(&f))
    {
        map.remove("format");
    }
    if map.contains_key("allOf") {
        return fail("`allOf` is not supported in strict mode; avoid `#[serde(flatten)]` here");
    }
    if map.contains_key("prefixItems") {
        return fail(
            "it is a tuple (`prefixItems`), which strict mode cannot express; use a struct",
        );
    }
    if let Some(one_of) = map.remove("oneOf") {
        map.insert("anyOf".into(), one_of);
    }
    let definite = ["type", "$ref", "anyOf", "enum", "const"]
        .iter()
        .any(|k| map.contains_key(*k));
    if !definite {
        return fail(
            "it accepts any JSON value (a `serde_json::Value`?); strict mode needs a definite type",
        );
    }
    if let Some(Value::Array(variants)) = map.get_mut("anyOf") {
        for (i, v) in variants.iter_mut().enumerate() {
            strict(v, &format!("{path}<variant {i}>"))?;
        }
    }
    if let Some(items) = map.get_mut("items") {
        strict(items, &join(path, "[]"))?;
    }
    let is_object = map.get("type").is_some_and(|t| type_includes(t, "object"))
        || map.contains_key("properties");
    if is_object {
        strict_object(map, path)?;
    }
    // `$ref` takes no sibling keywords in strict mode: a described
    // reference becomes a one-variant `anyOf`, which may carry them.
    if map.len() > 1
        && let Some(reference) = map.remove("$ref")
    {
        map.insert("anyOf".into(), json!([{ "$ref": reference }]));
    }
    Ok(())
}

/// Closes an object schema: no other properties, every property required,
/// the optional ones nullable.
fn strict_object(map: &mut Map<String, Value>, path: &str) -> Result<(), StrictError> {
    let fail = |reason: &str| Err((path.to_owned(), reason.to_owned()));
    match map.get("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => {
            return fail(
                "it is a map with free-form keys; strict mode needs fixed properties (use a struct, or a list of key/value pairs)",
            );
        }
    }
    if map.contains_key("patternProperties") {
        return fail("it has `patternProperties`; strict mode needs fixed properties");
    }
    map.insert("additionalProperties".into(), Value::Bool(false));
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut all = Vec::new();
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for (name, prop) in props.iter_mut() {
            strict(prop, &join(path, name))?;
            if !required.contains(name) {
                make_nullable(prop);
            }
            all.push(Value::String(name.clone()));
        }
    }
    map.entry("properties").or_insert_with(|| json!({}));
    map.insert("required".into(), Value::Array(all));
    Ok(())
}

/// Lets `null` through `schema` too (strict mode's form of "optional").
fn make_nullable(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    let simple =
        !map.contains_key("$ref") && !map.contains_key("anyOf") && !map.contains_key("const");
    match map.get_mut("type") {
        Some(t) if simple => {
            if type_includes(t, "null") {
                return;
            }
            *t = match t.take() {
                Value::Array(mut a) => {
                    a.push(json!("null"));
                    Value::Array(a)
                }
                single => json!([single, "null"]),
            };
            if let Some(Value::Array(values)) = map.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
        }
        _ => {
            if let Some(Value::Array(variants)) = map.get_mut("anyOf") {
                if !variants
                    .iter()
                    .any(|v| v.get("type") == Some(&json!("null")))
                {
                    variants.push(json!({ "type": "null" }));
                }
                return;
            }
            let description = map.remove("description");
            let inner = Value::Object(std::mem::take(map));
            map.insert("anyOf".into(), json!([inner, { "type": "null" }]));
            if let Some(d) = description {
                map.insert("description".into(), d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_forms() {
        let mut plain = json!({"type": "string"});
        make_nullable(&mut plain);
        assert_eq!(plain, json!({"type": ["string", "null"]}));
        let mut reference = json!({"$ref": "#/$defs/A", "description": "d"});
        make_nullable(&mut reference);
        assert_eq!(
            reference,
            json!({"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}], "description": "d"})
        );
        let mut e = json!({"type": "string", "enum": ["a"]});
        make_nullable(&mut e);
        assert_eq!(e, json!({"type": ["string", "null"], "enum": ["a", null]}));
    }
}
