//! What a tool's given schema makes of a call's arguments, for a tool
//! known only at run time (its `Args` any JSON, its schema given with
//! `ToolInfo::with_input_schema`), before the key is derived, as a typed
//! tool's arguments are read by serde (docs/spec.md, "Keys"):
//!
//! - **defaults**: a member left out that the schema gives a `default` is
//!   filled in, so that a client that spells out a default and one that
//!   leaves it out make one operation;
//! - **scalars written as strings**: a string where the schema allows only
//!   an integer, a number or a boolean, and that is one written as JSON
//!   (`"15000"`, `"2.5"`, `"true"`), is read as that value, as the
//!   servers' own validation reads it (pydantic's lax mode, zod's
//!   `coerce`): `"15000"` and `15000` for an integer field are one
//!   refund. Any other string is left as it came, for the server to judge.
//!
//! The schema is walked as the sets are (`sets::walk`): `$ref`s to
//! `$defs`, every branch of `allOf`, the branch of `anyOf` or `oneOf` the
//! value matched; at any depth.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::sets::{Visit, walk};

/// The schema of a tool, given with it, that changes how arguments read.
#[derive(Debug, Clone)]
pub(crate) struct GivenSchema {
    schema: Arc<Value>,
}

impl GivenSchema {
    /// What tool input schema `schema` makes of arguments; `None` when it
    /// gives no default and types no scalar, so arguments need no change.
    pub(crate) fn of(schema: &Value) -> Option<GivenSchema> {
        (has_defaults(schema) || types_scalars(schema)).then(|| GivenSchema {
            schema: Arc::new(schema.clone()),
        })
    }

    /// Reads `args` as the schema does: every member left out that has a
    /// default filled in, at any depth (an object's before its members
    /// are walked, so that a default that is an object gets the defaults
    /// of its own members), and every scalar written as a string read as
    /// the schema's type.
    pub(crate) fn read(&self, args: &mut Value) {
        walk(&self.schema, args, &mut |value, applicable, at| {
            if at != Visit::Before {
                return;
            }
            match value {
                Value::Object(members) => fill_members(members, applicable),
                Value::String(text) => {
                    if let Some(read) = scalar(text, applicable) {
                        *value = read;
                    }
                }
                _ => {}
            }
        });
    }
}

/// Whether a property anywhere in `schema` has a `default`.
fn has_defaults(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            let property_default = map
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.values().any(|s| s.get("default").is_some()));
            property_default || map.values().any(has_defaults)
        }
        Value::Array(items) => items.iter().any(has_defaults),
        _ => false,
    }
}

/// The scalar types a string may be read as.
const SCALARS: [&str; 3] = ["integer", "number", "boolean"];

/// Whether anywhere in `schema` a `type` names an integer, a number or a
/// boolean.
fn types_scalars(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            let typed = map.get("type").is_some_and(|t| match t {
                Value::String(t) => SCALARS.contains(&t.as_str()),
                Value::Array(ts) => ts
                    .iter()
                    .any(|t| t.as_str().is_some_and(|t| SCALARS.contains(&t))),
                _ => false,
            });
            typed || map.values().any(types_scalars)
        }
        Value::Array(items) => items.iter().any(types_scalars),
        _ => false,
    }
}

/// The types the schemas that apply to a value allow, if one of them says
/// (`None`: they allow anything).
fn allowed<'s>(applicable: &[&'s Map<String, Value>]) -> Option<Vec<&'s str>> {
    let mut allowed: Option<Vec<&str>> = None;
    for schema in applicable {
        let Some(types) = types_of(schema) else {
            continue;
        };
        allowed = Some(match allowed {
            None => types,
            Some(before) => before.into_iter().filter(|t| types.contains(t)).collect(),
        });
    }
    allowed
}

/// The types `schema` allows, if it says: its `type`, or those of every
/// branch of its `anyOf` or `oneOf` (a value that matched no branch, as
/// `"3"` for pydantic's `int | None`, is read as the branches allow).
fn types_of(schema: &Map<String, Value>) -> Option<Vec<&str>> {
    match schema.get("type") {
        Some(Value::String(t)) => return Some(vec![t.as_str()]),
        Some(Value::Array(ts)) => return Some(ts.iter().filter_map(Value::as_str).collect()),
        _ => {}
    }
    let branches = ["anyOf", "oneOf"]
        .iter()
        .find_map(|k| schema.get(*k).and_then(Value::as_array))?;
    let mut union = Vec::new();
    for branch in branches {
        union.extend(types_of(branch.as_object()?)?);
    }
    Some(union)
}

/// `text` read as the scalar the schemas allow, if they allow no string
/// and it is one written as JSON: an integer (exact) where an integer is
/// allowed, a number where a number is, `true` or `false` where a boolean
/// is.
fn scalar(text: &str, applicable: &[&Map<String, Value>]) -> Option<Value> {
    let allowed = allowed(applicable)?;
    if allowed.contains(&"string") {
        return None;
    }
    let read: Value = serde_json::from_str(text.trim()).ok()?;
    let fits = match &read {
        Value::Number(n) if n.is_i64() || n.is_u64() => {
            allowed.contains(&"integer") || allowed.contains(&"number")
        }
        Value::Number(_) => allowed.contains(&"number"),
        Value::Bool(_) => allowed.contains(&"boolean"),
        _ => false,
    };
    fits.then_some(read)
}

/// Puts in `members` the default of every property of `applicable` that
/// they leave out.
fn fill_members(members: &mut Map<String, Value>, applicable: &[&Map<String, Value>]) {
    for schema in applicable {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (name, property) in properties {
            if let Some(default) = property.get("default")
                && !members.contains_key(name)
            {
                members.insert(name.clone(), default.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn filled(schema: Value, mut args: Value) -> Value {
        if let Some(given) = GivenSchema::of(&schema) {
            given.read(&mut args);
        }
        args
    }

    #[test]
    fn a_member_left_out_is_its_default_and_one_given_stays() {
        let schema = json!({"type": "object", "properties": {
            "entry": {"type": "string"},
            "amount": {"type": "integer", "default": 0},
            "memo": {"type": "string", "default": ""},
        }});
        assert_eq!(
            filled(schema.clone(), json!({"entry": "a"})),
            json!({"entry": "a", "amount": 0, "memo": ""})
        );
        assert_eq!(
            filled(schema, json!({"entry": "a", "amount": 5})),
            json!({"entry": "a", "amount": 5, "memo": ""})
        );
    }

    #[test]
    fn defaults_are_found_through_refs_and_inside_lists() {
        // As pydantic writes a nested model: a `$ref`, and a list of them.
        let schema = json!({
            "type": "object",
            "$defs": {"Line": {"type": "object", "properties": {
                "sku": {"type": "string"},
                "qty": {"type": "integer", "default": 1},
            }}},
            "properties": {
                "first": {"$ref": "#/$defs/Line"},
                "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
            },
        });
        let args = json!({"first": {"sku": "a"}, "lines": [{"sku": "b"}, {"sku": "c", "qty": 3}]});
        assert_eq!(
            filled(schema, args),
            json!({"first": {"sku": "a", "qty": 1},
                   "lines": [{"sku": "b", "qty": 1}, {"sku": "c", "qty": 3}]})
        );
    }

    #[test]
    fn a_schema_without_defaults_or_typed_scalars_changes_nothing() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert!(GivenSchema::of(&schema).is_none());
    }

    #[test]
    fn a_scalar_written_as_a_string_reads_as_the_schemas_type() {
        let schema = json!({"type": "object", "properties": {
            "amount": {"type": "integer"},
            "rate": {"type": "number"},
            "urgent": {"type": "boolean"},
            "code": {"type": "string"},
            "either": {"type": ["string", "integer"]},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "lines": {"type": "array", "items": {"type": "integer"}},
        }});
        let args = json!({
            "amount": "15000", "rate": " 2.5 ", "urgent": "true", "code": "15000",
            "either": "7", "maybe": "3", "lines": ["1", 2],
        });
        assert_eq!(
            filled(schema.clone(), args),
            json!({
                "amount": 15000, "rate": 2.5, "urgent": true, "code": "15000",
                "either": "7", "maybe": 3, "lines": [1, 2],
            })
        );
        // Not one written as JSON, or not the type: left for the server.
        let odd = json!({"amount": "15000.5", "rate": "NaN", "urgent": "yes", "lines": ["x"]});
        assert_eq!(filled(schema.clone(), odd.clone()), odd);
        let huge = json!({"amount": "123456789012345678901234567890"});
        assert_eq!(filled(schema, huge.clone()), huge);
    }
}
