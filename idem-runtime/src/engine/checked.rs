//! What a duplicate must match beyond its key: the fingerprint of its
//! checked arguments, with a tag per checked field, and the paths of those
//! fields, so that a conflict names the fields that differ (docs/spec.md,
//! "Field roles"); and what the registry learns from a write tool's schema
//! for it.

use serde_json::Value;

use super::sets::Sets;
use crate::key::{Fingerprint, MAX_FIELD_TAGS, field_tag};
use crate::tool::Roles;

/// What the registry learns from a write tool's input schema when it is
/// built, for every call: where the arguments hold sets, and the paths of
/// the checked fields a call can have.
pub(crate) struct Learnt {
    pub(crate) sets: Option<Sets>,
    /// For calls keyed by the roles, then for calls keyed on a caller's
    /// operation key.
    checked: [Vec<String>; 2],
}

impl Learnt {
    pub(crate) fn of(schema: &Value, roles: &Roles) -> Learnt {
        Learnt {
            sets: Sets::of(schema),
            checked: [
                roles.checked_paths(schema, false),
                roles.checked_paths(schema, true),
            ],
        }
    }

    /// The checked fields' paths, by the schema.
    pub(crate) fn checked_paths(&self, by_operation_key: bool) -> &[String] {
        &self.checked[usize::from(by_operation_key)]
    }
}

/// What a duplicate must match: the fingerprint a claim stores, and the
/// paths of the checked fields its tags stand for, in their order.
pub(crate) struct Checked {
    pub(crate) fingerprint: Fingerprint,
    fields: Vec<String>,
}

impl Checked {
    /// A fingerprint with no field tags: the key's own digest.
    pub(crate) fn digest(digest: [u8; 32]) -> Checked {
        Checked {
            fingerprint: Fingerprint::from_digest(digest),
            fields: Vec::new(),
        }
    }

    /// The fingerprint of `value` under the key digest `key`, with a tag
    /// for each of its checked fields (`roles`; `paths` from the schema).
    pub(crate) fn of(
        key: &[u8; 32],
        value: &Value,
        roles: &Roles,
        paths: &[String],
        by_operation_key: bool,
    ) -> Checked {
        let mut fields = roles.checked_fields(value, paths, by_operation_key);
        fields.truncate(MAX_FIELD_TAGS);
        let tags = fields
            .iter()
            .map(|(path, v)| field_tag(key, path, *v))
            .collect();
        Checked {
            fingerprint: Fingerprint::of(value).with_fields(tags),
            fields: fields.into_iter().map(|(path, _)| path).collect(),
        }
    }

    /// The paths of the checked fields whose values differ from those of
    /// the operation `stored` fingerprints; empty when that cannot be told
    /// (a record written without field tags).
    pub(crate) fn differing(&self, stored: &Fingerprint) -> Vec<String> {
        self.fingerprint
            .differing_fields(stored)
            .into_iter()
            .filter_map(|i| self.fields.get(i).cloned())
            .collect()
    }
}
