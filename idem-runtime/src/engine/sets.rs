//! Arguments whose members have no order: sets (`HashSet`, `BTreeSet`, ...),
//! which a tool's schema marks `"uniqueItems": true`. A `HashSet`
//! serializes its members in an order of its own, different for every
//! instance, so an operation keyed on its re-serialized arguments would get
//! a new key for the very same call. Before such a tool's key and
//! fingerprint are derived, every array its schema marks `uniqueItems` is
//! put in one order, the order a `BTreeSet` of its members serializes in
//! (so the keys of tools that already took a `BTreeSet` stay as they were):
//! numbers by value, strings by their bytes, `false` before `true`, arrays
//! member by member; anything else, and ties, by canonical JSON
//! (docs/spec.md, "Keys").

use std::cmp::Ordering;
use std::sync::Arc;

use serde_json::{Map, Number, Value};

use crate::canonical::canonical_json;

/// The schema of a tool whose arguments hold sets.
#[derive(Debug, Clone)]
pub(crate) struct Sets {
    schema: Arc<Value>,
}

impl Sets {
    /// The sets of a tool with input schema `schema`; `None` when the
    /// schema marks no array `uniqueItems`, so arguments need no change.
    pub(crate) fn of(schema: &Value) -> Option<Sets> {
        has_sets(schema).then(|| Sets {
            schema: Arc::new(schema.clone()),
        })
    }

    /// Puts every set in `args` (the arguments as JSON) in canonical order.
    pub(crate) fn order(&self, args: &mut Value) {
        let no_defs = Map::new();
        let defs = self
            .schema
            .get("$defs")
            .and_then(Value::as_object)
            .unwrap_or(&no_defs);
        order(args, &[&*self.schema], defs);
    }
}

/// Whether `uniqueItems: true` appears anywhere in `schema`.
fn has_sets(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.get("uniqueItems") == Some(&Value::Bool(true)) || map.values().any(has_sets)
        }
        Value::Array(items) => items.iter().any(has_sets),
        _ => false,
    }
}

/// Orders the sets in `value`, which every schema of `schemas` describes:
/// first the members (each with every schema that applies to it), then,
/// if any schema marks this array `uniqueItems`, the array itself.
fn order(value: &mut Value, schemas: &[&Value], defs: &Map<String, Value>) {
    let mut applicable = Vec::new();
    for schema in schemas {
        expand(schema, defs, &mut applicable);
    }
    match value {
        Value::Object(members) => {
            for (name, member) in members.iter_mut() {
                let subs: Vec<&Value> = applicable
                    .iter()
                    .filter_map(|s| property_schema(s, name))
                    .collect();
                if !subs.is_empty() {
                    order(member, &subs, defs);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let subs: Vec<&Value> = applicable
                    .iter()
                    .filter_map(|s| item_schema(s, i))
                    .collect();
                if !subs.is_empty() {
                    order(item, &subs, defs);
                }
            }
            let is_set = applicable
                .iter()
                .any(|s| s.get("uniqueItems") == Some(&Value::Bool(true)));
            if is_set {
                items.sort_by(set_order);
            }
        }
        _ => {}
    }
}

/// The order of set members: a `BTreeSet`'s for what sets are made of, and
/// canonical JSON to break every tie, so that the order is total.
fn set_order(a: &Value, b: &Value) -> Ordering {
    member_order(a, b).then_with(|| canonical_json(a).cmp(&canonical_json(b)))
}

/// Numbers by value, strings by their bytes (`String`'s order), `false`
/// before `true`, arrays member by member; other pairs by canonical JSON.
fn member_order(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_order(x, y),
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(a, b)| member_order(a, b))
            .find(|o| o.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => canonical_json(a).cmp(&canonical_json(b)),
    }
}

/// Integers exactly (as `i128`), anything else as floats.
fn number_order(x: &Number, y: &Number) -> Ordering {
    let exact = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (exact(x), exact(y)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => {
            let float = |n: &Number| n.as_f64().unwrap_or(f64::NAN);
            float(x).total_cmp(&float(y))
        }
    }
}

/// `schema` and what it stands for: the definition a `$ref` names, and the
/// branches of `anyOf`, `oneOf` and `allOf`, flattened into `out`, each
/// schema once (so a schema that refers to itself ends).
fn expand<'a>(
    schema: &'a Value,
    defs: &'a Map<String, Value>,
    out: &mut Vec<&'a Map<String, Value>>,
) {
    let Value::Object(map) = schema else { return };
    if out.iter().any(|seen| std::ptr::eq(*seen, map)) {
        return;
    }
    out.push(map);
    if let Some(def) = map
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|name| defs.get(name))
    {
        expand(def, defs, out);
    }
    for keyword in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = map.get(keyword) {
            for branch in branches {
                expand(branch, defs, out);
            }
        }
    }
}

/// The schema of member `name` of an object `schema` describes.
fn property_schema<'a>(schema: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    match schema.get("properties").and_then(|p| p.get(name)) {
        Some(sub) => Some(sub),
        None => schema
            .get("additionalProperties")
            .filter(|extra| extra.is_object()),
    }
}

/// The schema of item `i` of an array `schema` describes.
fn item_schema(schema: &Map<String, Value>, i: usize) -> Option<&Value> {
    match schema.get("prefixItems").and_then(|p| p.get(i)) {
        Some(sub) => Some(sub),
        None => schema.get("items").filter(|items| items.is_object()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ordered(schema: Value, mut args: Value) -> Value {
        if let Some(sets) = Sets::of(&schema) {
            sets.order(&mut args);
        }
        args
    }

    #[test]
    fn a_schema_without_sets_needs_nothing() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}});
        assert!(Sets::of(&schema).is_none());
    }

    #[test]
    fn sets_are_sorted_wherever_the_schema_puts_them() {
        let schema = json!({
            "type": "object",
            "properties": {
                "tags": {"type": "array", "uniqueItems": true, "items": {"type": "string"}},
                "list": {"type": "array", "items": {"type": "string"}},
                "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
                "by_sku": {"type": "object", "additionalProperties": {"type": "array", "uniqueItems": true}},
                "maybe": {"anyOf": [{"$ref": "#/$defs/Line"}, {"type": "null"}]}
            },
            "$defs": {
                "Line": {"type": "object", "properties": {
                    "labels": {"type": "array", "uniqueItems": true, "items": {"type": "integer"}}
                }}
            }
        });
        let args = json!({
            "tags": ["b", "a", "c"],
            "list": ["b", "a"],
            "lines": [{"labels": [3, 1, 2]}, {"labels": [9, 8]}],
            "by_sku": {"x": [2, 1]},
            "maybe": {"labels": [5, 4]}
        });
        assert_eq!(
            ordered(schema, args),
            json!({
                "tags": ["a", "b", "c"],
                "list": ["b", "a"],
                "lines": [{"labels": [1, 2, 3]}, {"labels": [8, 9]}],
                "by_sku": {"x": [1, 2]},
                "maybe": {"labels": [4, 5]}
            })
        );
    }

    #[test]
    fn sets_of_sets_are_ordered_inside_out() {
        let schema = json!({"type": "object", "properties": {"groups": {
            "type": "array", "uniqueItems": true,
            "items": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}
        }}});
        let one = ordered(schema.clone(), json!({"groups": [["d", "c"], ["b", "a"]]}));
        let other = ordered(schema, json!({"groups": [["a", "b"], ["c", "d"]]}));
        assert_eq!(one, other);
        assert_eq!(one, json!({"groups": [["a", "b"], ["c", "d"]]}));
    }

    #[test]
    fn a_schema_that_refers_to_itself_ends() {
        let schema = json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"anyOf": [{"$ref": "#/$defs/Node"}, {
                "type": "object",
                "properties": {
                    "ids": {"type": "array", "uniqueItems": true},
                    "next": {"$ref": "#/$defs/Node"}
                }
            }]}}
        });
        let args = json!({"node": {"ids": [2, 1], "next": {"ids": [4, 3]}}});
        assert_eq!(
            ordered(schema, args),
            json!({"node": {"ids": [1, 2], "next": {"ids": [3, 4]}}})
        );
    }
}
