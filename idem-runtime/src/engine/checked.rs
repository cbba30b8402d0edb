//! What a duplicate must match beyond its key: the fingerprint of its
//! checked arguments, with a tag per checked field, and the paths of those
//! fields, so that a conflict names the fields that differ (docs/spec.md,
//! "Field roles"); and what the registry learns from a write tool's schema
//! for it.

use std::borrow::Cow;

use serde_json::Value;

use super::given::GivenSchema;
use super::roles::member;
use super::sets::Sets;
use crate::key::{Fingerprint, MAX_FIELD_TAGS, path_tag, tag_of, value_tag};
use crate::tool::Roles;

/// What the registry learns from a write tool's input schema when it is
/// built, for every call: where the arguments hold sets, and the checked
/// fields a call can have.
pub(crate) struct Learnt {
    pub(crate) sets: Option<Sets>,
    /// How arguments read by a schema given with the tool (defaults,
    /// scalars written as strings); a typed tool's are read by serde.
    pub(crate) given: Option<GivenSchema>,
    /// The tool's output schema, if its info gives one: kept in the note
    /// of an unknown outcome, for whoever resolves it.
    pub(crate) output_schema: Option<Value>,
    /// The checked fields of a call keyed by the roles.
    by_roles: Vec<CheckedPath>,
    /// The checked fields of a call keyed on a caller's operation key.
    by_operation_key: Vec<CheckedPath>,
}

/// A checked field's path, with the half of its tag that the path alone
/// makes, hashed once.
pub(crate) struct CheckedPath {
    path: String,
    tag: [u8; 4],
}

impl Learnt {
    /// What `schema` says; `given`: the schema was given with the tool
    /// (`ToolInfo::with_input_schema`), not derived from its `Args`.
    pub(crate) fn of(schema: &Value, roles: &Roles, given: bool) -> Learnt {
        let paths = |by_operation_key| {
            let paths = roles.checked_paths(schema, by_operation_key);
            let tag = |path: String| CheckedPath {
                tag: path_tag(&path),
                path,
            };
            paths.into_iter().map(tag).collect()
        };
        Learnt {
            sets: Sets::of(schema),
            given: given.then(|| GivenSchema::of(schema)).flatten(),
            output_schema: None,
            by_roles: paths(false),
            by_operation_key: paths(true),
        }
    }

    /// The checked fields the schema gives, in path order.
    pub(crate) fn checked_paths(&self, by_operation_key: bool) -> &[CheckedPath] {
        match by_operation_key {
            true => &self.by_operation_key,
            false => &self.by_roles,
        }
    }
}

/// What a duplicate must match: the fingerprint a claim stores, and the
/// paths of the checked fields its tags stand for, in their order
/// (borrowed from the tool's [`Learnt`] paths but for a member only the
/// value showed).
pub(crate) struct Checked<'p> {
    pub(crate) fingerprint: Fingerprint,
    fields: Vec<Cow<'p, str>>,
}

impl<'p> Checked<'p> {
    /// A fingerprint with no field tags: the key's own digest.
    pub(crate) fn digest(digest: [u8; 32]) -> Checked<'p> {
        Checked {
            fingerprint: Fingerprint::from_digest(digest),
            fields: Vec::new(),
        }
    }

    /// The fingerprint of `value` under the key digest `key`, with a tag
    /// for each of its checked fields: the `paths` the schema gives, and
    /// the members only the value shows (`roles`).
    pub(crate) fn of(
        key: &[u8; 32],
        value: &Value,
        roles: &Roles,
        paths: &'p [CheckedPath],
        by_operation_key: bool,
    ) -> Checked<'p> {
        let fingerprint = Fingerprint::of(value);
        let Value::Object(map) = value else {
            return Checked {
                fingerprint,
                fields: Vec::new(),
            };
        };
        let mut fields: Vec<(Cow<'p, str>, [u8; 4], Option<&Value>)> = paths
            .iter()
            .map(|p| (Cow::Borrowed(p.path.as_str()), p.tag, member(map, &p.path)))
            .collect();
        roles.checked_members(map, by_operation_key, |path, value| {
            let listed = paths.binary_search_by(|p| p.path.as_str().cmp(path));
            if listed.is_err() {
                fields.push((Cow::Owned(path.to_owned()), path_tag(path), Some(value)));
            }
        });
        // Already in order unless the value showed a member of its own.
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        fields.truncate(MAX_FIELD_TAGS);
        let tags = fields
            .iter()
            .map(|(path, half, v)| tag_of(*half, value_tag(key, path, *v)))
            .collect();
        Checked {
            fingerprint: fingerprint.with_fields(tags),
            fields: fields.into_iter().map(|(path, ..)| path).collect(),
        }
    }

    /// The paths of the checked fields whose values differ from those of
    /// the operation `stored` fingerprints; empty when that cannot be told
    /// (a record written without field tags).
    pub(crate) fn differing(&self, stored: &Fingerprint) -> Vec<String> {
        self.fingerprint
            .differing_fields(stored)
            .into_iter()
            .filter_map(|i| self.fields.get(i).map(|path| path.to_string()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What differs between a call with `now` and one with `stored`, both
    /// keyed on `id` under one key, `note` and `when` the schema's other
    /// members.
    fn differing(stored: Value, now: Value) -> Vec<String> {
        let roles = Roles {
            key: Some(&["id"]),
            check: None,
            ignore: None,
            hide: None,
        };
        let schema = json!({"type": "object", "properties": {
            "id": {"type": "integer"}, "note": {"type": "string"}, "when": {"type": "string"},
        }});
        let learnt = Learnt::of(&schema, &roles, false);
        let key = [9; 32];
        let paths = learnt.checked_paths(false);
        let stored = Checked::of(&key, &stored, &roles, paths, false).fingerprint;
        Checked::of(&key, &now, &roles, paths, false).differing(&stored)
    }

    #[test]
    fn a_conflict_names_listed_absent_and_unlisted_members() {
        let first = json!({"id": 1, "note": "a"});
        assert_eq!(
            differing(first.clone(), json!({"id": 1, "note": "b"})),
            ["note"]
        );
        // Listed by the schema, absent from the first call.
        let when = json!({"id": 1, "note": "a", "when": "now"});
        assert_eq!(differing(first.clone(), when.clone()), ["when"]);
        assert_eq!(differing(when, first.clone()), ["when"]);
        // A member the schema does not list (a flattened map's) is found
        // in the value: named when it is new, not when it went away (the
        // call at hand has no name for it).
        let extra = json!({"id": 1, "note": "a", "extra": 5});
        assert_eq!(differing(first.clone(), extra.clone()), ["extra"]);
        assert!(differing(extra, first.clone()).is_empty());
        assert!(differing(first.clone(), first).is_empty());
    }
}
