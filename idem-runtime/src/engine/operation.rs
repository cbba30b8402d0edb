//! An operation's identity: a write tool's typed arguments, and the key and
//! fingerprint derived from them (never from the attempt).

use serde_json::{Map, Value};

use super::about::about_text;
use super::args::parse_keyed_args;
use super::checked::{Checked, CheckedPath, Learnt};
use super::roles::member;
use super::settings::{CallOrigin, ToolSettings};
use crate::canonical::{write_typed, write_value};
use crate::error::ToolError;
use crate::key::{IdemKey, Scope, write_explicit};
use crate::tool::{Roles, WriteTool};

/// Parses a write tool's arguments (as a given schema reads them:
/// defaults filled in, scalars written as strings read as its types) and
/// derives the operation's key and fingerprint from the typed arguments,
/// re-serialized, with the sets among
/// them (`sets`, from the tool's schema) in canonical order and the field
/// roles applied (docs/spec.md, "Keys" and "Field roles"): ignored fields
/// count for nothing, checked ones for the fingerprint only. A call that
/// carries its own operation key (`caller.operation_key`) is keyed on it,
/// and every argument not ignored is checked.
pub(crate) fn operation<'a, S, T: WriteTool<S>>(
    name: &str,
    settings: &ToolSettings,
    learnt: &'a Learnt,
    namespace: Option<&str>,
    caller: CallOrigin<'_>,
    mut args: Value,
) -> Result<Operation<'a, T::Args>, ToolError> {
    if let Some(given) = &learnt.given {
        given.read(&mut args);
    }
    let args: T::Args = parse_keyed_args(name, args, settings.args)?;
    let head = KeyHead {
        tenant: caller.tenant,
        scope: Scope::of(settings.scope, caller.run_id),
        tool: name,
        version: settings.version,
    };
    let roles = &settings.roles;
    let sets = learnt.sets.as_ref();
    let mut about = None;
    let (digest, checked) = if roles.all_keyed() && sets.is_none() && caller.operation_key.is_none()
    {
        // The common case: every argument keyed, straight from the typed
        // arguments; the key's digest fingerprints them too. The record's
        // about is written around their text while it is at hand, unless a
        // field must be hidden there.
        let keep = !roles.hides();
        let digest = head.digest(|out| {
            let start = out.len();
            write_typed(out, &args)?;
            if keep {
                about = about_text(caller.tenant, Some(caller.run_id), &out[start..]).ok();
            }
            Ok(())
        })?;
        (digest, Checked::digest(digest))
    } else {
        let mut value = serde_json::to_value(&args).map_err(|e| head.unserializable(e))?;
        if let Some(sets) = sets {
            sets.order(&mut value);
        }
        roles.drop_ignored(&mut value);
        let by_operation_key = caller.operation_key.is_some();
        let paths = learnt.checked_paths(by_operation_key);
        identity(&head, &value, roles, paths, caller.operation_key)?
    };
    Ok(Operation {
        args,
        key: IdemKey::from_digest(namespace, &digest),
        checked,
        about,
    })
}

/// A write call's operation: its typed arguments, key and fingerprint.
pub(crate) struct Operation<'a, A> {
    pub(crate) args: A,
    pub(crate) key: IdemKey,
    pub(crate) checked: Checked<'a>,
    /// The record's about, unsealed, when the key was hashed from all the
    /// arguments and none is hidden (the common case): written around
    /// their canonical text, so that they are written once a call.
    pub(crate) about: Option<String>,
}

/// What every key of one call is derived under: its tenant, scope, tool
/// and version.
struct KeyHead<'a> {
    tenant: Option<&'a str>,
    scope: Scope<'a>,
    tool: &'a str,
    version: u32,
}

impl KeyHead<'_> {
    /// The key digest of what `write` appends.
    fn digest(
        &self,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), serde_json::Error>,
    ) -> Result<[u8; 32], ToolError> {
        IdemKey::digest_with(self.tenant, self.scope, self.tool, self.version, write)
            .map_err(|e| self.unserializable(e))
    }

    /// The key digest of `value`'s canonical JSON.
    fn digest_value(&self, value: &Value) -> Result<[u8; 32], ToolError> {
        self.digest(|out| {
            write_value(out, value);
            Ok(())
        })
    }

    fn unserializable(&self, e: serde_json::Error) -> ToolError {
        ToolError::InvalidArgs {
            tool: self.tool.to_owned(),
            message: format!("the arguments could not be re-serialized to derive the key: {e}"),
        }
    }
}

/// The key digest and fingerprint of `value`, the typed arguments without
/// their ignored fields, keyed on the caller's `operation_key` if there is
/// one.
fn identity<'p>(
    head: &KeyHead<'_>,
    value: &Value,
    roles: &Roles,
    paths: &'p [CheckedPath],
    operation_key: Option<&str>,
) -> Result<([u8; 32], Checked<'p>), ToolError> {
    let checked = |digest: [u8; 32]| {
        let by_operation_key = operation_key.is_some();
        let fields = Checked::of(&digest, value, roles, paths, by_operation_key);
        (digest, fields)
    };
    if let Some(operation_key) = operation_key {
        // The caller's key stands for the arguments, under a payload no
        // arguments can have; every argument is checked.
        let digest = head.digest(|out| {
            write_explicit(out, operation_key);
            Ok(())
        })?;
        return Ok(checked(digest));
    }
    match (roles.key, value) {
        // Keyed on the named fields, by their paths; the rest checked.
        (Some(fields), Value::Object(map)) => {
            let subset: Map<String, Value> = fields
                .iter()
                .filter_map(|f| member(map, f).map(|v| ((*f).to_owned(), v.clone())))
                .collect();
            Ok(checked(head.digest_value(&Value::Object(subset))?))
        }
        // Keyed on all but the checked fields.
        _ if roles.check.is_some() => {
            let mut keyed = value.clone();
            roles.drop_checked(&mut keyed);
            Ok(checked(head.digest_value(&keyed)?))
        }
        // Keyed on everything left: the key's digest fingerprints it too.
        _ => {
            let digest = head.digest_value(value)?;
            Ok((digest, Checked::digest(digest)))
        }
    }
}
