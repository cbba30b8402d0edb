//! What every schema dialect's walk shares: the path of a field for error
//! messages, and what a `type` keyword allows.

use serde_json::Value;

/// The path of `name` inside the field at `path` (`.` is the root; `[]`
/// names an array's items): `lines[].sku`.
pub(super) fn join(path: &str, name: &str) -> String {
    if path == "." {
        name.to_owned()
    } else if name == "[]" {
        format!("{path}[]")
    } else {
        format!("{path}.{name}")
    }
}

/// Whether a `type` keyword (one name or a list) allows `name`.
pub(super) fn type_includes(t: &Value, name: &str) -> bool {
    match t {
        Value::String(s) => s == name,
        Value::Array(a) => a.iter().any(|v| v.as_str() == Some(name)),
        _ => false,
    }
}
