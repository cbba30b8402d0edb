//! A read tool's call: parse the arguments, run, serialize. Read tools
//! never touch the store.

use std::fmt::Display;

use serde::Serialize;
use serde_json::Value;

use super::args::parse_args;
use super::settings::{CallOrigin, Shared};
use super::task::{catch_panic, panicked};
use crate::ctx::Ctx;
use crate::error::ToolError;
use crate::tool::ReadTool;

/// Runs a read tool: parse, call, serialize. Never touches the store.
pub(crate) async fn call_read<S, T: ReadTool<S>>(
    tool: &T,
    name: &str,
    shared: &Shared<S>,
    caller: CallOrigin<'_>,
    args: Value,
) -> Result<Value, ToolError> {
    let args: T::Args = parse_args(name, args, shared.defaults.args)?;
    let ctx = Ctx::new(caller.run_id, caller.tenant, shared.state.clone());
    unrecorded(name, catch_panic(tool.call(args, &ctx)).await, |_| false)
}

/// What a body's outcome answers when nothing is recorded (a read tool, or
/// a write tool run without a claim): its result as JSON, or a failure,
/// permanent as `is_permanent` judges; a panic fails the call.
pub(crate) fn unrecorded<O: Serialize, E: Display>(
    name: &str,
    outcome: Result<Result<O, E>, String>,
    is_permanent: impl FnOnce(&E) -> bool,
) -> Result<Value, ToolError> {
    let outcome = outcome.map_err(|panic| {
        // The panic's text may quote the arguments: debug only.
        tracing::error!(tool = name, "the tool panicked");
        tracing::debug!(tool = name, panic = %panic, "the tool's panic");
        panicked(name, &panic)
    })?;
    match outcome {
        Ok(out) => serde_json::to_value(&out).map_err(|e| ToolError::Failed {
            tool: name.to_owned(),
            message: format!("the result could not be serialized: {e}"),
            permanent: true,
        }),
        Err(e) => Err(ToolError::Failed {
            tool: name.to_owned(),
            permanent: is_permanent(&e),
            message: e.to_string(),
        }),
    }
}
