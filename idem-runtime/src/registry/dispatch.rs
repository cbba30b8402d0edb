//! The built registry: tools by name, their definitions rendered for each
//! provider, and dispatch of a call to its tool.

use std::sync::Arc;

use serde_json::Value;

use super::context::CallContext;
use super::entry::ErasedTool;
use tracing::Instrument;

use super::observe;
use crate::engine::{CallOrigin, CallTrace, How, Shared};
use crate::error::ToolError;
use crate::key::{Fingerprint, IdemKey};
use crate::store::IdemStore;
use crate::tool::ToolDef;

/// The tools of an application, their definitions for the model, and the
/// store their writes go through.
///
/// Cheap to clone (an `Arc`); share one per application.
///
/// ```
/// # use idem_runtime::*;
/// # use serde_json::json;
/// # struct Echo;
/// # impl ReadTool<()> for Echo {
/// #     type Args = serde_json::Map<String, serde_json::Value>;
/// #     type Output = serde_json::Map<String, serde_json::Value>;
/// #     type Error = std::convert::Infallible;
/// #     fn info(&self) -> ToolInfo { ToolInfo::new("echo", "Echo the arguments.") }
/// #     async fn call(&self, args: Self::Args, _: &Ctx<()>) -> Result<Self::Args, Self::Error> { Ok(args) }
/// # }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = Registry::builder(())
///     .namespace("demo")
///     .tool(Echo)
///     .build()?;
/// let out = registry.call("run-1", "echo", json!({"hello": "world"})).await?;
/// assert_eq!(out, json!({"hello": "world"}));
/// # Ok(()) }
/// ```
pub struct Registry<S> {
    pub(super) inner: Arc<Inner<S>>,
}

/// What a registry's clones share.
pub(super) struct Inner<S> {
    pub(super) shared: Shared<S>,
    pub(super) tools: Vec<Box<dyn ErasedTool<S>>>,
    /// The tools' names, sorted, each with its index in `tools`: a call
    /// finds its tool by binary search, without hashing the name.
    pub(super) by_name: Box<[(String, usize)]>,
    pub(super) definitions: Vec<ToolDef>,
    /// Each tool's metric keys, by index.
    #[cfg(feature = "metrics")]
    pub(super) tool_keys: Vec<crate::metrics::ToolKeys>,
}

/// What [`Registry::answer`] gives: a call's result, and how it was
/// answered.
#[derive(Debug)]
#[non_exhaustive]
pub struct Answer {
    /// What [`Registry::call`] returns.
    pub result: Result<Value, ToolError>,
    /// The result (a success or a permanent failure) is the one an earlier
    /// call of the same operation recorded, replayed at once or after
    /// waiting for that call to end: the body did not run for this call.
    pub replayed: bool,
}

impl<S> Clone for Registry<S> {
    fn clone(&self) -> Self {
        Registry {
            inner: self.inner.clone(),
        }
    }
}

impl<S> std::fmt::Debug for Registry<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field(
                "tools",
                &self
                    .inner
                    .by_name
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("namespace", &self.inner.shared.namespace)
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> Registry<S> {
    /// The registered tools, in registration order.
    pub fn definitions(&self) -> &[ToolDef] {
        &self.inner.definitions
    }

    /// The application state.
    pub fn state(&self) -> &S {
        &self.inner.shared.state
    }

    /// The application state, shared (for a context made outside a call).
    #[cfg(feature = "test-util")]
    pub(crate) fn shared_state(&self) -> Arc<S> {
        self.inner.shared.state.clone()
    }

    /// The store write tools go through.
    pub fn store(&self) -> &Arc<dyn IdemStore> {
        &self.inner.shared.store
    }

    /// The stored key and argument fingerprint that calling write tool
    /// `name` with `args` in `context` (a run id, or a [`CallContext`])
    /// would use, without calling it (`None` for a read tool). Useful to
    /// look an operation up in the store, or to tell support which key a
    /// payment was made under.
    pub fn identify<'a>(
        &self,
        context: impl Into<CallContext<'a>>,
        name: &str,
        args: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError> {
        let caller = self.caller(context.into())?;
        self.tool(name)?.identify(&self.inner.shared, caller, args)
    }

    /// Calls tool `name` with the model's JSON arguments in `context`: a
    /// run id, or a [`CallContext`] that also names a tenant, an operation
    /// key or the provider's tool-call id.
    ///
    /// `args` is the arguments object; `null`, `""` and a string holding a
    /// JSON object are accepted too. A write tool runs at most once per
    /// operation (tenant, scope, tool, version, canonical typed arguments
    /// or the caller's operation key): a duplicate gets the recorded
    /// result, or [`ToolError::InFlight`] while the first call still runs.
    /// A registry built with
    /// [`RegistryBuilder::require_tenant`](crate::RegistryBuilder::require_tenant)
    /// refuses calls without a tenant.
    pub async fn call<'a>(
        &self,
        context: impl Into<CallContext<'a>>,
        name: &str,
        args: Value,
    ) -> Result<Value, ToolError> {
        self.answer(context, name, args).await.result
    }

    /// [`call`](Self::call), and how the call was answered: whether its
    /// result is one an earlier call recorded, replayed (for a server that
    /// marks replays to its clients, as the MCP server does).
    pub async fn answer<'a>(
        &self,
        context: impl Into<CallContext<'a>>,
        name: &str,
        args: Value,
    ) -> Answer {
        let context = context.into();
        let index = self.index(name);
        let trace = CallTrace::new(observe::call_span(name, &context));
        #[cfg(feature = "metrics")]
        let trace = trace.with_metrics(
            index
                .as_ref()
                .ok()
                .and_then(|i| self.inner.tool_keys.get(*i)),
        );
        let started = observe::start();
        let call = self.dispatch(context, index, args, &trace);
        // A disabled span (no subscriber wants it) is not entered at every
        // poll.
        let result = if trace.span().is_disabled() {
            call.await
        } else {
            call.instrument(trace.span().clone()).await
        };
        observe::finish(&trace, name, &result, started);
        Answer {
            replayed: matches!(trace.how(), How::Replayed | How::Waited),
            result,
        }
    }

    /// A call of the tool at `index` (or the error of looking it up), with
    /// `trace` told how it was answered.
    async fn dispatch(
        &self,
        context: CallContext<'_>,
        index: Result<usize, ToolError>,
        args: Value,
        trace: &CallTrace<'_>,
    ) -> Result<Value, ToolError> {
        let mut caller = self.caller(context)?;
        caller.trace = Some(trace);
        let index = index?;
        observe::scope(trace, self.inner.definitions[index].scope);
        self.inner.tools[index]
            .call(&self.inner.shared, caller, args)
            .await
    }

    /// Who a call is made by, checked: a run id, a tenant where the
    /// registry requires one, and no empty tenant or operation key.
    fn caller<'a>(&self, context: CallContext<'a>) -> Result<CallOrigin<'a>, ToolError> {
        if context.run_id.is_empty() {
            return Err(ToolError::InvalidRunId);
        }
        if context.operation_key == Some("") {
            return Err(ToolError::InvalidOperationKey);
        }
        match context.tenant {
            Some("") => Err(ToolError::InvalidTenant),
            None if self.inner.shared.require_tenant => Err(ToolError::TenantRequired),
            tenant => Ok(CallOrigin {
                run_id: context.run_id,
                tenant,
                operation_key: context.operation_key,
                trace: None,
                on_wait: context.on_wait,
                waits: context.waits,
                stop_waiting: context.stop_waiting,
            }),
        }
    }

    /// The tool named `name`, or why there is none.
    pub(super) fn tool(&self, name: &str) -> Result<&dyn ErasedTool<S>, ToolError> {
        self.index(name).map(|index| &*self.inner.tools[index])
    }

    /// Where the tool named `name` is, or why there is none.
    fn index(&self, name: &str) -> Result<usize, ToolError> {
        let by_name = &self.inner.by_name;
        match by_name.binary_search_by(|(known, _)| known.as_str().cmp(name)) {
            Ok(at) => Ok(by_name[at].1),
            Err(_) => Err(ToolError::UnknownTool {
                name: name.to_owned(),
            }),
        }
    }
}
