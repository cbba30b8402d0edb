//! The operation's about: what its record says of it for operators (an
//! [`About`](crate::store::About): tenant, run and arguments), written
//! once a call. Most often written around the arguments' canonical text
//! while the key is derived from it (`operation`), else from the typed
//! arguments here.

use super::hold::Site;
use super::settings::CallOrigin;
use crate::key::IdemKey;
use crate::seal::{PayloadKind, seal};

/// What the operation's record says of it, for operators: an [`About`](crate::store::About)
/// of the call's tenant and run and the typed arguments as JSON (defaults
/// filled in), the tool's hidden fields replaced; sealed like a result
/// when the registry encrypts results. `None` if the arguments do not
/// serialize (the key could not have been derived either). This is every
/// write call's path, replays included: the text is the one `written`
/// around the arguments' canonical text as the key was hashed where there
/// is one (the same value, its members in canonical order), else written
/// from the typed arguments.
pub(super) fn about<A: serde::Serialize>(
    site: &Site<'_>,
    key: &IdemKey,
    caller: CallOrigin<'_>,
    args: &A,
    written: Option<String>,
) -> Option<String> {
    /// `About`'s JSON, borrowing what it holds.
    #[derive(serde::Serialize)]
    struct Of<'a, T> {
        tenant: Option<&'a str>,
        run: Option<&'a str>,
        arguments: &'a T,
    }
    let (tenant, run) = (caller.tenant, Some(caller.run_id));
    let text = if let Some(text) = written {
        Ok(text)
    } else if site.settings.roles.hides() {
        let mut arguments = serde_json::to_value(args).ok()?;
        site.settings.roles.hide(&mut arguments);
        serde_json::to_string(&Of {
            tenant,
            run,
            arguments: &arguments,
        })
    } else {
        serde_json::to_string(&Of {
            tenant,
            run,
            arguments: args,
        })
    };
    Some(seal(site.result_keys, key, PayloadKind::About, text.ok()?))
}

/// `About`'s JSON around arguments already written as JSON.
pub(super) fn about_text(
    tenant: Option<&str>,
    run: Option<&str>,
    arguments: &[u8],
) -> Result<String, serde_json::Error> {
    let names = |s: Option<&str>| s.map_or(4, |s| s.len() + 2);
    let mut out = Vec::with_capacity(40 + names(tenant) + names(run) + arguments.len());
    out.extend_from_slice(b"{\"tenant\":");
    serde_json::to_writer(&mut out, &tenant)?;
    out.extend_from_slice(b",\"run\":");
    serde_json::to_writer(&mut out, &run)?;
    out.extend_from_slice(b",\"arguments\":");
    out.extend_from_slice(arguments);
    out.push(b'}');
    String::from_utf8(out).map_err(serde::ser::Error::custom)
}
