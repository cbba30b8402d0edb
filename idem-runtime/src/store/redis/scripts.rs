//! The Lua scripts of [`RedisStore`](super::RedisStore), each in a file of
//! its own under `scripts/` (every one prefixed with `prelude.lua`, which
//! reads and writes a record), and how they are sent: EVALSHA, then EVAL
//! when the node lacks the script.

use std::sync::OnceLock;

/// A Lua script and its SHA-1, run with EVALSHA and, on `NOSCRIPT`, with
/// EVAL (which also loads it on that node, so this works per cluster shard).
pub(super) struct Script {
    pub(super) body: String,
    pub(super) sha: String,
}

impl Script {
    fn new(body: &str) -> Script {
        let body = format!("{}\n{body}", include_str!("scripts/prelude.lua"));
        let sha = redis::Script::new(&body).get_hash().to_owned();
        Script { body, sha }
    }
}

/// The scripts, by what they do.
pub(super) struct Scripts {
    /// KEYS[1]; ARGV: fingerprint, token, lease ms, retention ms, tool,
    /// the format to write. Returns
    /// `{'acquired', attempt}`, `{'running', fp, attempt}`, `{'done', fp,
    /// result}` or `{'failed', fp, error}`.
    pub(super) claim: Script,
    /// KEYS[1]; ARGV: token, op (`done`, `failed`, `released` or `renew`),
    /// payload (result, error, or lease ms), ms to keep the record (for
    /// renew: the retention after the lease), the format to write, the
    /// running record the claim wrote and the settled record without its
    /// payload (both empty when unknown). Returns `ok` or `lost`.
    pub(super) settle: Script,
    /// KEYS[1]. Returns nil (a released record too), or what CLAIM returns
    /// for a record it does not take.
    pub(super) get: Script,
    /// KEYS[1]; ARGV: retention ms, `1` to answer the payload. Returns nil
    /// or `{state, fp, attempt, token, tool, age ms, lease ms, pttl,
    /// payload}` (`inspect.lua` says more).
    pub(super) inspect: Script,
}

/// The scripts, built once.
pub(super) fn scripts() -> &'static Scripts {
    static SCRIPTS: OnceLock<Scripts> = OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        claim: Script::new(include_str!("scripts/claim.lua")),
        settle: Script::new(include_str!("scripts/settle.lua")),
        get: Script::new(include_str!("scripts/get.lua")),
        inspect: Script::new(include_str!("scripts/inspect.lua")),
    })
}
