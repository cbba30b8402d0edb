//! What a call carries beside its tool and arguments: the run it belongs
//! to, the tenant it is made for, an operation key its caller chose, the
//! provider's id of the tool call, and what is told while it waits for a
//! person.

use std::fmt;
use std::time::Duration;

use crate::key::IdemKey;

/// The context of one call: its run (required), and optionally its tenant,
/// an operation key chosen by the caller, and the provider's tool-call id.
///
/// Every method that dispatches a call takes `impl Into<CallContext>`, so a
/// run id alone (`"run-42"`) is a context:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use idem_runtime::{CallContext, Registry};
/// use serde_json::json;
/// let registry = Registry::builder(()).build().expect("registry");
/// // A run id alone ...
/// let _ = registry.call("run-42", "nope", json!({})).await;
/// // ... or everything a call can carry.
/// let context = CallContext::run("run-42")
///     .tenant("acme")
///     .operation_key("msg-7f3a")
///     .tool_call_id("call_1");
/// let _ = registry.call(context, "nope", json!({})).await;
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallContext<'a> {
    pub(crate) run_id: &'a str,
    pub(crate) tenant: Option<&'a str>,
    pub(crate) operation_key: Option<&'a str>,
    pub(crate) tool_call_id: Option<&'a str>,
    pub(crate) on_wait: Option<OnWait<'a>>,
    pub(crate) waits: bool,
    pub(crate) stop_waiting: Option<StopWaiting<'a>>,
}

impl<'a> CallContext<'a> {
    /// A call in run `run_id`: the id of the agent run, the same across its
    /// retries and resumptions, never the id of one tool call.
    pub fn run(run_id: &'a str) -> Self {
        CallContext {
            run_id,
            tenant: None,
            operation_key: None,
            tool_call_id: None,
            on_wait: None,
            waits: true,
            stop_waiting: None,
        }
    }

    /// Made for `tenant` (a customer, a principal): the tenant is part of
    /// every key the call derives, so no two tenants share a record, and
    /// the body sees it as [`Ctx::tenant`](crate::Ctx::tenant).
    pub fn tenant(mut self, tenant: &'a str) -> Self {
        self.tenant = Some(tenant);
        self
    }

    /// An operation key the caller chose (an upstream HTTP
    /// `Idempotency-Key`, a workflow step id, a queue message id): a write
    /// tool's key is derived from it instead of from the arguments (still
    /// within the tenant, scope, tool and version), and every argument not
    /// ignored is then checked, so the same operation key with other
    /// arguments is a [`KeyConflict`](crate::ToolError::KeyConflict).
    /// Read tools ignore it. docs/spec.md, "Explicit keys".
    pub fn operation_key(mut self, key: &'a str) -> Self {
        self.operation_key = Some(key);
        self
    }

    /// The provider's id of this tool call, for logs and traces only: it
    /// changes when the model repeats itself, so it never keys anything.
    /// The provider helpers set it from the call.
    pub fn tool_call_id(mut self, id: &'a str) -> Self {
        self.tool_call_id = Some(id);
        self
    }

    /// Tells `told` what the call waits for when it starts to wait for a
    /// person (a tool's `approval_wait` or `uncertain_wait`), and again
    /// every [`TELL_WAITING_EVERY`] while it waits: to keep a client that
    /// would give up on a silent call alive (an MCP progress
    /// notification), or to show the person's name for it in a UI. It
    /// runs on the call's task: hand off, do not block.
    pub fn on_wait(mut self, told: &'a (dyn Fn(&Waiting<'_>) + Send + Sync)) -> Self {
        self.on_wait = Some(OnWait(told));
        self
    }

    /// Answers at once where the tool would wait for a person: for a
    /// caller that asks the person itself (an MCP client that can put the
    /// question to its user) before it waits.
    pub fn without_waiting(mut self) -> Self {
        self.waits = false;
        self
    }

    /// Stops waiting for a person once `stop` says so (looked at as often
    /// as the record is, a few times a second), answering as the call
    /// would have without a wait: for a client that cancelled the call.
    /// A body that runs is never stopped.
    pub fn stop_waiting_when(mut self, stop: &'a (dyn Fn() -> bool + Send + Sync)) -> Self {
        self.stop_waiting = Some(StopWaiting(stop));
        self
    }

    /// The run id.
    pub fn run_id(&self) -> &'a str {
        self.run_id
    }
}

/// How often a waiting call tells [`CallContext::on_wait`] that it still
/// waits.
pub const TELL_WAITING_EVERY: Duration = Duration::from_secs(10);

/// What a waiting call waits for, as [`CallContext::on_wait`] is told.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Waiting<'a> {
    /// The tool.
    pub tool: &'a str,
    /// The operation's key: what the person decides on.
    pub key: &'a IdemKey,
    /// For what.
    pub reason: WaitReason,
    /// How much longer the call waits at most.
    pub left: Duration,
}

/// For what a call waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitReason {
    /// A person's approval or refusal of the operation.
    Approval,
    /// A person's resolution of its unknown outcome.
    Resolution,
    /// Another call's run of it, approved or resolved while both waited.
    Run,
}

impl Waiting<'_> {
    /// What a person reads of it: `"awaiting approval by a person
    /// (operation KEY)"`.
    pub fn says(&self) -> String {
        let what = match self.reason {
            WaitReason::Approval => "awaiting approval by a person",
            WaitReason::Resolution => "awaiting a person's resolution of an unknown outcome",
            WaitReason::Run => "awaiting the approved run",
        };
        format!("{what} (operation {})", self.key)
    }
}

/// What [`CallContext::on_wait`] keeps: compared by address.
#[derive(Clone, Copy)]
pub(crate) struct OnWait<'a>(pub(crate) &'a (dyn Fn(&Waiting<'_>) + Send + Sync));

impl fmt::Debug for OnWait<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnWait(..)")
    }
}

impl PartialEq for OnWait<'_> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(self.0, other.0)
    }
}

impl Eq for OnWait<'_> {}

/// What [`CallContext::stop_waiting_when`] keeps: compared by address.
#[derive(Clone, Copy)]
pub(crate) struct StopWaiting<'a>(pub(crate) &'a (dyn Fn() -> bool + Send + Sync));

impl fmt::Debug for StopWaiting<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StopWaiting(..)")
    }
}

impl PartialEq for StopWaiting<'_> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(self.0, other.0)
    }
}

impl Eq for StopWaiting<'_> {}

impl<'a> From<&'a str> for CallContext<'a> {
    fn from(run_id: &'a str) -> Self {
        CallContext::run(run_id)
    }
}

impl<'a> From<&'a String> for CallContext<'a> {
    fn from(run_id: &'a String) -> Self {
        CallContext::run(run_id)
    }
}
