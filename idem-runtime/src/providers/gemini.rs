//! Gemini's format: function declarations (the schema rewritten into the
//! OpenAPI subset Gemini's `parameters` accepts, references inlined, or
//! refused naming the field where that subset cannot express it; or the
//! JSON Schema as it is, under `parametersJsonSchema`), a `functionCall`
//! part, and the `functionResponse` part answering it.

use serde_json::{Map, Value, json};

use super::call::{Call, MalformedCall, string};
use super::walk::{RenderError, join};
use crate::error::ToolError;
use crate::tool::ToolDef;

/// A `functionCall` part; its `id`, when it has one, names the call.
pub(super) fn read<'a>(
    part: &'a Value,
    shape: &'static str,
) -> Result<(Call<'a>, Value), MalformedCall> {
    let name = string(part, &["functionCall", "name"], shape)?;
    let args = part
        .pointer("/functionCall/args")
        .cloned()
        .unwrap_or(Value::Null);
    let id = part.pointer("/functionCall/id").and_then(Value::as_str);
    Ok((
        Call {
            raw: part,
            id,
            name,
        },
        args,
    ))
}

/// The `functionResponse` part answering a call: `response.output` holds
/// the result, `response.error` the failure; the call's `id`, when it has
/// one, is echoed.
pub(super) fn answer(call: &Call<'_>, outcome: &Result<Value, ToolError>) -> Value {
    let response = match outcome {
        Ok(value) => json!({ "output": value }),
        Err(e) => json!({ "error": e.model_message() }),
    };
    let mut reply = Map::new();
    reply.insert("name".into(), Value::String(call.name.to_owned()));
    if let Some(id) = call
        .raw
        .pointer("/functionCall/id")
        .filter(|id| !id.is_null())
    {
        reply.insert("id".into(), id.clone());
    }
    reply.insert("response".into(), response);
    json!({ "functionResponse": reply })
}

impl ToolDef {
    /// A Gemini function declaration, `{name, description, parameters}`,
    /// in the OpenAPI subset Gemini accepts: `$ref`s inlined, `["T",
    /// "null"]` written `nullable`, `oneOf` as `anyOf`, a tuple of one
    /// element type as a sized array, "no other members" (an enum's data
    /// variant) as `maxProperties`, unsupported keywords removed; no
    /// `parameters` for a tool without arguments. Fails, naming the field,
    /// where the subset cannot express the schema: a map with free-form
    /// keys, a value of any type (`serde_json::Value`), a recursive type, a
    /// tuple of several element types, a struct that denies unknown fields
    /// and has optional ones ([`gemini_json_schema`](Self::gemini_json_schema)
    /// takes them all).
    pub(super) fn gemini(&self) -> Result<Value, RenderError> {
        let defs = self
            .input_schema
            .get("$defs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut walk = Walk {
            defs: &defs,
            stack: Vec::new(),
        };
        let parameters = walk
            .schema(&self.input_schema, ".")
            .map_err(|why| RenderError::new("Gemini's schema subset", &self.name, why))?;
        let mut declaration = json!({ "name": self.name, "description": self.description });
        let no_arguments = parameters
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty);
        if !no_arguments {
            declaration["parameters"] = parameters;
        }
        Ok(declaration)
    }

    /// A Gemini function declaration with the arguments' JSON Schema as it
    /// is, `{name, description, parametersJsonSchema}`: every schema fits,
    /// maps and recursive types included.
    pub(super) fn gemini_json_schema(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "parametersJsonSchema": self.input_schema,
        })
    }
}

/// Keywords of the OpenAPI subset Gemini function declarations accept
/// (the `Schema` object, <https://ai.google.dev/api/caching#Schema>).
const GEMINI_KEPT: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "anyOf",
    "propertyOrdering",
];

const GEMINI_FORMATS: &[&str] = &["int32", "int64", "float", "double", "date-time", "enum"];

/// Where and why a schema cannot be written for Gemini.
type GeminiError = (String, String);

/// A walk over one tool's schema, inlining its `$defs`.
struct Walk<'a> {
    defs: &'a Map<String, Value>,
    /// The definitions being inlined, outermost first: one met again is a
    /// recursion.
    stack: Vec<String>,
}

impl Walk<'_> {
    /// `schema` (at `path`) in Gemini's subset, or why it cannot be.
    fn schema(&mut self, schema: &Value, path: &str) -> Result<Value, GeminiError> {
        let fail = |reason: &str| Err((path.to_owned(), reason.to_owned()));
        let Value::Object(map) = schema else {
            return fail(
                "it accepts any JSON value (a `serde_json::Value`?), which Gemini's `parameters` \
                 cannot express; use Provider::GeminiJsonSchema",
            );
        };
        if let Some(target) = map.get("$ref").and_then(Value::as_str) {
            return self.reference(target, map.get("description"), path);
        }
        let definite = ["type", "anyOf", "oneOf", "enum", "const"];
        if !definite.iter().any(|k| map.contains_key(*k)) {
            return fail(
                "it accepts any JSON value (a `serde_json::Value`?), which Gemini's `parameters` \
                 cannot express; use Provider::GeminiJsonSchema",
            );
        }
        if map
            .get("additionalProperties")
            .is_some_and(|a| *a != Value::Bool(false))
            || map.contains_key("patternProperties")
        {
            return fail(
                "it is a map with free-form keys, which Gemini's `parameters` cannot express \
                 (use a struct, or Provider::GeminiJsonSchema)",
            );
        }
        let mut out = Map::new();
        if map.get("additionalProperties") == Some(&Value::Bool(false)) {
            // Gemini's `Schema` has no `additionalProperties`: "no other
            // members" is said by counting them, which holds only when
            // every declared one is required (an enum's data variant is).
            let declared = map
                .get("properties")
                .and_then(Value::as_object)
                .map_or(0, Map::len);
            let required = map
                .get("required")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if required < declared {
                return fail(
                    "it refuses members it does not declare (`#[serde(deny_unknown_fields)]`) \
                     and has optional ones, which Gemini's `parameters` cannot express (use \
                     Provider::GeminiJsonSchema)",
                );
            }
            out.insert("maxProperties".into(), declared.into());
        }
        for (key, value) in map {
            self.keyword(&mut out, key, value, path)?;
        }
        Ok(finish(out))
    }

    /// The definition `target` names, inlined, keeping a description
    /// written beside the reference.
    fn reference(
        &mut self,
        target: &str,
        description: Option<&Value>,
        path: &str,
    ) -> Result<Value, GeminiError> {
        let name = target.rsplit('/').next().unwrap_or(target).to_owned();
        let defs = self.defs;
        let Some(def) = defs.get(&name) else {
            return Err((path.to_owned(), format!("`{target}` names no definition")));
        };
        if self.stack.contains(&name) {
            return Err((
                path.to_owned(),
                format!(
                    "`{name}` contains itself, and Gemini's `parameters` inline every \
                     reference; use Provider::GeminiJsonSchema"
                ),
            ));
        }
        self.stack.push(name);
        let inlined = self.schema(def, path);
        self.stack.pop();
        let mut inlined = inlined?;
        if let (Some(d), Value::Object(out)) = (description, &mut inlined) {
            out.insert("description".into(), d.clone());
        }
        Ok(inlined)
    }

    /// Writes keyword `key` of a schema into `out`, as Gemini spells it, or
    /// drops it.
    fn keyword(
        &mut self,
        out: &mut Map<String, Value>,
        key: &str,
        value: &Value,
        path: &str,
    ) -> Result<(), GeminiError> {
        match key {
            "type" => write_type(out, value),
            "oneOf" | "anyOf" => {
                let mut variants = Vec::new();
                for (i, v) in value.as_array().into_iter().flatten().enumerate() {
                    if v.get("type").and_then(Value::as_str) == Some("null") {
                        out.insert("nullable".into(), Value::Bool(true));
                    } else {
                        variants.push(self.schema(v, &format!("{path}<variant {i}>"))?);
                    }
                }
                out.insert("anyOf".into(), Value::Array(variants));
            }
            "properties" => {
                let mut props = Map::new();
                for (name, v) in value.as_object().into_iter().flatten() {
                    props.insert(name.clone(), self.schema(v, &join(path, name))?);
                }
                out.insert("properties".into(), Value::Object(props));
            }
            "items" if value.is_object() => {
                out.insert("items".into(), self.schema(value, &join(path, "[]"))?);
            }
            "prefixItems" => {
                let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
                let Some(first) = items.first().filter(|f| items.iter().all(|i| i == *f)) else {
                    return Err((
                        path.to_owned(),
                        "it is a tuple of several element types, which Gemini's `parameters` \
                         cannot express (use a struct, or Provider::GeminiJsonSchema)"
                            .to_owned(),
                    ));
                };
                // A tuple of one element type: a sized array of it.
                out.insert("items".into(), self.schema(first, &join(path, "[]"))?);
            }
            "enum" => write_enum(out, value),
            "const" if value.is_string() => {
                out.insert("enum".into(), json!([value]));
                out.entry("type").or_insert(json!("string"));
            }
            "format" if value.as_str().is_some_and(|f| GEMINI_FORMATS.contains(&f)) => {
                out.insert("format".into(), value.clone());
            }
            k if k != "format" && k != "items" && GEMINI_KEPT.contains(&k) => {
                out.insert(key.to_owned(), value.clone());
            }
            _ => {}
        }
        Ok(())
    }
}

/// `type`: one name as it is; a list without `null` (written `nullable`),
/// several names left as `anyOf`.
fn write_type(out: &mut Map<String, Value>, value: &Value) {
    let Value::Array(types) = value else {
        out.insert("type".into(), value.clone());
        return;
    };
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

/// `enum` without `null` (written `nullable`).
fn write_enum(out: &mut Map<String, Value>, value: &Value) {
    let values: Vec<Value> = value
        .as_array()
        .map(|vs| vs.iter().filter(|v| !v.is_null()).cloned().collect())
        .unwrap_or_default();
    if value.as_array().is_some_and(|vs| vs.len() > values.len()) {
        out.insert("nullable".into(), Value::Bool(true));
    }
    out.insert("enum".into(), Value::Array(values));
}

/// What is left to fix once every keyword is written.
fn finish(mut out: Map<String, Value>) -> Value {
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
