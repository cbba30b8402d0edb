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

use redis::{Arg, Cmd};

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

/// One run of a script: which, on which key, how many replicas to wait
/// for, and the command that runs it, which holds the arguments: built
/// once, before the run, so that the caller's arguments need not outlive
/// it.
pub(super) struct ScriptCall<'a> {
    pub(super) script: &'a Script,
    pub(super) key: &'a IdemKey,
    pub(super) wait: Option<(usize, Duration)>,
    /// `verb` with its first argument, the key and the arguments.
    pub(super) cmd: Cmd,
    /// The command's verb: FCALL, EVALSHA or EVAL.
    pub(super) verb: &'static str,
}

impl<'a> ScriptCall<'a> {
    /// `script` over `key` with `args`, run by `verb` (FCALL, EVALSHA,
    /// EVAL) with `first` (the function's name, the script's hash or
    /// body). The command is sized up front: one grown argument by argument
    /// reallocates its buffers several times, on every call's path.
    pub(super) fn new(
        script: &'a Script,
        key: &'a IdemKey,
        args: &[&[u8]],
        wait: Option<(usize, Duration)>,
        (verb, first): (&'static str, &str),
    ) -> Self {
        let size = args.iter().map(|a| a.len()).sum::<usize>();
        let size = size + key.as_str().len() + first.len() + 16;
        let mut cmd = Cmd::with_capacity(args.len() + 4, size);
        cmd.arg(verb).arg(first).arg("1").arg(key.as_str());
        for a in args {
            cmd.arg(*a);
        }
        ScriptCall {
            script,
            key,
            wait,
            cmd,
            verb,
        }
    }

    /// The same run by `verb` with `first`: its key and arguments copied
    /// from the command it had.
    pub(super) fn by(&self, verb: &'static str, first: &str) -> Self {
        // Every argument is simple: a script call has no cursor.
        let args: Vec<&[u8]> = (self.cmd.args_iter().skip(4))
            .filter_map(|arg| match arg {
                Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
            .collect();
        ScriptCall::new(self.script, self.key, &args, self.wait, (verb, first))
    }
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

    /// What a command sends, argument by argument.
    fn sent(cmd: &Cmd) -> Vec<Vec<u8>> {
        (cmd.args_iter())
            .map(|arg| match arg {
                Arg::Simple(bytes) => bytes.to_vec(),
                _ => panic!("a cursor in a script's command"),
            })
            .collect()
    }

    #[test]
    fn a_script_run_another_way_keeps_its_key_and_arguments() {
        let script = &scripts().settle;
        let key = IdemKey::from_raw("idem:k");
        let args: [&[u8]; 4] = [b"a", b"", b"c\xff|d", b"4"];
        let with_head = |verb: &str, first: &str| {
            let head: [&[u8]; 4] = [verb.as_bytes(), first.as_bytes(), b"1", b"idem:k"];
            head.iter()
                .chain(&args)
                .map(|a| a.to_vec())
                .collect::<Vec<_>>()
        };
        let call = ScriptCall::new(script, &key, &args, None, ("FCALL", &script.function));
        assert_eq!(sent(&call.cmd), with_head("FCALL", &script.function));
        let evalsha = call.by("EVALSHA", &script.sha);
        assert_eq!(evalsha.verb, "EVALSHA");
        assert_eq!(sent(&evalsha.cmd), with_head("EVALSHA", &script.sha));
        let eval = evalsha.by("EVAL", &script.body);
        assert_eq!(sent(&eval.cmd), with_head("EVAL", &script.body));
    }
}
