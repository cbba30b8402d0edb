//! Arguments left out that the tool's schema gives a default, for a tool
//! known only at run time (its `Args` any JSON, its schema given with
//! `ToolInfo::with_input_schema`): filled in before the key is derived, as
//! a typed tool's arguments are when serde reads them, so that a client
//! that spells out a default and one that leaves it out make one
//! operation (docs/spec.md, "Keys").
//!
//! The schema is walked as the sets are (`sets::walk`): `$ref`s to
//! `$defs`, every branch of `allOf`, the branch of `anyOf` or `oneOf` the
//! value matched; a member's `default` is filled in where an object the
//! value holds leaves it out, at any depth.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::sets::{Visit, walk};

/// The schema of a tool that gives defaults.
#[derive(Debug, Clone)]
pub(crate) struct SchemaDefaults {
    schema: Arc<Value>,
}

impl SchemaDefaults {
    /// The defaults of a tool with input schema `schema`; `None` when no
    /// member has one, so arguments need no change.
    pub(crate) fn of(schema: &Value) -> Option<SchemaDefaults> {
        has_defaults(schema).then(|| SchemaDefaults {
            schema: Arc::new(schema.clone()),
        })
    }

    /// Fills in every member `args` leaves out that has a default, at
    /// any depth: an object's before its members are walked, so that a
    /// default that is an object gets the defaults of its own members.
    pub(crate) fn fill(&self, args: &mut Value) {
        walk(&self.schema, args, &mut |value, applicable, at| {
            if at == Visit::Before
                && let Value::Object(members) = value
            {
                fill_members(members, applicable);
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
        if let Some(defaults) = SchemaDefaults::of(&schema) {
            defaults.fill(&mut args);
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
    fn a_schema_without_defaults_changes_nothing() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert!(SchemaDefaults::of(&schema).is_none());
    }
}
