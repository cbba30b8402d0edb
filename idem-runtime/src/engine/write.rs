//! A write tool's call, in the three stages a reader follows: claim the
//! operation's key or replay what it holds (`claim`), run the body beside
//! the heartbeat that keeps the lease (`hold`), record the outcome
//! (`record`).

use serde_json::Value;

use super::about::about;
use super::approval;
use super::checked::Checked;
use super::checked::Learnt;
use super::claim::{Claimed, claim_or_replay};
use super::hold::{Hold, Site};
use super::operation::{Operation, operation};
use super::read::unrecorded;
use super::settings::{CallOrigin, Shared, ToolSettings};
use super::settle::settle;
use super::task::{beside, catch_panic};
use super::trace::{CallTrace, How, note};
use super::uncertain::{self, Next, Why, copy_for_verify};
use crate::ctx::{Ctx, Lease, WriteCtx};
use crate::error::{StoreError, ToolError};
use crate::key::IdemKey;
use crate::tool::{OnStoreError, OnUncertain, WriteTool};

/// Runs a write tool through the idempotent wrapper: claim or replay, run
/// once beside the heartbeat, record the outcome (the guide's "What a
/// write tool guarantees", `idem::guide::stores`).
pub(crate) async fn call_write<S, T: WriteTool<S>>(
    tool: &T,
    name: &str,
    settings: &ToolSettings,
    learnt: &Learnt,
    shared: &Shared<S>,
    caller: CallOrigin<'_>,
    args: Value,
) -> Result<Value, ToolError> {
    let namespace = shared.namespace.as_deref();
    let Operation {
        args,
        key,
        checked,
        about: written,
    } = operation::<S, T>(name, settings, learnt, namespace, caller, args)?;
    let call_ctx = || Ctx::new(caller.run_id, caller.tenant, shared.state.clone());
    let needs_approval = approval::needed(tool, settings.approval, &args, call_ctx);
    if let Some(trace) = caller.trace {
        trace.key(&key);
    }
    let site = site(shared, settings, learnt, name, caller);
    let about = about(&site, &key, caller, &args, written);
    let about = about.as_deref();
    #[cfg(feature = "notify")]
    let site = Site { about, ..site };
    let mut claimed = claim_or_replay::<T::Output>(&site, &key, &checked, about).await;
    if settings.on_store_error == OnStoreError::Run {
        claimed = match claimed {
            Err(ToolError::Store { source, .. }) if source.is_retryable() => {
                confirm_unreachable::<T::Output>(&site, &key, &checked, about, &source).await
            }
            other => other,
        };
    }
    let taken = match claimed {
        Ok(Claimed::Acquired(taken)) => taken,
        Ok(Claimed::Answered(answer)) => return answer,
        // A tool that needs approval never runs without a claim
        // (`check_settings`).
        Err(ToolError::Store { source, .. })
            if settings.on_store_error == OnStoreError::Run && source.is_unreachable() =>
        {
            return run_unclaimed(tool, name, shared, caller, key, args, &source).await;
        }
        Err(e) => return Err(e),
    };
    let (attempt, approved) = (taken.token.attempt(), taken.approved);
    tracing::debug!(tool = name, key = %key, attempt, "claim acquired");
    if let Some(trace) = caller.trace {
        trace.attempt(attempt);
    }
    // The context owns the key from here; the hold borrows it back.
    let lease = std::sync::Arc::new(Lease::default());
    let ctx = WriteCtx::new(call_ctx(), key, attempt, lease.clone());
    let hold = Hold::new(site, ctx.idem_key(), taken.token, taken.sent, lease);
    if needs_approval && approval::must_ask(approved, taken.taken_over, settings.on_uncertain) {
        return approval::ask(&hold, shared.on_approval_requested.as_ref(), caller, &args).await;
    }
    let work = async {
        if taken.taken_over {
            let policy = settings.on_uncertain;
            let copy = copy_for_verify(policy, &args);
            let why = (policy, Why::Lapsed);
            let next = uncertain::decide(tool, &hold, copy, &ctx, why, caller.trace);
            if let Next::Answer(answer) = next.await {
                return answer;
            }
        }
        let how = if approved { How::RanApproved } else { How::Ran };
        note(caller.trace, how);
        run_and_record(tool, &hold, args, &ctx, settings.on_uncertain, caller.trace).await
    };
    beside(work, hold.heartbeat()).await
}

/// Where the call of tool `name` works: the registry's store and the
/// tool's settings.
fn site<'a, S>(
    shared: &'a Shared<S>,
    settings: &'a ToolSettings,
    learnt: &'a Learnt,
    name: &'a str,
    caller: CallOrigin<'a>,
) -> Site<'a> {
    Site {
        store: &*shared.store,
        settings,
        limit: shared.store_timeout,
        tool: name,
        output_schema: learnt.output_schema.as_ref(),
        result_keys: shared.result_keys.as_deref(),
        meta: &shared.store_meta,
        trace: caller.trace,
        #[cfg(feature = "notify")]
        about: None,
        #[cfg(feature = "notify")]
        notifier: shared.notifier.as_ref(),
    }
}

/// Runs the body and records what it did; an error its tool says leaves
/// the outcome unknown goes to the tool's policy instead. A tool that
/// verifies keeps a copy of the arguments for it.
async fn run_and_record<S, T: WriteTool<S>>(
    tool: &T,
    hold: &Hold<'_>,
    args: T::Args,
    ctx: &WriteCtx<S>,
    policy: OnUncertain,
    trace: Option<&CallTrace<'_>>,
) -> Result<Value, ToolError> {
    let copy = copy_for_verify(policy, &args);
    let outcome = catch_panic(tool.call(args, ctx)).await;
    match outcome {
        Ok(Err(e)) if tool.is_uncertain(&e) => {
            let error = e.to_string();
            uncertain::after_error(tool, hold, copy, ctx, (policy, &error), trace).await
        }
        outcome => settle(tool, hold, outcome).await,
    }
}

/// For a tool with [`OnStoreError::Run`] whose claim failed with `first`
/// (a timeout, or a connection that failed): claims once more, given
/// twice the store timeout, over a new connection (a store retires the
/// connection of an operation that went unanswered). A timeout is no
/// proof that the store is unreachable (a lock wait, a slow answer, one
/// dead connection among live ones): only this second claim's
/// [`StoreError::Unavailable`], the store saying it cannot be reached, lets
/// the body run unclaimed; anything else it answers stands, a recorded
/// result replayed among them.
async fn confirm_unreachable<O: serde::de::DeserializeOwned>(
    site: &Site<'_>,
    key: &IdemKey,
    checked: &Checked<'_>,
    about: Option<&str>,
    first: &StoreError,
) -> Result<Claimed, ToolError> {
    tracing::info!(tool = site.tool, key = %key, error = %first, "claim failed; trying once more to tell a store that cannot be reached from a slow one");
    let patient = Site {
        limit: site.limit.saturating_mul(2),
        ..*site
    };
    claim_or_replay::<O>(&patient, key, checked, about).await
}

/// Runs the body without a claim, for a tool with
/// [`OnStoreError::Run`] whose store could not be reached: loudly, and
/// recording nothing.
async fn run_unclaimed<S, T: WriteTool<S>>(
    tool: &T,
    name: &str,
    shared: &Shared<S>,
    caller: CallOrigin<'_>,
    key: IdemKey,
    args: T::Args,
    cause: &StoreError,
) -> Result<Value, ToolError> {
    note(caller.trace, How::RanWithoutClaim);
    tracing::warn!(
        tool = name,
        key = %key,
        error = %cause,
        "the store is unreachable: running WITHOUT a claim (on_store_error = run); \
         nothing will be recorded and a duplicate may run it again"
    );
    let ctx = WriteCtx::unclaimed(
        Ctx::new(caller.run_id, caller.tenant, shared.state.clone()),
        key,
    );
    let outcome = catch_panic(tool.call(args, &ctx)).await;
    unrecorded(name, outcome, |e| tool.is_permanent(e))
}
