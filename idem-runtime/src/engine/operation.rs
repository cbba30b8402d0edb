//! An operation's identity: a write tool's typed arguments, and the key and
//! fingerprint derived from them (never from the attempt).

use serde_json::{Map, Value};

use super::args::parse_keyed_args;
use super::sets::Sets;
use super::settings::{Caller, Resolved};
use crate::canonical::{write_typed, write_value};
use crate::error::ToolError;
use crate::key::{Fingerprint, IdemKey};
use crate::tool::WriteTool;

/// Parses a write tool's arguments and derives the operation's key and
/// fingerprint from the typed arguments, re-serialized, with the sets among
/// them (`sets`, from the tool's schema) in canonical order.
pub(crate) fn operation<S, T: WriteTool<S>>(
    name: &str,
    cfg: &Resolved,
    sets: Option<&Sets>,
    namespace: Option<&str>,
    caller: Caller<'_>,
    args: Value,
) -> Result<(T::Args, IdemKey, Fingerprint), ToolError> {
    let args: T::Args = parse_keyed_args(name, args, cfg.args)?;
    let unserializable = |e: serde_json::Error| ToolError::InvalidArgs {
        tool: name.to_owned(),
        message: format!("the arguments could not be re-serialized to derive the key: {e}"),
    };
    let scope = cfg.scope.with_run(caller.run_id);
    // Keyed on a subset of the arguments (registration checked that they
    // are an object), or holding sets: through a `Value`.
    let value = if cfg.key_fields.is_some() || sets.is_some() {
        let mut value = serde_json::to_value(&args).map_err(unserializable)?;
        if let Some(sets) = sets {
            sets.order(&mut value);
        }
        Some(value)
    } else {
        None
    };
    let digest_of = |write: &dyn Fn(&mut Vec<u8>) -> Result<(), serde_json::Error>| {
        IdemKey::digest_with(caller.tenant, scope, name, cfg.version, write).map_err(unserializable)
    };
    let (key, fingerprint) = match (cfg.key_fields, value) {
        // The key from the subset, the fingerprint from all.
        (Some(fields), Some(Value::Object(map))) => {
            let subset: Map<String, Value> = fields
                .iter()
                .filter_map(|f| key_field(&map, f).map(|v| ((*f).to_owned(), v.clone())))
                .collect();
            let subset = Value::Object(subset);
            let digest = digest_of(&|out| {
                write_value(out, &subset);
                Ok(())
            })?;
            (
                IdemKey::from_digest(&digest),
                Fingerprint::of(&Value::Object(map)),
            )
        }
        // Keyed on every argument: the key's digest fingerprints them too.
        (_, value) => {
            let digest = digest_of(&|out| match &value {
                Some(value) => {
                    write_value(out, value);
                    Ok(())
                }
                None => write_typed(out, &args),
            })?;
            (
                IdemKey::from_digest(&digest),
                Fingerprint::from_bytes(digest),
            )
        }
    };
    let key = match namespace {
        Some(ns) => key.with_namespace(ns),
        None => key,
    };
    Ok((args, key, fingerprint))
}

/// The value key field `field` names in the arguments `map`: a member, or,
/// for a dotted path (`order.id`) that is not itself a member's name, the
/// member reached through nested objects. `None` when absent.
fn key_field<'a>(map: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
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
