//! Whether a result a person gives (`idem resolve --done`, the console's
//! Resolve) fits the tool's output schema, kept in the note of its
//! unknown outcome, and the result as the tool would have given it: a
//! bare value for a tool whose schema wraps it in one member (the Python
//! SDK's `{"result": ..}` for a function returning a string or a number)
//! is wrapped. A value that does not fit is refused, naming where.
//!
//! The schema is read as tools' output schemas are written (pydantic's,
//! zod's, schemars'): `type`, `properties`, `required`,
//! `additionalProperties: false`, `items`, `enum`, `const`, `anyOf`,
//! `oneOf`, `allOf`, and `$ref`s to `#/$defs` or `#/definitions`; other
//! keywords (formats, bounds, patterns) are left to the tool.

use serde_json::{Map, Value, json};

/// `value` as the tool whose output schema is `schema` would record it,
/// or why it does not fit.
pub(crate) fn shaped(value: Value, schema: &Value) -> Result<Value, String> {
    let Some(misfit) = misfit(&value, schema) else {
        return Ok(value);
    };
    if let Some(member) = wrapper(schema) {
        let wrapped = json!({ member: value });
        if misfit_at(&wrapped, schema, schema, "").is_none() {
            return Ok(wrapped);
        }
        return Err(format!(
            "the result does not fit the tool's output schema, which wraps it as \
             {{\"{member}\": ..}}: give the value of `{member}` alone, or the object \
             ({})",
            misfit_at(&wrapped, schema, schema, "").unwrap_or(misfit)
        ));
    }
    Err(format!(
        "the result does not fit the tool's output schema: {misfit}"
    ))
}

/// The one member a schema wraps its value in: an object schema whose
/// only property is required.
fn wrapper(schema: &Value) -> Option<&str> {
    let properties = schema.get("properties")?.as_object()?;
    let required = schema.get("required")?.as_array()?;
    match (
        properties.keys().next(),
        properties.len(),
        required.as_slice(),
    ) {
        (Some(name), 1, [only]) if only == name => Some(name),
        _ => None,
    }
}

/// Where `value` does not fit `schema`, if it does not.
pub(crate) fn misfit(value: &Value, schema: &Value) -> Option<String> {
    misfit_at(value, schema, schema, "")
}

/// [`misfit`] of `value` at `path` against `schema`, within `root` (where
/// `$ref`s point).
fn misfit_at(value: &Value, schema: &Value, root: &Value, path: &str) -> Option<String> {
    let Value::Object(schema) = schema else {
        // `true` (or anything but `false`) allows every value.
        return (*schema == Value::Bool(false)).then(|| format!("{} is not allowed", at(path)));
    };
    if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        let defined = reference(root, target)?;
        if let Some(misfit) = misfit_at(value, defined, root, path) {
            return Some(misfit);
        }
    }
    misfit_of_kind(value, schema, path)
        .or_else(|| misfit_of_branches(value, schema, root, path))
        .or_else(|| misfit_of_members(value, schema, root, path))
}

/// The definition `target` (`#/$defs/Name`, `#/definitions/Name`) names.
fn reference<'r>(root: &'r Value, target: &str) -> Option<&'r Value> {
    let (defs, name) = target.strip_prefix("#/")?.split_once('/')?;
    root.get(defs)?.get(name)
}

/// Where `value` is not of the schema's `type`, `enum` or `const`.
fn misfit_of_kind(value: &Value, schema: &Map<String, Value>, path: &str) -> Option<String> {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| is_of(value, t)) {
        return Some(format!(
            "{} is {value}, not {}",
            at(path),
            types.join(" or ")
        ));
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let allowed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Some(format!(
            "{} is {value}, not one of {}",
            at(path),
            allowed.join(", ")
        ));
    }
    match schema.get("const") {
        Some(constant) if constant != value => {
            Some(format!("{} is {value}, not {constant}", at(path)))
        }
        _ => None,
    }
}

/// Whether `value` is of JSON Schema type `kind`.
fn is_of(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value
            .as_f64()
            .is_some_and(|n| value.is_i64() || value.is_u64() || n.fract() == 0.0),
        _ => true,
    }
}

/// Where `value` fits none of `anyOf`'s or `oneOf`'s branches, or not one
/// of `allOf`'s.
fn misfit_of_branches(
    value: &Value,
    schema: &Map<String, Value>,
    root: &Value,
    path: &str,
) -> Option<String> {
    if let Some(Value::Array(all)) = schema.get("allOf")
        && let Some(misfit) = all.iter().find_map(|b| misfit_at(value, b, root, path))
    {
        return Some(misfit);
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(keyword) {
            let misfits: Vec<String> = branches
                .iter()
                .map(|b| misfit_at(value, b, root, path))
                .collect::<Option<_>>()?;
            return Some(misfits.join("; or "));
        }
    }
    None
}

/// Where an object's members or an array's items do not fit.
fn misfit_of_members(
    value: &Value,
    schema: &Map<String, Value>,
    root: &Value,
    path: &str,
) -> Option<String> {
    match value {
        Value::Object(members) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = name.as_str()
                    && !members.contains_key(name)
                {
                    return Some(format!("{} has no `{name}`, which is required", at(path)));
                }
            }
            let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
            members.iter().find_map(|(name, member)| {
                let inner = format!("{path}/{name}");
                match properties.and_then(|p| p.get(name)) {
                    Some(property) => misfit_at(member, property, root, &inner),
                    None if closed => {
                        Some(format!("{} is not a member the schema has", at(&inner)))
                    }
                    None => None,
                }
            })
        }
        Value::Array(items) => {
            let item_schema = schema.get("items")?;
            items
                .iter()
                .enumerate()
                .find_map(|(i, item)| misfit_at(item, item_schema, root, &format!("{path}/{i}")))
        }
        _ => None,
    }
}

/// A place in the result, as a reader finds it.
fn at(path: &str) -> String {
    match path {
        "" => "the result".to_owned(),
        path => format!("`{}`", &path[1..].replace('/', ".")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Python SDK's schema for a function returning a string.
    fn wrapping() -> Value {
        json!({"type": "object", "title": "noteOutput", "required": ["result"],
               "properties": {"result": {"type": "string", "title": "Result"}}})
    }

    #[test]
    fn a_bare_value_is_wrapped_as_the_schema_wraps_it() {
        assert_eq!(
            shaped(json!("moved 7"), &wrapping()),
            Ok(json!({"result": "moved 7"}))
        );
        assert_eq!(
            shaped(json!({"result": "moved 7"}), &wrapping()),
            Ok(json!({"result": "moved 7"}))
        );
        let refused = shaped(json!(7), &wrapping()).expect_err("a number is no string");
        assert!(
            refused.contains("wraps it as {\"result\": ..}"),
            "{refused}"
        );
        assert!(refused.contains("`result` is 7, not string"), "{refused}");
    }

    #[test]
    fn an_object_that_does_not_fit_is_refused_naming_the_field() {
        let receipt = json!({
            "type": "object", "required": ["line", "entry"],
            "properties": {"line": {"type": "integer"}, "entry": {"type": "string"},
                           "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}}},
            "$defs": {"Line": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        });
        assert_eq!(misfit(&json!({"line": 1, "entry": "a"}), &receipt), None);
        let said = |v: Value| shaped(v, &receipt).expect_err("refused");
        assert!(said(json!({"line": "1", "entry": "a"})).contains("`line` is \"1\", not integer"));
        assert!(
            said(json!({"entry": "a"})).contains("the result has no `line`, which is required")
        );
        let nested = said(json!({"line": 1, "entry": "a", "lines": [{"n": 1}, {"n": "x"}]}));
        assert!(
            nested.contains("`lines.1.n` is \"x\", not integer"),
            "{nested}"
        );
        let optional = json!({"anyOf": [{"type": "integer"}, {"type": "null"}]});
        assert_eq!(misfit(&json!(null), &optional), None);
        assert!(misfit(&json!("x"), &optional).is_some_and(|m| m.contains("; or ")));
    }
}
