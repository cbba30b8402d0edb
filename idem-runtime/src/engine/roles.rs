//! Field roles: which of a write tool's arguments make its key (keyed, the
//! default), which a duplicate must only match (checked), and which count
//! for neither (ignored) (docs/spec.md, "Field roles"). Checked at
//! registration against the tool's schema, by the rules `idem-rules` writes
//! down for the macros too; applied to the typed arguments, re-serialized.

use serde_json::{Map, Value};

use crate::error::RegistryError;
use crate::schema;
use crate::tool::Roles;

impl Roles {
    /// Whether every field is keyed (no list given).
    pub(crate) fn all_keyed(&self) -> bool {
        self.key.is_none() && self.check.is_none() && self.ignore.is_none()
    }

    /// Checks the roles against `schema`, the tool's input schema: each
    /// path is an argument, and `idem_rules::check_roles` holds.
    pub(crate) fn validate(&self, tool: &str, schema: &Value) -> Result<(), RegistryError> {
        let invalid = |message: String| RegistryError::InvalidSetting {
            tool: tool.to_owned(),
            message,
        };
        let arguments: Vec<&str> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut first = None;
        idem_rules::check_roles(
            self.key,
            self.check,
            self.ignore,
            Some(&arguments),
            |fault| {
                first.get_or_insert(fault.to_string());
            },
        );
        if let Some(message) = first {
            return Err(invalid(message));
        }
        let lists = [
            ("key", self.key),
            ("check", self.check),
            ("ignore", self.ignore),
            ("hide", self.hide),
        ];
        for (list, fields) in lists {
            for field in fields.unwrap_or_default() {
                if let Some(problem) = schema::path_problem(schema, field) {
                    return Err(invalid(format!("`{list}` names `{field}`: {problem}")));
                }
            }
        }
        Ok(())
    }

    /// Removes the ignored fields from `value`, the typed arguments.
    pub(crate) fn drop_ignored(&self, value: &mut Value) {
        remove_all(value, self.ignore);
    }

    /// Whether any field is hidden.
    pub(crate) fn hides(&self) -> bool {
        self.hide.is_some_and(|fields| !fields.is_empty())
    }

    /// Replaces the hidden fields of `value`, the typed arguments, with
    /// `"(hidden)"`, for the record's readable view.
    pub(crate) fn hide(&self, value: &mut Value) {
        if let Value::Object(map) = value {
            for field in self.hide.unwrap_or_default() {
                if let Some(hidden) = member_mut(map, field) {
                    *hidden = Value::String(HIDDEN.to_owned());
                }
            }
        }
    }

    /// Removes the checked fields from `value`, leaving what is keyed when
    /// `check` is given.
    pub(crate) fn drop_checked(&self, value: &mut Value) {
        remove_all(value, self.check);
    }

    /// The paths of the checked fields a call can have, by the tool's
    /// input `schema`: with `check`, its paths; with `key`, every member
    /// neither keyed nor ignored, at the shallowest depth that holds no
    /// keyed path; for a call keyed on a caller's operation key
    /// (`by_operation_key`), every member not ignored; in path order. A
    /// member the schema does not list (a map's) is found in the value
    /// itself ([`checked_members`](Self::checked_members)).
    pub(crate) fn checked_paths(&self, schema: &Value, by_operation_key: bool) -> Vec<String> {
        if let (Some(check), false) = (self.check, by_operation_key) {
            let mut paths: Vec<String> = check.iter().map(|p| (*p).to_owned()).collect();
            paths.sort();
            return paths;
        }
        let keys = if by_operation_key { None } else { self.key };
        let split = Split {
            keys: keys.unwrap_or_default(),
            ignored: self.ignore.unwrap_or_default(),
        };
        let mut paths = Vec::new();
        let mut pending = vec![String::new()];
        while let Some(prefix) = pending.pop() {
            for name in schema::members_at(schema, &prefix) {
                let path = joined(&prefix, &name);
                match split.of(&path) {
                    Part::Skipped => {}
                    Part::HoldsAKey => pending.push(path),
                    Part::Checked => paths.push(path),
                }
            }
        }
        paths.sort();
        paths
    }

    /// Calls `found` with each checked member of `map`, the typed
    /// arguments (their ignored fields dropped), as the value holds them:
    /// with `key`, every member not keyed, at the shallowest depth that
    /// holds no keyed path; for a call keyed on a caller's operation key,
    /// every member; with `check`, none (its paths are all there is). This
    /// finds the members a schema does not list (a map's) beside
    /// [`checked_paths`](Self::checked_paths).
    pub(crate) fn checked_members<'v>(
        &self,
        map: &'v Map<String, Value>,
        by_operation_key: bool,
        mut found: impl FnMut(&str, &'v Value),
    ) {
        if self.check.is_some() && !by_operation_key {
            return;
        }
        let keys = if by_operation_key { None } else { self.key };
        let split = Split {
            keys: keys.unwrap_or_default(),
            ignored: &[],
        };
        split.members(map, &mut String::new(), &mut found);
    }
}

/// How the key paths split the members of the arguments.
struct Split<'r> {
    keys: &'r [&'r str],
    ignored: &'r [&'r str],
}

/// What a member is to a [`Split`].
enum Part {
    /// Keyed or ignored whole: not checked.
    Skipped,
    /// An object some key path goes into: its members are looked at.
    HoldsAKey,
    /// Checked whole.
    Checked,
}

impl Split<'_> {
    fn of(&self, path: &str) -> Part {
        if self.keys.contains(&path) || self.ignored.contains(&path) {
            return Part::Skipped;
        }
        let inside = |k: &&str| {
            k.strip_prefix(path)
                .is_some_and(|rest| rest.starts_with('.'))
        };
        match self.keys.iter().any(inside) {
            true => Part::HoldsAKey,
            false => Part::Checked,
        }
    }

    /// Calls `found` with the checked members of `map`, which stands at
    /// `path` (a buffer, left as it was found).
    fn members<'v>(
        &self,
        map: &'v Map<String, Value>,
        path: &mut String,
        found: &mut impl FnMut(&str, &'v Value),
    ) {
        for (name, value) in map {
            let at = path.len();
            if at > 0 {
                path.push('.');
            }
            path.push_str(name);
            match (self.of(path), value) {
                (Part::Checked, _) => found(path, value),
                (Part::HoldsAKey, Value::Object(inner)) => self.members(inner, path, found),
                // A keyed path under what is not an object is in the key
                // as absent: another value here is another key.
                (Part::HoldsAKey | Part::Skipped, _) => {}
            }
            path.truncate(at);
        }
    }
}

/// `prefix.name`, or `name` at the top.
fn joined(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

fn remove_all(value: &mut Value, fields: Option<&[&str]>) {
    if let Value::Object(map) = value {
        for field in fields.unwrap_or_default() {
            remove_path(map, field);
        }
    }
}

/// The value `field` names in the arguments `map`: a member, or, for a
/// dotted path (`order.id`) that is not itself a member's name, the member
/// reached through nested objects. `None` when absent.
pub(crate) fn member<'a>(map: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    if let Some(value) = map.get(field) {
        return Some(value);
    }
    let mut segments = field.split('.');
    let mut value = map.get(segments.next()?)?;
    for segment in segments {
        value = value.as_object()?.get(segment)?;
    }
    Some(value)
}

/// What a hidden field shows in a record's view of its arguments.
pub(crate) const HIDDEN: &str = "(hidden)";

/// The value `field` names in `map`, as [`member`] finds it, to change.
fn member_mut<'a>(map: &'a mut Map<String, Value>, field: &str) -> Option<&'a mut Value> {
    if map.contains_key(field) {
        return map.get_mut(field);
    }
    let mut segments = field.split('.');
    let mut value = map.get_mut(segments.next()?)?;
    for segment in segments {
        value = value.as_object_mut()?.get_mut(segment)?;
    }
    Some(value)
}

/// Removes what `field` names (as [`member`] finds it), if it is there.
fn remove_path(map: &mut Map<String, Value>, field: &str) {
    if map.remove(field).is_some() {
        return;
    }
    let Some((parent, last)) = field.rsplit_once('.') else {
        return;
    };
    let mut current = map;
    for segment in parent.split('.') {
        match current.get_mut(segment) {
            Some(Value::Object(next)) => current = next,
            _ => return,
        }
    }
    current.remove(last);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ignored_and_checked_fields_are_removed_at_any_depth() {
        let roles = Roles {
            key: None,
            check: Some(&["order.note"]),
            ignore: Some(&["reason", "order.meta.trace", "absent.x"]),
            hide: None,
        };
        let mut value = json!({
            "amount": 1, "reason": "r",
            "order": {"id": 7, "note": "n", "meta": {"trace": "t", "kept": 1}},
        });
        roles.drop_ignored(&mut value);
        assert_eq!(
            value,
            json!({"amount": 1, "order": {"id": 7, "note": "n", "meta": {"kept": 1}}})
        );
        roles.drop_checked(&mut value);
        assert_eq!(
            value,
            json!({"amount": 1, "order": {"id": 7, "meta": {"kept": 1}}})
        );
    }
}
