//! The registry's tools as [rig](https://docs.rs/rig-core) tools (feature
//! `rig`, rig-core 0.44 with its agent in `rig-agent`).
//!
//! [`Registry::rig_tools`] gives one [`DynamicTool`] per registered tool:
//! its definition is the tool's name, description and input schema, and
//! its calls go through [`Registry::call`], so a rig agent's repeated
//! writes run once. The run scoping the keys travels in the agent run's
//! [`ToolContext`] as a [`RunId`]:
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
//! after a crash: that is what makes the repeated calls replays. A call
//! without a [`RunId`] in its context is refused, and nothing runs: without
//! a run there is no safe key.
//!
//! On a multi-tenant service the context carries the caller as well, a
//! [`Tenant`] ([`run_context_as`]): the calls are then made with
//! [`Registry::call_as`], so no two tenants share a record. A registry built
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
use crate::registry::Registry;

/// The agent run a rig tool call belongs to, carried in the run's
/// [`ToolContext`] (see [`run_context`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunId(pub String);

impl ContextValue for RunId {
    const KEY: &'static str = "idem/run_id";
}

/// The tenant (customer, principal) an agent run acts for, carried in the
/// run's [`ToolContext`] (see [`run_context_as`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant(pub String);

impl ContextValue for Tenant {
    const KEY: &'static str = "idem/tenant";
}

/// A [`ToolContext`] naming `run_id`, for `AgentRunner::tool_context`.
pub fn run_context(run_id: &str) -> Result<ToolContext, rig_core::tool::ToolContextError> {
    let mut context = ToolContext::new();
    context.insert(RunId(run_id.to_owned()))?;
    Ok(context)
}

/// A [`ToolContext`] naming `run_id` of `tenant`, for
/// `AgentRunner::tool_context`.
pub fn run_context_as(
    tenant: &str,
    run_id: &str,
) -> Result<ToolContext, rig_core::tool::ToolContextError> {
    let mut context = run_context(run_id)?;
    context.insert(Tenant(tenant.to_owned()))?;
    Ok(context)
}

/// A registered tool that rig cannot name: an empty name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool name `{0}` is not a rig tool name")]
pub struct RigToolName(pub String);

impl<S: Send + Sync + 'static> Registry<S> {
    /// Every registered tool as a rig [`DynamicTool`]: see the
    /// [module docs](crate::rig).
    pub fn rig_tools(&self) -> Result<Vec<DynamicTool>, RigToolName> {
        self.definitions()
            .iter()
            .map(|def| {
                let name =
                    ToolName::new(def.name.clone()).map_err(|_| RigToolName(def.name.clone()))?;
                let registry = self.clone();
                let tool = def.name.clone();
                Ok(DynamicTool::new_with_context(
                    name,
                    def.description.clone(),
                    def.input_schema.clone(),
                    move |context: &mut ToolContext, args: Value| {
                        let registry = registry.clone();
                        let tool = tool.clone();
                        let caller = context_caller(context, &tool);
                        Box::pin(async move {
                            let (tenant, run) = caller?;
                            registry
                                .call_with(tenant.as_deref(), &run, &tool, args)
                                .await
                                .map(ToolOutput::json)
                                .map_err(|e| execution_error(&e))
                        })
                    },
                ))
            })
            .collect()
    }
}

/// The tenant and run a call's context names, or the error for a context
/// that names no run or holds an unreadable value.
fn context_caller(
    context: &ToolContext,
    tool: &str,
) -> Result<(Option<String>, String), ToolExecutionError> {
    let unreadable = |e: rig_core::tool::ToolContextError| {
        no_run(tool).with_model_feedback(format!("the idem tool context is unreadable: {e}"))
    };
    let run = match context.get::<RunId>().map_err(unreadable)? {
        Some(RunId(run)) if !run.is_empty() => run,
        _ => return Err(no_run(tool)),
    };
    let tenant = context.get::<Tenant>().map_err(unreadable)?;
    Ok((tenant.map(|Tenant(t)| t), run))
}

fn no_run(tool: &str) -> ToolExecutionError {
    ToolExecutionError::new(
        ToolErrorKind::Other,
        format!(
            "`{tool}` was called without an idem run id: run the agent with \
             `.tool_context(idem::rig::run_context(run_id)?)`"
        ),
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
