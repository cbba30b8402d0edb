//! How a [`RedisStore`] runs one of its [`scripts`](super::scripts): as a
//! function of idem's library while the server takes them, else by
//! `EVALSHA`, then `EVAL` when the node lacks the script; each waiting for
//! replicas as the store is told to.

use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::{ErrorKind, RedisError, ServerErrorKind, Value as RValue};

use super::RedisStore;
use super::error::{function_missing, refuses_functions, script_error, store_error};
use super::scripts::{Script, ScriptCall, scripts};
use crate::error::StoreError;
use crate::key::IdemKey;

/// How a [`RedisStore`] runs its scripts.
impl RedisStore {
    /// Runs `script` over `key` (see [`scripts`]): as a function while the
    /// server takes them, else EVALSHA, then EVAL if the node lacks it.
    /// Returns the reply and how many replicas acknowledged it (see
    /// [`write`](Self::write)).
    pub(super) fn eval<'a>(
        &'a self,
        script: &'a Script,
        key: &'a IdemKey,
        args: &[&[u8]],
    ) -> impl Future<Output = Result<(RValue, usize), StoreError>> + Send + use<'a> {
        self.eval_waiting(script, key, args, self.wait)
    }

    /// [`eval`](Self::eval), waiting for replicas as `wait` says.
    ///
    /// The arguments are copied into the command before this returns, and
    /// the future it returns does not borrow them: a caller's future need
    /// not keep them, nor the buffers they are read from, while it waits.
    /// This is every settle's path, whose future is allocated on each.
    /// Only the usual path is in that future: what follows a refusal, and
    /// EVALSHA, are boxed, since their futures would enlarge every call's.
    /// (An `async` block, not an `async fn`, which would hold the command
    /// twice: as its argument and as its local.)
    pub(super) fn eval_waiting<'a>(
        &'a self,
        script: &'a Script,
        key: &'a IdemKey,
        args: &[&[u8]],
        wait: Option<(usize, Duration)>,
    ) -> impl Future<Output = Result<(RValue, usize), StoreError>> + Send + use<'a> {
        let call = ScriptCall::new(script, key, args, wait, self.invocation(script));
        async move {
            if call.verb == "FCALL" {
                return match self.write(&call.cmd, call.wait).await {
                    Err(e)
                        if function_missing(&e)
                            || refuses_functions(&e)
                            || !self.functions.load(Ordering::Relaxed) =>
                    {
                        Box::pin(self.eval_after_refusal(call, e)).await
                    }
                    sent => sent.map_err(|e| script_error(call.key, e)),
                };
            }
            Box::pin(self.eval_by_sha(call)).await
        }
    }

    /// `call`, sent by FCALL, failed with `e`: sent again once the library
    /// is loaded again (a server restarted without its data, a failover to
    /// a node that never had the library, a `FUNCTION FLUSH`), or,
    /// functions refused, the script run by EVALSHA.
    pub(super) async fn eval_after_refusal(
        &self,
        call: ScriptCall<'_>,
        e: RedisError,
    ) -> Result<(RValue, usize), StoreError> {
        let mut sent = Err(e);
        if matches!(&sent, Err(e) if function_missing(e))
            && self.load_library().await.map_err(store_error)?
        {
            sent = self.write(&call.cmd, call.wait).await;
        }
        match sent {
            Err(e) if refuses_functions(&e) => self.stop_functions(&e),
            // The library could not be loaded again: functions are
            // stopped, and this call runs by EVALSHA below.
            Err(_) if !self.functions.load(Ordering::Relaxed) => {}
            sent => return sent.map_err(|e| script_error(call.key, e)),
        }
        self.eval_by_sha(call).await
    }

    /// The script run by EVALSHA, or by EVAL when the server lacks it.
    pub(super) async fn eval_by_sha(
        &self,
        call: ScriptCall<'_>,
    ) -> Result<(RValue, usize), StoreError> {
        let script = call.script;
        let call = match call.verb {
            "EVALSHA" => call,
            _ => call.by("EVALSHA", &script.sha),
        };
        let sent = match self.write(&call.cmd, call.wait).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let eval = call.by("EVAL", &script.body);
                self.write(&eval.cmd, call.wait).await
            }
            other => other,
        };
        sent.map_err(|e| script_error(call.key, e))
    }

    /// Loads the scripts' library (on a cluster, on every primary).
    /// `Ok(false)` when the server does not take it (before Redis 7.0, a
    /// user whose ACL refuses `FUNCTION LOAD`, or any other error reply: a
    /// server that cannot compile it): scripts are then run by EVALSHA
    /// from now on. A failure to reach the server is an error.
    pub(super) async fn load_library(&self) -> Result<bool, RedisError> {
        let mut load = redis::cmd("FUNCTION");
        // REPLACE: loading is the same on every node whether or not it
        // has the library (a cluster answers for all primaries at once).
        load.arg("LOAD").arg("REPLACE").arg(&scripts().library);
        match self.query::<RValue>(&load).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.code(), Some("ERR" | "NOPERM")) => {
                self.stop_functions(&e);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Runs scripts by EVALSHA for good, the server having refused
    /// functions with `e`.
    pub(super) fn stop_functions(&self, e: &RedisError) {
        if self.functions.swap(false, Ordering::Relaxed) {
            tracing::debug!(error = %e, "Redis refuses functions; running idem's scripts by EVALSHA");
        }
    }

    /// The verb and first argument that run `script`: `FCALL` and its
    /// function, or `EVALSHA` and its SHA-1.
    pub(super) fn invocation<'s>(&self, script: &'s Script) -> (&'static str, &'s str) {
        if self.functions.load(Ordering::Relaxed) {
            ("FCALL", &script.function)
        } else {
            ("EVALSHA", &script.sha)
        }
    }
}
