//! Tool definitions in the formats users send to models: OpenAI (plain and
//! strict), Anthropic, Gemini and MCP, all rendered from one [`ToolDef`].

use serde_json::{Map, Value, json};

use crate::tool::{ToolDef, ToolKind};

/// Why a schema could not be rendered in a stricter dialect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}`: field `{field}` cannot be rendered in OpenAI strict mode: {reason}")]
#[non_exhaustive]
pub struct RenderError {
    /// The tool.
    pub tool: String,
    /// The offending field as a path (`lines[].sku`), `.` for the root.
    pub field: String,
    /// What strict mode cannot express, and what to do.
    pub reason: String,
}

impl ToolDef {
    /// OpenAI Chat Completions: `{"type": "function", "function": {name,
    /// description, parameters}}`.
    pub fn openai(&self) -> Value {
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
    pub fn openai_strict(&self) -> Result<Value, RenderError> {
        let mut parameters = self.input_schema.clone();
        strict(&mut parameters, ".").map_err(|(field, reason)| RenderError {
            tool: self.name.clone(),
            field,
            reason,
        })?;
        if let Some(Value::Object(defs)) = parameters.get_mut("$defs") {
            for (name, def) in defs.iter_mut() {
                strict(def, &format!("$defs.{name}")).map_err(|(field, reason)| RenderError {
                    tool: self.name.clone(),
                    field,
                    reason,
                })?;
            }
        }
        Ok(json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
                "strict": true,
            }
        }))
    }

    /// Anthropic Messages: `{name, description, input_schema}`.
    pub fn anthropic(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        })
    }

    /// A Gemini function declaration, `{name, description, parameters}`,
    /// in the OpenAPI subset Gemini accepts: `$ref`s inlined (a recursive
    /// type is cut to a plain object where it recurs), `["T", "null"]`
    /// written `nullable`, `oneOf` as `anyOf`, unsupported keywords removed.
    pub fn gemini(&self) -> Value {
        let defs = self
            .input_schema
            .get("$defs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut stack = Vec::new();
        json!({
            "name": self.name,
            "description": self.description,
            "parameters": gemini_schema(&self.input_schema, &defs, &mut stack),
        })
    }

    /// An MCP `Tool`: `{name, description, inputSchema, annotations}`. Read
    /// tools are `readOnlyHint: true`; write tools `readOnlyHint: false`,
    /// `idempotentHint: true` (the wrapper makes them so) and
    /// `destructiveHint` / `openWorldHint` from their settings.
    pub fn mcp(&self) -> Value {
        let annotations = match self.kind {
            ToolKind::Read => json!({ "readOnlyHint": true }),
            ToolKind::Write => json!({
                "readOnlyHint": false,
                "destructiveHint": self.destructive,
                "idempotentHint": true,
                "openWorldHint": self.open_world,
            }),
        };
        let mut tool = json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": annotations,
        });
        if let Some(schema) = &self.output_schema {
            tool["outputSchema"] = schema.clone();
        }
        tool
    }
}

/// Keywords OpenAI strict mode does not accept, dropped from every schema.
const STRICT_DROPPED: &[&str] = &[
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$schema",
    "$comment",
    "$id",
    "minProperties",
    "maxProperties",
];

/// String formats strict mode understands; others (schemars' `uint32`,
/// `int64`, ...) are dropped, since the range keywords carry them.
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
    for key in STRICT_DROPPED {
        map.remove(*key);
    }
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
                let field = join(path, name);
                strict(prop, &field)?;
                if !required.contains(name) {
                    make_nullable(prop);
                }
                all.push(Value::String(name.clone()));
            }
        }
        map.entry("properties").or_insert_with(|| json!({}));
        map.insert("required".into(), Value::Array(all));
    }
    Ok(())
}

fn join(path: &str, name: &str) -> String {
    if path == "." {
        name.to_owned()
    } else if name == "[]" {
        format!("{path}[]")
    } else {
        format!("{path}.{name}")
    }
}

fn type_includes(t: &Value, name: &str) -> bool {
    match t {
        Value::String(s) => s == name,
        Value::Array(a) => a.iter().any(|v| v.as_str() == Some(name)),
        _ => false,
    }
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

/// Keywords of the OpenAPI subset Gemini function declarations accept.
const GEMINI_KEPT: &[&str] = &[
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "propertyOrdering",
];

const GEMINI_FORMATS: &[&str] = &["int32", "int64", "float", "double", "date-time", "enum"];

fn gemini_schema(schema: &Value, defs: &Map<String, Value>, stack: &mut Vec<String>) -> Value {
    let Value::Object(map) = schema else {
        // `true` (anything): the closest Gemini has is an untyped object.
        return json!({ "type": "object" });
    };
    // Inline a reference, keeping a description written beside it.
    if let Some(target) = map.get("$ref").and_then(Value::as_str) {
        let name = target.rsplit('/').next().unwrap_or(target).to_owned();
        let mut inlined = match defs.get(&name) {
            Some(def) if !stack.contains(&name) => {
                stack.push(name);
                let out = gemini_schema(def, defs, stack);
                stack.pop();
                out
            }
            // Recursion (or a dangling reference): cut it here.
            _ => json!({ "type": "object" }),
        };
        if let (Some(d), Value::Object(out)) = (map.get("description"), &mut inlined) {
            out.insert("description".into(), d.clone());
        }
        return inlined;
    }
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "type" => match value {
                Value::Array(types) => {
                    let non_null: Vec<&Value> = types
                        .iter()
                        .filter(|t| t.as_str() != Some("null"))
                        .collect();
                    if non_null.len() < types.len() {
                        out.insert("nullable".into(), Value::Bool(true));
                    }
                    match non_null.as_slice() {
                        [one] => {
                            out.insert("type".into(), (*one).clone());
                        }
                        many => {
                            let variants = many.iter().map(|t| json!({ "type": t })).collect();
                            out.insert("anyOf".into(), Value::Array(variants));
                        }
                    }
                }
                other => {
                    out.insert("type".into(), other.clone());
                }
            },
            "oneOf" | "anyOf" => {
                let variants: Vec<Value> = value
                    .as_array()
                    .map(|vs| {
                        vs.iter()
                            .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
                            .map(|v| gemini_schema(v, defs, stack))
                            .collect()
                    })
                    .unwrap_or_default();
                if value.as_array().is_some_and(|vs| vs.len() > variants.len()) {
                    out.insert("nullable".into(), Value::Bool(true));
                }
                out.insert("anyOf".into(), Value::Array(variants));
            }
            "properties" => {
                let props = value
                    .as_object()
                    .map(|p| {
                        p.iter()
                            .map(|(k, v)| (k.clone(), gemini_schema(v, defs, stack)))
                            .collect()
                    })
                    .unwrap_or_default();
                out.insert("properties".into(), Value::Object(props));
            }
            "items" => {
                out.insert("items".into(), gemini_schema(value, defs, stack));
            }
            "enum" => {
                let values: Vec<Value> = value
                    .as_array()
                    .map(|vs| vs.iter().filter(|v| !v.is_null()).cloned().collect())
                    .unwrap_or_default();
                if value.as_array().is_some_and(|vs| vs.len() > values.len()) {
                    out.insert("nullable".into(), Value::Bool(true));
                }
                out.insert("enum".into(), Value::Array(values));
            }
            "const" if value.is_string() => {
                out.insert("enum".into(), json!([value]));
                out.entry("type").or_insert(json!("string"));
            }
            "format" if value.as_str().is_some_and(|f| GEMINI_FORMATS.contains(&f)) => {
                out.insert("format".into(), value.clone());
            }
            "format" => {}
            k if GEMINI_KEPT.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    // `Option<Struct>` arrives as `anyOf: [struct, null]`: with the null
    // now `nullable`, one variant is left, so write it in place.
    if let Some(Value::Array(variants)) = out.get("anyOf")
        && let [Value::Object(only)] = variants.as_slice()
    {
        let only = only.clone();
        out.remove("anyOf");
        for (k, v) in only {
            out.entry(k).or_insert(v);
        }
    }
    // A variant that is only a constant string still needs a type.
    if out.contains_key("enum") && !out.contains_key("type") {
        out.insert("type".into(), json!("string"));
    }
    Value::Object(out)
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
