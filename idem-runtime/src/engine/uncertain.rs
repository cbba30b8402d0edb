//! An operation whose outcome is uncertain: a claim taken over from one
//! that lapsed before it recorded anything, or a body that failed with an
//! error its tool says leaves the outcome unknown. The tool's
//! [`OnUncertain`] policy decides: run (again), ask the downstream
//! (`verify`), or refuse and leave the record unknown for an operator.

use serde_json::Value;

use super::hold::Hold;
use super::settle::{settle_done, settle_failed, settle_unknown};
use super::task::catch_panic;
use super::trace::{CallTrace, How, note};
use crate::ctx::WriteCtx;
use crate::error::ToolError;
use crate::tool::{OnUncertain, Verified, WriteTool};

/// What the call does next.
pub(super) enum Next {
    /// Run the body.
    Run,
    /// Answer the caller with this; the body does not run.
    Answer(Result<Value, ToolError>),
}

/// Where an uncertain outcome came from, for the record and the logs.
#[derive(Clone, Copy)]
pub(super) enum Why<'a> {
    /// The claim of the attempt before this one lapsed.
    Lapsed,
    /// The body failed with this error, which leaves the outcome unknown.
    Error(&'a str),
}

impl Why<'_> {
    /// The reason an unknown record keeps.
    fn reason(self, attempt: u32, verify_said: Option<&str>) -> String {
        let why = match self {
            Why::Lapsed => format!(
                "the claim of attempt {} lapsed before it recorded an outcome (its worker crashed, hung, or lost the store for longer than its lease): its side effect may or may not have happened",
                attempt.saturating_sub(1)
            ),
            Why::Error(error) => format!(
                "attempt {attempt} failed with an error that leaves its outcome unknown: {error}"
            ),
        };
        match verify_said {
            Some(said) => format!("{why}; {said}"),
            None => why,
        }
    }
}

/// A copy of a call's arguments for `verify`, when `policy` verifies (the
/// body gets the original): a round trip through JSON, which the arguments
/// make anyway for their key. `None` under the other policies, or if the
/// round trip fails (`verify` then cannot be asked, which it reports).
pub(super) fn copy_for_verify<A>(policy: OnUncertain, args: &A) -> Option<A>
where
    A: serde::Serialize + serde::de::DeserializeOwned,
{
    if policy != OnUncertain::Verify {
        return None;
    }
    serde_json::to_value(args)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// An uncertain outcome (`why`), under `policy`: run (again), verify first,
/// or refuse and leave the record unknown. `args` are a copy of the
/// call's, for `verify`.
pub(super) async fn decide<S, T: WriteTool<S>>(
    tool: &T,
    hold: &Hold<'_>,
    args: Option<T::Args>,
    ctx: &WriteCtx<S>,
    (policy, why): (OnUncertain, Why<'_>),
    trace: Option<&CallTrace<'_>>,
) -> Next {
    let (name, key, attempt) = (hold.tool(), hold.key(), hold.token().attempt());
    match policy {
        OnUncertain::Refuse => {
            let reason = why.reason(attempt, None);
            Next::Answer(Err(settle_unknown(hold, ctx.tenant(), &reason).await))
        }
        OnUncertain::Verify => verify(tool, hold, args, ctx, why, trace).await,
        _ => {
            if let Why::Lapsed = why {
                tracing::warn!(tool = name, key = %key, attempt, "an earlier attempt's claim lapsed before it recorded an outcome, which may or may not have taken effect; running again (on_uncertain = rerun)");
            }
            Next::Run
        }
    }
}

/// After the body failed with `error`, which leaves the outcome unknown:
/// what [`decide`] says, where running again means a transient failure
/// (the key released for a retry).
pub(super) async fn after_error<S, T: WriteTool<S>>(
    tool: &T,
    hold: &Hold<'_>,
    args: Option<T::Args>,
    ctx: &WriteCtx<S>,
    (policy, error): (OnUncertain, &str),
    trace: Option<&CallTrace<'_>>,
) -> Result<Value, ToolError> {
    let message = hold.storable_error(error);
    let why = Why::Error(&message);
    match decide(tool, hold, args, ctx, (policy, why), trace).await {
        Next::Answer(answer) => answer,
        Next::Run => Err(settle_failed(hold, &message, false).await),
    }
}

/// Asks the downstream (`verify`, with `args`, a copy of the call's) under
/// the hold: records the result it says happened, runs the body if nothing
/// did, leaves the record unknown if it cannot tell; if it cannot be asked,
/// settles nothing, so that the claim lapses and the next duplicate asks
/// again.
async fn verify<S, T: WriteTool<S>>(
    tool: &T,
    hold: &Hold<'_>,
    args: Option<T::Args>,
    ctx: &WriteCtx<S>,
    why: Why<'_>,
    trace: Option<&CallTrace<'_>>,
) -> Next {
    let (name, key, attempt) = (hold.tool(), hold.key(), hold.token().attempt());
    let said = match args {
        Some(args) => catch_panic(tool.verify(args, ctx))
            .await
            .unwrap_or_else(|panic| Err(format!("verify panicked: {panic}"))),
        None => Err("the arguments could not be copied for verify".to_owned()),
    };
    match said {
        Ok(Verified::Done(out)) => match serde_json::to_value(&out) {
            Ok(value) => {
                tracing::info!(tool = name, key = %key, attempt, "verified: the operation took effect; its result is recorded and the body does not run");
                note(trace, How::Verified);
                Next::Answer(settle_done(hold, value).await)
            }
            // It happened, but what it gave cannot be recorded: left
            // unknown for an operator, who can record it by hand, rather
            // than run again or asked again forever.
            Err(e) => {
                let said = format!(
                    "verify said it took effect, but its result could not be serialized ({e})"
                );
                let reason = why.reason(attempt, Some(&said));
                Next::Answer(Err(settle_unknown(hold, ctx.tenant(), &reason).await))
            }
        },
        Ok(Verified::NotDone) => {
            tracing::info!(tool = name, key = %key, attempt, "verified: the operation did not take effect");
            Next::Run
        }
        Ok(Verified::Unknown) => {
            let reason = why.reason(
                attempt,
                Some("verify could not tell whether it took effect"),
            );
            Next::Answer(Err(settle_unknown(hold, ctx.tenant(), &reason).await))
        }
        Err(e) => {
            tracing::warn!(tool = name, key = %key, attempt, "verify failed; the claim is left to lapse, and the next duplicate verifies again");
            tracing::debug!(tool = name, key = %key, error = %e, "why verify failed");
            Next::Answer(Err(ToolError::Failed {
                tool: name.to_owned(),
                message: format!(
                    "could not check whether an earlier attempt took effect ({e}); try again later"
                ),
                permanent: false,
            }))
        }
    }
}
