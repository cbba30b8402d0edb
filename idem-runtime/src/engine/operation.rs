//! An operation's identity: a write tool's typed arguments, and the key and
//! fingerprint derived from them (never from the attempt).

use serde_json::{Map, Value};

use super::args::parse_args;
use super::settings::Resolved;
use crate::canonical::write_typed;
use crate::error::ToolError;
use crate::key::{Fingerprint, IdemKey};
use crate::tool::WriteTool;

/// Parses a write tool's arguments and derives the operation's key and
/// fingerprint from the typed arguments, re-serialized.
pub(crate) fn operation<S, T: WriteTool<S>>(
    name: &str,
    cfg: &Resolved,
    namespace: Option<&str>,
    run_id: &str,
    args: Value,
) -> Result<(T::Args, IdemKey, Fingerprint), ToolError> {
    let args: T::Args = parse_args(name, args, true)?;
    let unserializable = |e: serde_json::Error| ToolError::InvalidArgs {
        tool: name.to_owned(),
        message: format!("the arguments could not be re-serialized to derive the key: {e}"),
    };
    let scope = cfg.scope.with_run(run_id);
    // Keyed on a subset of the arguments (registration checked that they
    // are an object): the key from the subset, the fingerprint from all.
    let subset = match cfg.key_fields {
        Some(fields) => match serde_json::to_value(&args).map_err(unserializable)? {
            Value::Object(map) => Some((fields, map)),
            _ => None,
        },
        None => None,
    };
    let (key, fingerprint) = match subset {
        Some((fields, map)) => {
            let subset: Map<String, Value> = fields
                .iter()
                .filter_map(|f| map.get(*f).map(|v| ((*f).to_owned(), v.clone())))
                .collect();
            let key = IdemKey::derive(scope, name, cfg.version, &Value::Object(subset));
            (key, Fingerprint::of(&Value::Object(map)))
        }
        // Keyed on every argument: the key's digest fingerprints them too.
        None => {
            let digest =
                IdemKey::digest_with(scope, name, cfg.version, |out| write_typed(out, &args))
                    .map_err(unserializable)?;
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
