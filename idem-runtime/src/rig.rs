//! The registry's tools as [rig](https://docs.rs/rig-core) tools (feature
//! `rig`, rig-core 0.44 with its agent in `rig-agent`).
//!
//! [`Registry::rig_tools`] gives one [`DynamicTool`] per registered tool
//! ([`Registry::rig_tool`] one of them, to hand rig only some): its
//! definition is the tool's name, description and input schema, and its
//! calls go through [`Registry::call`], so a rig agent's repeated writes run
//! once. The run scoping the keys travels in the agent run's
//! [`ToolContext`] as an [`IdemRun`]:
//!
//! ```ignore
//! let agent = rig_agent::agent::AgentBuilder::new(model)
//!     .dynamic_tools(registry.rig_tools()?)
//!     .build();
//! agent
//!     .prompt("Charge order o-1 for 42 EUR")
//!     .tool_context(idem::rig::run_context("run-42")?)
//!     .run()
//!     .await?;
//! ```
//!
//! Use the same run id when the agent retries a turn or resumes a run
//! after a crash: that is what makes the repeated calls replays. A write
//! tool called without an [`IdemRun`] in its context does not run: without
//! a run there is no safe key. The omission is logged (an error naming the
//! tool and the fix), and the model reads only that the action is
//! unavailable and should not be retried. Read tools need no run.
//!
//! On a multi-tenant service the context carries the caller as well, an
//! [`IdemTenant`] ([`run_context_as`]): the calls are then made with
//! [`CallContext::tenant`](crate::CallContext::tenant), so no two tenants share a record. A registry built
//! with [`require_tenant`](crate::RegistryBuilder::require_tenant) refuses
//! calls whose context names none.
//!
//! A failed call is a [`ToolExecutionError`] whose model-visible text is
//! [`ToolError::model_message`], classified for rig (`invalid_args`,
//! `not_found`, `network` for an unreachable store, `other`) with idem's retry
//! hint.

use rig_core::message::ToolName;
use rig_core::tool::{
    ContextValue, DynamicTool, ToolContext, ToolErrorKind, ToolExecutionError, ToolOutput,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ToolError;
use crate::registry::{CallContext, Registry};

/// The agent run a rig tool call belongs to, carried in the run's
/// [`ToolContext`] (see [`run_context`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdemRun(pub String);

impl ContextValue for IdemRun {
    const KEY: &'static str = "idem/run_id";
}

/// The tenant (customer, principal) an agent run acts for, carried in the
/// run's [`ToolContext`] (see [`run_context_as`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdemTenant(pub String);

impl ContextValue for IdemTenant {
    const KEY: &'static str = "idem/tenant";
}

/// A [`ToolContext`] naming `run_id`, for `AgentRunner::tool_context`.
pub fn run_context(run_id: &str) -> Result<ToolContext, rig_core::tool::ToolContextError> {
    let mut context = ToolContext::new();
    context.insert(IdemRun(run_id.to_owned()))?;
    Ok(context)
}

/// A [`ToolContext`] naming `run_id` of `tenant`, for
/// `AgentRunner::tool_context`.
pub fn run_context_as(
    tenant: &str,
    run_id: &str,
) -> Result<ToolContext, rig_core::tool::ToolContextError> {
    let mut context = run_context(run_id)?;
    context.insert(IdemTenant(tenant.to_owned()))?;
    Ok(context)
}

/// Why a registered tool cannot be handed to rig.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RigToolError {
    /// rig cannot name it (an empty name).
    #[error("tool name `{0}` is not a rig tool name")]
    InvalidName(String),
    /// No tool of that name is registered.
    #[error("no tool `{0}` is registered")]
    UnknownTool(String),
}

/// The run of read tools called without one: they keep no record.
const NO_RUN: &str = "rig:no-run";

impl<S: Send + Sync + 'static> Registry<S> {
    /// Every registered tool as a rig [`DynamicTool`]: see the
    /// [module docs](crate::rig).
    pub fn rig_tools(&self) -> Result<Vec<DynamicTool>, RigToolError> {
        self.definitions()
            .iter()
            .map(|def| self.rig_tool(&def.name))
            .collect()
    }

    /// The tool named `name` as a rig [`DynamicTool`], to hand rig some of
    /// the registry's tools only.
    pub fn rig_tool(&self, name: &str) -> Result<DynamicTool, RigToolError> {
        let def = self
            .definitions()
            .iter()
            .find(|d| d.name == name)
            .ok_or_else(|| RigToolError::UnknownTool(name.to_owned()))?;
        let rig_name = ToolName::new(def.name.clone())
            .map_err(|_| RigToolError::InvalidName(def.name.clone()))?;
        let registry = self.clone();
        let tool = def.name.clone();
        let write = def.kind == crate::tool::ToolKind::Write;
        Ok(DynamicTool::new_with_context(
            rig_name,
            def.description.clone(),
            def.input_schema.clone(),
            move |context: &mut ToolContext, args: Value| {
                let registry = registry.clone();
                let tool = tool.clone();
                let caller = context_caller(context, &tool, write);
                Box::pin(async move {
                    let (tenant, run) = caller?;
                    let mut context = CallContext::run(&run);
                    if let Some(tenant) = tenant.as_deref() {
                        context = context.tenant(tenant);
                    }
                    registry
                        .call(context, &tool, args)
                        .await
                        .map(ToolOutput::json)
                        .map_err(|e| execution_error(&e))
                })
            },
        ))
    }
}

/// The tenant and run a call's context names (a read tool may have none),
/// or the error for a write without a run or an unreadable context.
fn context_caller(
    context: &ToolContext,
    tool: &str,
    write: bool,
) -> Result<(Option<String>, String), ToolExecutionError> {
    let unreadable = |e: rig_core::tool::ToolContextError| {
        tracing::error!(tool, error = %e, "the idem values in the rig tool context are unreadable; the tool did not run");
        unavailable(format!(
            "the idem values in the tool context are unreadable: {e}"
        ))
    };
    let tenant = context.get::<IdemTenant>().map_err(unreadable)?;
    let run = match context.get::<IdemRun>().map_err(unreadable)? {
        Some(IdemRun(run)) if !run.is_empty() => run,
        _ if !write => NO_RUN.to_owned(),
        _ => {
            tracing::error!(
                tool,
                "write tool called by a rig agent without an idem run id; it did not run. \
                 Run the agent with `.tool_context(idem::rig::run_context(run_id)?)`"
            );
            return Err(unavailable(format!(
                "`{tool}` was called without an idem run id: run the agent with \
                 `.tool_context(idem::rig::run_context(run_id)?)`"
            )));
        }
    };
    Ok((tenant.map(|IdemTenant(t)| t), run))
}

/// A call that did not run because of how the agent was set up: the
/// developer's `message` in the error, and for the model a neutral note.
fn unavailable(message: String) -> ToolExecutionError {
    ToolExecutionError::new(ToolErrorKind::Other, message)
        .with_model_feedback(
            "This action is not available right now and did not run. Do not retry it; \
             tell the user it could not be done.",
        )
        .with_retryable(false)
}

/// A registry error as rig's, with the text the model should read.
fn execution_error(e: &ToolError) -> ToolExecutionError {
    let kind = match e {
        ToolError::InvalidArgs { .. } => ToolErrorKind::InvalidArgs,
        ToolError::UnknownTool { .. } => ToolErrorKind::NotFound,
        ToolError::Store { .. } => ToolErrorKind::Network,
        _ => ToolErrorKind::Other,
    };
    ToolExecutionError::new(kind, e.to_string())
        .with_model_feedback(e.model_message())
        .with_retryable(e.is_retryable())
}
