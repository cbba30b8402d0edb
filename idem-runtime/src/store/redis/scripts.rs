//! The Lua scripts of [`RedisStore`](super::RedisStore), each in a file of
//! its own under `scripts/` (every one preceded by `prelude.lua`, which
//! reads and writes a record), and the two ways they are run: as the
//! functions of one library (`FCALL`, Redis 7.0 and later), or as scripts
//! (`EVALSHA`, then `EVAL` when the node lacks the script).
//!
//! Functions are the cheaper way: in the server, a unique call counted
//! 63.1k instructions with them against 67.1k with scripts (BENCHMARKS.md,
//! "The cost of a call on both sides of the wire"), a settle being most of
//! the server's work per call. The library's name carries a hash of its
//! code, so that workers of two idem versions sharing a server each find
//! their own.
//!
//! The prelude names [`CLAIM_RETENTION`], the retention of a record whose
//! format does not say its own, as `@CLAIM_RETENTION_MS@`: the constant is
//! written into it here, so that it is defined once.

use std::sync::OnceLock;
use std::time::Duration;

use redis::Cmd;

use crate::key::IdemKey;
use crate::store::CLAIM_RETENTION;

/// One script: its body for `EVAL`, its SHA-1 for `EVALSHA`, and its name
/// as a function of the library ([`Scripts::library`]).
pub(super) struct Script {
    pub(super) body: String,
    pub(super) sha: String,
    pub(super) function: String,
}

/// The scripts, by what they do.
pub(super) struct Scripts {
    /// KEYS[1]; ARGV: fingerprint, token, lease ms, the claim's retention
    /// ms, tool, the format to write, about. Returns `{'acquired',
    /// attempt}` (and `'lapsed'` when taken over), `{'running', fp,
    /// attempt}`, `{'done', fp, result}`, `{'failed', fp, error}` or
    /// `{'unknown', fp, reason, attempt, age}`.
    pub(super) claim: Script,
    /// KEYS[1]; ARGV: token, op (`done`, `failed`, `released`, `unknown`
    /// or `renew`), the payload (result, error, or lease ms) or the whole
    /// settled record, ms to keep the record (unused by renew, which keeps
    /// the record's retention), the format to write, and the length of the
    /// settled record's head (`0` when ARGV[3] is the payload alone).
    /// Returns `ok` or `lost`.
    pub(super) settle: Script,
    /// KEYS[1]. Returns nil (a released record too), or what CLAIM returns
    /// for a record it does not take.
    pub(super) get: Script,
    /// KEYS[1]; ARGV: `1` to answer the payload. Returns nil or `{state,
    /// fp, attempt, token, tool, age ms, lease ms, pttl, payload, about}`
    /// (`inspect.lua` says more).
    pub(super) inspect: Script,
    /// The code of `FUNCTION LOAD`: the prelude once, then each script as
    /// a function `idem_<hash>_<what>` of the library `idem_<hash>`.
    pub(super) library: String,
}

const PRELUDE: &str = include_str!("scripts/prelude.lua");

/// The scripts' files, by name, and whether each only reads.
const FILES: [(&str, &str, bool); 4] = [
    ("claim", include_str!("scripts/claim.lua"), false),
    ("settle", include_str!("scripts/settle.lua"), false),
    ("get", include_str!("scripts/get.lua"), true),
    ("inspect", include_str!("scripts/inspect.lua"), true),
];

/// The scripts, built once.
pub(super) fn scripts() -> &'static Scripts {
    static SCRIPTS: OnceLock<Scripts> = OnceLock::new();
    SCRIPTS.get_or_init(build)
}

fn build() -> Scripts {
    let prelude = PRELUDE.replace(
        "@CLAIM_RETENTION_MS@",
        &CLAIM_RETENTION.as_millis().to_string(),
    );
    // The library is named by what it runs: the hash of every script.
    let all: String = FILES.iter().map(|(_, body, _)| *body).collect();
    let name = format!("idem_{}", &sha1(&format!("{prelude}{all}"))[..16]);
    let mut library = format!("#!lua name={name}\n{prelude}\n");
    let [claim, settle, get, inspect] = FILES.map(|(what, body, reads)| {
        let function = format!("{name}_{what}");
        // A function is given the keys and arguments as parameters; named
        // as a script's globals, the same body runs both ways. One that
        // writes is refused up front by a server at its `maxmemory` (a
        // script, only at its first write); one declared `no-writes` runs
        // there, so that a full store still answers what it holds.
        let flags = if reads { "'no-writes'" } else { "" };
        library.push_str(&format!(
            "redis.register_function{{function_name = '{function}', flags = {{{flags}}},\n\
             callback = function(KEYS, ARGV)\n{body}\nend}}\n"
        ));
        let body = format!("{prelude}\n{body}");
        Script {
            sha: sha1(&body),
            body,
            function,
        }
    });
    Scripts {
        claim,
        settle,
        get,
        inspect,
        library,
    }
}

fn sha1(text: &str) -> String {
    redis::Script::new(text).get_hash().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_holds_every_script_under_a_name_of_its_code() {
        let s = scripts();
        let name = s.library.lines().next().unwrap();
        assert!(name.starts_with("#!lua name=idem_"), "{name}");
        for script in [&s.claim, &s.settle, &s.get, &s.inspect] {
            assert!(script.function.starts_with(&name["#!lua name=".len()..]));
            assert!(
                s.library
                    .contains(&format!("function_name = '{}'", script.function))
            );
            assert_eq!(script.sha, sha1(&script.body));
        }
        assert!(
            !s.library.contains('@') && s.library.contains("CLAIM_RETENTION = 3600000"),
            "the prelude's constant is written in"
        );
    }
}

/// One run of a script: which, on which key, with which arguments, and
/// how many replicas to wait for.
#[derive(Clone, Copy)]
pub(super) struct ScriptCall<'a> {
    pub(super) script: &'a Script,
    pub(super) key: &'a IdemKey,
    pub(super) args: &'a [&'a [u8]],
    pub(super) wait: Option<(usize, Duration)>,
}

impl ScriptCall<'_> {
    /// The command that runs it: `verb` (FCALL, EVALSHA, EVAL) with
    /// `first` (the function's name, the script's hash or body). Sized up
    /// front: a command grown argument by argument reallocates its buffers
    /// several times, on every call's path.
    pub(super) fn command(&self, verb: &str, first: &str) -> Cmd {
        let size = self.args.iter().map(|a| a.len()).sum::<usize>();
        let size = size + self.key.as_str().len() + first.len() + 16;
        let mut cmd = redis::Cmd::with_capacity(self.args.len() + 4, size);
        cmd.arg(verb).arg(first).arg(1).arg(self.key.as_str());
        for a in self.args {
            cmd.arg(*a);
        }
        cmd
    }
}
