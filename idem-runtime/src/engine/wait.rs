//! Waiting for a person: a call of an operation that awaits approval (or
//! whose outcome is unknown, under a policy that leaves it to a person)
//! waits, up to the tool's `approval_wait` (`uncertain_wait`), for the
//! decision, which may be made in another process: the call learns of it
//! from the store, and is then made again, answering as the decision
//! says (approved: the body runs once; refused: the denial; resolved: the
//! result given). A duplicate that comes while one call waits waits too;
//! of those woken by an approval one runs the body and the others wait
//! for its result, within the same wait; so does one that comes while the
//! approved body runs. A wait holds nothing (no claim,
//! no lease): a call dropped or a process killed while it waits leaves
//! the operation as it was.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::checked::Learnt;
use super::settings::{CallOrigin, Shared, ToolSettings};
use super::task::bounded;
use super::write::call_write;
use crate::error::ToolError;
use crate::key::IdemKey;
use crate::registry::{OnWait, StopWaiting, TELL_WAITING_EVERY, WaitReason, Waiting};
use crate::store::Entry;
use crate::tool::WriteTool;

/// How often a waiting call looks at the record first, and at most,
/// when no announcement wakes it sooner: a decision is seen within the
/// longer (plus a store round trip) even where none is carried.
const FIRST_LOOK: Duration = Duration::from_millis(25);
const LOOK_AT_MOST_EVERY: Duration = Duration::from_millis(250);

/// Whether a call of a tool with `settings` from `caller` may wait for a
/// person's decision: the tool's settings say so and the caller waits.
/// The registry calls [`call_write`] itself otherwise, whose future is the
/// smaller.
pub(crate) fn may_wait(settings: &ToolSettings, caller: CallOrigin<'_>) -> bool {
    caller.waits && !(settings.approval_wait.is_zero() && settings.uncertain_wait.is_zero())
}

/// [`call_write`], waiting for a person's decision where the tool's
/// settings say so ([`may_wait`]).
pub(crate) async fn call_write_waiting<S, T: WriteTool<S>>(
    tool: &T,
    name: &str,
    settings: &ToolSettings,
    learnt: &Learnt,
    shared: &Shared<S>,
    caller: CallOrigin<'_>,
    args: Value,
) -> Result<Value, ToolError> {
    if !may_wait(settings, caller) {
        return call_write(tool, name, settings, learnt, shared, caller, args).await;
    }
    // Set by the first answer that waits; a wait never outlives it.
    let mut deadline: Option<Instant> = None;
    loop {
        let answer = call_write(tool, name, settings, learnt, shared, caller, args.clone()).await;
        let Some((key, seen, wait)) = waits_on(&answer, settings, deadline.is_some()) else {
            return answer;
        };
        let until = *deadline.get_or_insert_with(|| {
            tracing::info!(tool = name, key = %key, wait = ?wait, "waits for a person's decision");
            Instant::now() + wait
        });
        let told = |left: Duration| {
            if let Some(OnWait(told)) = caller.on_wait {
                let reason = match seen {
                    Seen::Awaiting => WaitReason::Approval,
                    Seen::Unknown => WaitReason::Resolution,
                    Seen::Running => WaitReason::Run,
                };
                let (tool, key) = (name, &key);
                told(&Waiting {
                    tool,
                    key,
                    reason,
                    left,
                });
            }
        };
        let stopped = || caller.stop_waiting.is_some_and(|StopWaiting(stop)| stop());
        match changed(shared, &key, seen, until, (told, stopped)).await {
            Waited::Changed => {}
            Waited::TimeUp => {
                tracing::info!(tool = name, key = %key, "no decision within the wait");
                return answer;
            }
            Waited::Stopped => {
                tracing::info!(tool = name, key = %key, "the caller stopped waiting; the operation is as it was");
                return answer;
            }
        }
    }
}

/// How a wait ended.
enum Waited {
    /// The record changed: the call is made again.
    Changed,
    /// The wait's time was up first.
    TimeUp,
    /// The caller stopped it (`stop_waiting_when`).
    Stopped,
}

/// What a record looks like to a waiting call: the variant of its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Awaiting,
    Unknown,
    Running,
}

/// The key and state `answer` waits on, and for how long at most, when it
/// is one a call waits out: an operation awaiting approval (with an
/// approval wait), an unknown outcome (with an uncertain wait), and an
/// operation another call runs, once waiting or where the tool waits for
/// approvals (a duplicate that comes as the approved body runs).
fn waits_on(
    answer: &Result<Value, ToolError>,
    settings: &ToolSettings,
    waiting: bool,
) -> Option<(IdemKey, Seen, Duration)> {
    let (key, seen, wait) = match answer {
        Err(ToolError::ApprovalRequired { key, .. }) => {
            (key.clone(), Seen::Awaiting, settings.approval_wait)
        }
        Err(ToolError::OutcomeUnknown { key, .. }) => (
            IdemKey::from_raw(key.as_str()),
            Seen::Unknown,
            settings.uncertain_wait,
        ),
        Err(ToolError::InFlight { key, .. }) => (
            IdemKey::from_raw(key.as_str()),
            Seen::Running,
            settings.approval_wait,
        ),
        _ => return None,
    };
    (waiting || !wait.is_zero()).then_some((key, seen, wait))
}

/// Whether the record under `key` changes from `seen` before `until`
/// ([`Waited`]):
/// looked at when the store announces a change of it
/// ([`IdemStore::watch`](crate::IdemStore::watch)), and now and then
/// anyway, more rarely as the wait goes on; `told` is
/// told how long is left at the start and every [`TELL_WAITING_EVERY`];
/// the wait ends, unchanged, once `stopped` says so. A store error is
/// logged and looked past: the wait goes on.
async fn changed<S>(
    shared: &Shared<S>,
    key: &IdemKey,
    seen: Seen,
    until: Instant,
    (told, stopped): (impl Fn(Duration), impl Fn() -> bool),
) -> Waited {
    let mut every = FIRST_LOOK;
    let mut tell_at = Instant::now();
    loop {
        let now = Instant::now();
        if stopped() {
            return Waited::Stopped;
        }
        if now >= until {
            return Waited::TimeUp;
        }
        if now >= tell_at {
            told(until - now);
            tell_at = now + TELL_WAITING_EVERY;
        }
        shared.store.watch(key, every.min(until - now)).await;
        // A caller that stopped while this slept is not run for: the
        // decision that woke it is for the next call.
        if stopped() {
            return Waited::Stopped;
        }
        every = (every * 2).min(LOOK_AT_MOST_EVERY);
        let looked = bounded(
            &shared.store_meta,
            shared.store_timeout,
            "get",
            shared.store.get(key),
        );
        match looked.await {
            Ok(entry) => {
                let now = match entry {
                    Some(Entry::Awaiting { .. }) => Some(Seen::Awaiting),
                    Some(Entry::Unknown { .. }) => Some(Seen::Unknown),
                    Some(Entry::Running { .. }) => Some(Seen::Running),
                    _ => None,
                };
                if now != Some(seen) {
                    return Waited::Changed;
                }
            }
            Err(e) => {
                tracing::warn!(key = %key, error = %e, "could not look at the record a call waits on; still waiting");
            }
        }
    }
}
