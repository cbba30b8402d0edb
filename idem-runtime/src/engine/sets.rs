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
//!
//! Only the schema the value itself matched counts: of the branches of an
//! `anyOf` or `oneOf` (an enum's variants), the first whose shape the value
//! has (its tag's `const`, its required members, its types), the branch
//! serde would have read it as. A variant's set never orders another
//! variant's sequence of the same name, which would make two operations
//! one.

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

    /// Puts every set in `args` (the arguments as JSON) in canonical order:
    /// each array after its members, if a schema that applies to it marks
    /// it `uniqueItems`.
    pub(crate) fn order(&self, args: &mut Value) {
        walk(&self.schema, args, &mut |value, applicable, at| {
            if at == Visit::After
                && let Value::Array(items) = value
                && applicable
                    .iter()
                    .any(|s| s.get("uniqueItems") == Some(&Value::Bool(true)))
            {
                items.sort_by(set_order);
            }
        });
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

/// When a [`walk`]'s visitor is called at a value: before its members are
/// walked, or after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Visit {
    Before,
    After,
}

/// What [`walk`] calls at every value: the value, the schemas that apply
/// to it, and when.
pub(super) type Visitor<'v> = dyn FnMut(&mut Value, &[&Map<String, Value>], Visit) + 'v;

/// Walks `value`, which the tool's input schema `root` describes, calling
/// `visit` at every value, before and after its members, with every schema
/// that applies to it ([`expand`]): what sets and defaults are found by.
pub(super) fn walk(root: &Value, value: &mut Value, visit: &mut Visitor<'_>) {
    let no_defs = Map::new();
    let defs = root
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&no_defs);
    walk_at(value, &[root], defs, visit);
}

fn walk_at(
    value: &mut Value,
    schemas: &[&Value],
    defs: &Map<String, Value>,
    visit: &mut Visitor<'_>,
) {
    let mut applicable = Vec::new();
    for schema in schemas {
        expand(schema, defs, value, &mut applicable);
    }
    visit(value, &applicable, Visit::Before);
    match value {
        Value::Object(members) => {
            for (name, member) in members.iter_mut() {
                let subs: Vec<&Value> = applicable
                    .iter()
                    .filter_map(|s| property_schema(s, name))
                    .collect();
                if !subs.is_empty() {
                    walk_at(member, &subs, defs, visit);
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
                    walk_at(item, &subs, defs, visit);
                }
            }
        }
        _ => {}
    }
    visit(value, &applicable, Visit::After);
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

/// `schema` and what it stands for at `value`: the definition a `$ref`
/// names, every branch of `allOf`, and the branch of `anyOf` or `oneOf`
/// that `value` matched ([`matched`]), flattened into `out`, each schema
/// once (so a schema that refers to itself ends).
fn expand<'a>(
    schema: &'a Value,
    defs: &'a Map<String, Value>,
    value: &Value,
    out: &mut Vec<&'a Map<String, Value>>,
) {
    let Value::Object(map) = schema else { return };
    if out.iter().any(|seen| std::ptr::eq(*seen, map)) {
        return;
    }
    out.push(map);
    if let Some(def) = reference(map, defs) {
        expand(def, defs, value, out);
    }
    if let Some(Value::Array(branches)) = map.get("allOf") {
        for branch in branches {
            expand(branch, defs, value, out);
        }
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(branch) = matched(map.get(keyword), defs, value, out) {
            expand(branch, defs, value, out);
        }
    }
}

/// The definition `schema`'s `$ref` names, if it names one in `defs`.
fn reference<'a>(schema: &Map<String, Value>, defs: &'a Map<String, Value>) -> Option<&'a Value> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|name| defs.get(name))
}

/// The first of `branches` whose shape `value` has: the variant serde
/// reads it as (an untagged enum's first variant that fits; a tagged
/// enum's only one). A branch that leads back through `$ref`s to a schema
/// already applied (a recursive type's) adds nothing and is passed over.
fn matched<'a>(
    branches: Option<&'a Value>,
    defs: &'a Map<String, Value>,
    value: &Value,
    applied: &[&Map<String, Value>],
) -> Option<&'a Value> {
    let Some(Value::Array(branches)) = branches else {
        return None;
    };
    branches
        .iter()
        .find(|b| !leads_back(b, defs, applied) && fits(value, b, defs, 0))
}

/// Whether `schema`, or a definition its chain of `$ref`s names, is one
/// of `applied`.
fn leads_back(schema: &Value, defs: &Map<String, Value>, applied: &[&Map<String, Value>]) -> bool {
    let mut at = schema;
    for _ in 0..REF_DEPTH {
        let Value::Object(map) = at else { return false };
        if applied.iter().any(|seen| std::ptr::eq(*seen, map)) {
            return true;
        }
        match reference(map, defs) {
            Some(def) => at = def,
            None => return false,
        }
    }
    true
}

/// How many `$ref`s may be followed without going into the value: more
/// than any schema a derive writes, so only a cycle of definitions
/// (`A` is `B`, `B` is `A`) reaches it, and a value does not fit a cycle
/// that never looks at it.
const REF_DEPTH: usize = 16;

/// Whether `value` has the shape `schema` describes, as far as it tells
/// serde's variants apart: `const`, `enum`, `type`, `required`,
/// `properties`, `additionalProperties: false`, `items`, `prefixItems`,
/// `$ref`, `allOf`, `anyOf` and `oneOf`. Other keywords (bounds, formats,
/// `uniqueItems`: a set deserializes from a list with repeats) are not
/// checked.
fn fits(value: &Value, schema: &Value, defs: &Map<String, Value>, refs: usize) -> bool {
    let map = match schema {
        Value::Bool(b) => return *b,
        Value::Object(map) => map,
        _ => return true,
    };
    if map.get("const").is_some_and(|c| c != value) {
        return false;
    }
    if let Some(Value::Array(allowed)) = map.get("enum")
        && !allowed.contains(value)
    {
        return false;
    }
    if map.get("type").is_some_and(|t| !has_type(value, t)) {
        return false;
    }
    if let Some(def) = reference(map, defs)
        && (refs >= REF_DEPTH || !fits(value, def, defs, refs + 1))
    {
        return false;
    }
    if let Some(Value::Array(all)) = map.get("allOf")
        && !all.iter().all(|b| fits(value, b, defs, refs))
    {
        return false;
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(any)) = map.get(keyword)
            && !any.iter().any(|b| fits(value, b, defs, refs))
        {
            return false;
        }
    }
    match value {
        Value::Object(members) => object_fits(members, map, defs),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .all(|(i, item)| item_schema(map, i).is_none_or(|sub| fits(item, sub, defs, 0))),
        _ => true,
    }
}

/// The members of an object against `schema`'s `required`, `properties`
/// and `additionalProperties`.
fn object_fits(
    members: &Map<String, Value>,
    schema: &Map<String, Value>,
    defs: &Map<String, Value>,
) -> bool {
    if let Some(Value::Array(required)) = schema.get("required")
        && !required
            .iter()
            .all(|name| name.as_str().is_some_and(|n| members.contains_key(n)))
    {
        return false;
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    members.iter().all(
        |(name, member)| match properties.and_then(|p| p.get(name)) {
            Some(sub) => fits(member, sub, defs, 0),
            None => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => false,
                Some(extra @ Value::Object(_)) => fits(member, extra, defs, 0),
                _ => true,
            },
        },
    )
}

/// Whether `value` is of the JSON Schema `type` (a name, or a list of
/// them).
fn has_type(value: &Value, ty: &Value) -> bool {
    let is = |name: &str| match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        _ => true,
    };
    match ty {
        Value::String(name) => is(name),
        Value::Array(names) => names.iter().any(|n| n.as_str().is_none_or(is)),
        _ => true,
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

    /// `Plan::Tags { items: BTreeSet<String> }` and `Plan::Steps { items:
    /// Vec<String> }` as schemars writes them, internally tagged: the
    /// set's rule stays in its variant.
    #[test]
    fn a_variant_set_never_orders_another_variant_sequence() {
        let schema = json!({"type": "object", "properties": {"plan": {"oneOf": [
            {"type": "object", "properties": {
                "kind": {"type": "string", "const": "Tags"},
                "items": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}
            }, "required": ["kind", "items"]},
            {"type": "object", "properties": {
                "kind": {"type": "string", "const": "Steps"},
                "items": {"type": "array", "items": {"type": "string"}}
            }, "required": ["kind", "items"]}
        ]}}});
        let steps = json!({"plan": {"kind": "Steps", "items": ["deploy", "build"]}});
        assert_eq!(ordered(schema.clone(), steps.clone()), steps);
        let tags = json!({"plan": {"kind": "Tags", "items": ["deploy", "build"]}});
        assert_eq!(
            ordered(schema, tags),
            json!({"plan": {"kind": "Tags", "items": ["build", "deploy"]}})
        );
    }

    /// Untagged, the first variant whose shape the value has is the one
    /// serde reads, and the only one whose rule applies.
    #[test]
    fn an_untagged_value_takes_the_first_variant_it_fits() {
        let schema = json!({"anyOf": [
            {"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "string"}},
                "ordered": {"type": "boolean"}
            }, "required": ["items", "ordered"]},
            {"type": "object", "properties": {
                "items": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}
            }, "required": ["items"]}
        ]});
        let steps = json!({"items": ["b", "a"], "ordered": true});
        assert_eq!(ordered(schema.clone(), steps.clone()), steps);
        assert_eq!(
            ordered(schema, json!({"items": ["b", "a"]})),
            json!({"items": ["a", "b"]})
        );
    }

    #[test]
    fn a_cycle_of_definitions_ends() {
        let schema = json!({
            "type": "array",
            "uniqueItems": true,
            "items": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "integer"}]},
            "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}
        });
        assert_eq!(ordered(schema, json!([2, 1])), json!([1, 2]));
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
