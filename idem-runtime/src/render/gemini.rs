//! Gemini's function declarations: the schema rewritten into the OpenAPI
//! subset Gemini accepts, references inlined.

use serde_json::{Map, Value, json};

use crate::tool::ToolDef;

impl ToolDef {
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
        let mut walk = Walk {
            defs: &defs,
            stack: Vec::new(),
        };
        json!({
            "name": self.name,
            "description": self.description,
            "parameters": walk.schema(&self.input_schema),
        })
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

/// A walk over one tool's schema, inlining its `$defs`.
struct Walk<'a> {
    defs: &'a Map<String, Value>,
    /// The definitions being inlined, outermost first: one met again is a
    /// recursion, cut short.
    stack: Vec<String>,
}

impl Walk<'_> {
    /// `schema` in Gemini's subset.
    fn schema(&mut self, schema: &Value) -> Value {
        let Value::Object(map) = schema else {
            // `true` (anything): the closest Gemini has is an untyped object.
            return json!({ "type": "object" });
        };
        if let Some(target) = map.get("$ref").and_then(Value::as_str) {
            return self.reference(target, map.get("description"));
        }
        let mut out = Map::new();
        for (key, value) in map {
            self.keyword(&mut out, key, value);
        }
        finish(out)
    }

    /// The definition `target` names, inlined, keeping a description
    /// written beside the reference.
    fn reference(&mut self, target: &str, description: Option<&Value>) -> Value {
        let name = target.rsplit('/').next().unwrap_or(target).to_owned();
        let defs = self.defs;
        let mut inlined = match defs.get(&name) {
            Some(def) if !self.stack.contains(&name) => {
                self.stack.push(name);
                let out = self.schema(def);
                self.stack.pop();
                out
            }
            // Recursion (or a dangling reference): cut it here.
            _ => json!({ "type": "object" }),
        };
        if let (Some(d), Value::Object(out)) = (description, &mut inlined) {
            out.insert("description".into(), d.clone());
        }
        inlined
    }

    /// Writes keyword `key` of a schema into `out`, as Gemini spells it, or
    /// drops it.
    fn keyword(&mut self, out: &mut Map<String, Value>, key: &str, value: &Value) {
        match key {
            "type" => write_type(out, value),
            "oneOf" | "anyOf" => {
                let variants: Vec<Value> = value
                    .as_array()
                    .map(|vs| {
                        vs.iter()
                            .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
                            .map(|v| self.schema(v))
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
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), self.schema(v))).collect())
                    .unwrap_or_default();
                out.insert("properties".into(), Value::Object(props));
            }
            "items" => {
                out.insert("items".into(), self.schema(value));
            }
            "enum" => write_enum(out, value),
            "const" if value.is_string() => {
                out.insert("enum".into(), json!([value]));
                out.entry("type").or_insert(json!("string"));
            }
            "format" if value.as_str().is_some_and(|f| GEMINI_FORMATS.contains(&f)) => {
                out.insert("format".into(), value.clone());
            }
            "format" => {}
            k if GEMINI_KEPT.contains(&k) => {
                out.insert(key.to_owned(), value.clone());
            }
            _ => {}
        }
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
