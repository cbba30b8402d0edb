//! The approval stage: a write tool whose operation needs a person's
//! approval claims its key as any other, and then, unless the claim used
//! up an approval of these very arguments, records the operation as
//! awaiting one and answers `ToolError::ApprovalRequired`, running
//! nothing. The approval itself is the registry's (`registry/decide.rs`).

use std::future::Future;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use super::hold::Hold;
use super::settings::{ApprovalHook, CallOrigin, ToolSettings};
use super::trace::{How, note};
use crate::ctx::Ctx;
use crate::error::ToolError;
use crate::seal::PayloadKind;
use crate::store::{About, ApprovalAsked, ApprovalRequest, Outcome};
use crate::tool::{Approval, OnUncertain, WriteTool};

/// Whether this call of `tool` needs a person's approval before it runs;
/// the call's context is made (`ctx`) only for a tool whose function
/// decides, so that no other call, replays included, pays for it.
pub(super) fn needed<S, T: WriteTool<S>>(
    tool: &T,
    approval: Approval,
    args: &T::Args,
    ctx: impl FnOnce() -> Ctx<S>,
) -> bool {
    match approval {
        Approval::Never => false,
        Approval::Decided => tool.needs_approval(args, &ctx()),
        // `Required`, and any way of asking a later version adds.
        _ => true,
    }
}

/// Whether a claim that needs an approval must ask for one: unless it used
/// one up, or took over a lapsed claim (which ran under an approval) under
/// a policy that never runs an uncertain operation again unasked
/// (`refuse`, `verify`: the uncertain stage decides). Under `rerun` a
/// lapsed claim asks again: one approval allows one run.
pub(super) fn must_ask(approved: bool, taken_over: bool, policy: OnUncertain) -> bool {
    let uncertain_stage_decides = taken_over && policy != OnUncertain::Rerun;
    !(approved || uncertain_stage_decides)
}

/// Records the held operation as awaiting a person's approval (its note
/// says so, and the call's tenant; sealed like an error), kept for the
/// tool's TTL, tells `hook` what the operation is, and answers that it
/// waits. Nothing runs. A store error leaves the claim to lapse with its
/// lease, and is the answer.
/// (What the hook is told is made before anything is awaited, so that the
/// call's future does not hold the arguments.)
pub(super) fn ask<'a, A: Serialize>(
    hold: &'a Hold<'a>,
    hook: Option<&'a ApprovalHook>,
    caller: CallOrigin<'a>,
    args: &A,
) -> impl Future<Output = Result<Value, ToolError>> + Send + 'a {
    let told = hook.map(|hook| (hook, plain_about(hold.settings(), caller, args)));
    asked(hold, told, caller)
}

/// [`ask`], once what the hook is told is made.
async fn asked(
    hold: &Hold<'_>,
    hook: Option<(&ApprovalHook, About)>,
    caller: CallOrigin<'_>,
) -> Result<Value, ToolError> {
    let (tool, key, tenant, trace) = (hold.tool(), hold.key(), caller.tenant, caller.trace);
    let settings = hold.settings();
    let ttl = settings.ttl;
    let asking = ApprovalAsked::for_tool(tool, tenant).with_terms(settings.approval_window, ttl);
    let request = hold.sealed(PayloadKind::Error, asking.to_payload());
    let asked = Outcome::Awaiting {
        request: &request,
        ttl,
    };
    if let Err(source) = hold.settle(asked).await {
        tracing::warn!(tool, key = %key, error = %source, "asking for approval failed; nothing ran");
        return Err(ToolError::Store {
            tool: tool.to_owned(),
            source,
        });
    }
    note(trace, How::AwaitingApproval);
    tracing::info!(tool, key = %key, "waits for a person's approval; nothing ran");
    #[cfg(feature = "notify")]
    hold.tell(crate::notify::EventKind::ApprovalRequested, |event| {
        event.with("approval_window_secs", settings.approval_window.as_secs())
    });
    if let Some((hook, about)) = hook {
        let request = ApprovalRequest {
            tool: tool.to_owned(),
            key: key.clone(),
            about,
        };
        let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&request)));
        if told.is_err() {
            tracing::error!(tool, key = %key, "the approval hook panicked; the request is recorded all the same");
        }
    }
    Err(ToolError::ApprovalRequired {
        tool: tool.to_owned(),
        key: key.clone(),
        since: SystemTime::now(),
        window: settings.approval_window,
    })
}

/// What the operation is, as the approval hook is told: the call's tenant
/// and run and the typed arguments, the tool's hidden fields replaced.
/// Never sealed: the hook runs in the application.
fn plain_about<A: Serialize>(settings: &ToolSettings, caller: CallOrigin<'_>, args: &A) -> About {
    let mut arguments = serde_json::to_value(args).unwrap_or_default();
    settings.roles.hide(&mut arguments);
    About::new(caller.tenant, Some(caller.run_id), arguments)
}
