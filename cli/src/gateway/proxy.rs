//! An upstream write tool behind idem's guarantee: a [`WriteTool`] whose
//! arguments are any JSON object (keyed by the upstream's input schema,
//! given at registration) and whose result is the upstream's whole
//! `CallToolResult`, recorded and replayed as it came. What each upstream
//! outcome does (docs/gateway.md, "What is recorded"):
//!
//! - a result: recorded;
//! - an `isError` result: answered as it came and not recorded (a
//!   duplicate runs again), or recorded with `error_results = "record"`;
//! - a JSON-RPC error, or a call never delivered: nothing ran, nothing is
//!   recorded;
//! - no answer (the upstream died, or the timeout passed): the outcome is
//!   uncertain, and the tool's `on_uncertain` policy decides.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use idem::{ToolInfo, WriteCtx, WriteOptions, WriteTool};
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorData};
use serde_json::{Map, Value};

use super::config::ErrorResults;
use super::upstream::{Failure, Upstream};

tokio::task_local! {
    /// What the upstream answered a call whose answer is not recorded, for
    /// the gateway to give to its client as it came (the registry keeps
    /// only an error's text). Set by the call that ran the tool, in the
    /// task that asked the registry.
    pub(crate) static UNRECORDED: RefCell<Option<Unrecorded>>;
}

/// An upstream answer that is passed on but not recorded.
#[derive(Debug)]
pub(crate) enum Unrecorded {
    /// An `isError` result, under `error_results = "release"`.
    ErrorResult(CallToolResult),
    /// A JSON-RPC error.
    Refused(ErrorData),
}

/// One upstream write tool.
pub(crate) struct ProxiedWrite {
    pub(crate) info: ToolInfo,
    pub(crate) options: WriteOptions,
    /// How long the upstream has to answer.
    pub(crate) timeout: Duration,
    pub(crate) error_results: ErrorResults,
}

/// Why a proxied call has no result to record.
#[derive(Debug)]
pub(crate) enum ProxyError {
    /// The upstream's `isError` result, by its text.
    ErrorResult(String),
    /// No result came.
    Upstream(Failure),
}

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyError::ErrorResult(text) => f.write_str(text),
            ProxyError::Upstream(failure) => failure.fmt(f),
        }
    }
}

impl WriteTool<Arc<Upstream>> for ProxiedWrite {
    type Args = Map<String, Value>;
    type Output = Value;
    type Error = ProxyError;

    fn info(&self) -> ToolInfo {
        self.info.clone()
    }

    fn options(&self) -> WriteOptions {
        self.options
    }

    fn is_uncertain(&self, error: &ProxyError) -> bool {
        matches!(error, ProxyError::Upstream(Failure::Lost(_)))
    }

    /// Calls the tool upstream with the operation's key and attempt in
    /// `_meta` (`idem/key`, `idem/attempt`), for an upstream that can
    /// deduplicate on them.
    async fn call(
        &self,
        args: Map<String, Value>,
        ctx: &WriteCtx<Arc<Upstream>>,
    ) -> Result<Value, ProxyError> {
        let mut params = CallToolRequestParams::new(self.info.name.clone()).with_arguments(args);
        let mut meta = Map::new();
        meta.insert("idem/key".into(), ctx.idem_key().as_str().into());
        meta.insert("idem/attempt".into(), ctx.attempt().into());
        params.meta = Some(meta.into());
        match ctx.state().call(params, self.timeout).await {
            Ok(result)
                if result.is_error == Some(true) && self.error_results == ErrorResults::Release =>
            {
                let text = text_of(&result);
                pass_on(Unrecorded::ErrorResult(result));
                Err(ProxyError::ErrorResult(text))
            }
            Ok(result) => serde_json::to_value(&result).map_err(|e| {
                ProxyError::ErrorResult(format!("the upstream's result is not JSON: {e}"))
            }),
            Err(Failure::Refused(e)) => {
                pass_on(Unrecorded::Refused(e.clone()));
                Err(ProxyError::Upstream(Failure::Refused(e)))
            }
            Err(failure) => Err(ProxyError::Upstream(failure)),
        }
    }
}

/// Leaves `answer` for the gateway, if it asked for it.
fn pass_on(answer: Unrecorded) {
    let _ = UNRECORDED.try_with(|slot| *slot.borrow_mut() = Some(answer));
}

/// The text of a result's text blocks, one per line.
pub(crate) fn text_of(result: &CallToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
        .collect();
    if texts.is_empty() {
        "the upstream tool reported an error".to_owned()
    } else {
        texts.join("\n")
    }
}
