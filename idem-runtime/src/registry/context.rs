//! What a call carries beside its tool and arguments: the run it belongs
//! to, the tenant it is made for, an operation key its caller chose, and
//! the provider's id of the tool call.

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

    /// The run id.
    pub fn run_id(&self) -> &'a str {
        self.run_id
    }
}

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
