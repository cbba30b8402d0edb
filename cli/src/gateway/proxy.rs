//! An upstream write tool behind idem's guarantee: a [`WriteTool`] whose
//! arguments are any JSON object (keyed by the upstream's input schema,
//! given at registration) and whose result is the upstream's whole
//! `tools/call` result, recorded and replayed as it came. What each
//! upstream outcome does (docs/gateway.md, "What is recorded"):
//!
//! - a result: recorded;
//! - an `isError` result: answered as it came and not recorded (a
//!   duplicate runs again), or recorded with `error_results = "record"`;
//! - a result that is not final (`input_required`): answered as it came
//!   and not recorded; the client's continuation is the same operation;
//! - a JSON-RPC error, or a call never delivered: nothing ran, nothing is
//!   recorded;
//! - no answer (the upstream died, the timeout passed, the client
//!   cancelled the call): the outcome is uncertain, and the tool's
//!   `on_uncertain` policy decides.
//!
//! The call a write makes upstream is the client's own request, `_meta`
//! and all (its progress token, so that the run that executes reports
//! progress to the client), with the operation's key and attempt added.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use idem::{ToolInfo, WriteCtx, WriteOptions, WriteTool};
use serde_json::{Map, Value};
use tokio::sync::{Notify, oneshot};

use super::condition::Condition;
use super::config::ErrorResults;
use super::drain::Drain;
use super::link::{Failure, Link, Reply, Route};

tokio::task_local! {
    /// The client's call a write tool runs for: set by the session around
    /// the registry's call, read by [`ProxiedWrite::call`] in the same
    /// task; and what the upstream answered that is not recorded, for the
    /// session to give its client as it came (the registry keeps only an
    /// error's text).
    pub(crate) static CALL: Call;
}

/// A request of the client's, as its cancellation finds it.
#[derive(Default)]
pub(crate) struct Asked {
    cancelled: AtomicBool,
    /// Nobody reads its answer any more (a stateless request's stream
    /// closed): a wait for a person ends, a write in flight goes on, so
    /// that its result is recorded for the client's retry.
    abandoned: AtomicBool,
    told: Notify,
}

impl Asked {
    /// The client cancelled the request.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
        self.told.notify_one();
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Nobody reads the request's answer any more.
    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, Ordering::Relaxed);
    }

    /// Whether a wait for a person should end: the client cancelled the
    /// request, or abandoned it.
    pub(crate) fn stops_waiting(&self) -> bool {
        self.cancelled() || self.abandoned.load(Ordering::Relaxed)
    }

    /// Returns once the client cancels the request.
    pub(crate) async fn cancellation(&self) {
        self.told.notified().await;
    }
}

/// The client's call, as a write tool makes it upstream.
pub(crate) struct Call {
    pub(crate) link: Arc<Link>,
    /// The client's request, whole.
    pub(crate) request: Value,
    pub(crate) route: Route,
    /// Told when the client cancels the call.
    pub(crate) cancelled: Arc<Asked>,
    /// The gateway's stopping: its deadline gives the call up.
    pub(crate) drain: Arc<Drain>,
    /// What the upstream answered that is passed on but not recorded.
    pub(crate) unrecorded: RefCell<Option<Unrecorded>>,
}

/// An upstream answer that is passed on but not recorded.
#[derive(Debug)]
pub(crate) enum Unrecorded {
    /// A result: `isError` under `error_results = "release"`, or not final.
    Result(Value),
    /// A JSON-RPC error.
    Refused(Value),
}

/// One upstream write tool.
pub(crate) struct ProxiedWrite {
    pub(crate) info: ToolInfo,
    pub(crate) options: WriteOptions,
    /// How long the upstream has to answer.
    pub(crate) timeout: Duration,
    pub(crate) error_results: ErrorResults,
    /// Which calls wait for a person's approval (`approval_when`), when
    /// not all of them.
    pub(crate) approval_when: Option<Arc<Condition>>,
}

/// Why a proxied call has no result to record.
#[derive(Debug)]
pub(crate) enum ProxyError {
    /// A result that is not recorded, by its text.
    Unrecorded(String),
    /// The upstream refused the call (a JSON-RPC error): it did not run.
    Refused(String),
    /// No answer came.
    Upstream(Failure),
    /// The gateway called the tool outside a client's call.
    NoCall,
}

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyError::Unrecorded(text) => f.write_str(text),
            ProxyError::Refused(why) => write!(f, "the upstream server refused the call: {why}"),
            ProxyError::Upstream(failure) => failure.fmt(f),
            ProxyError::NoCall => f.write_str("no client's call to make upstream"),
        }
    }
}

impl WriteTool<()> for ProxiedWrite {
    type Args = Map<String, Value>;
    type Output = Value;
    type Error = ProxyError;

    fn info(&self) -> ToolInfo {
        self.info.clone()
    }

    fn options(&self) -> WriteOptions {
        self.options
    }

    /// Whether `approval_when` holds for this call (an approval is needed
    /// when it cannot tell); every call needs one without it.
    fn needs_approval(&self, args: &Map<String, Value>, ctx: &idem::Ctx<()>) -> bool {
        self.approval_when
            .as_ref()
            .is_none_or(|condition| condition.needs_approval(&self.info.name, args, ctx.tenant()))
    }

    fn is_uncertain(&self, error: &ProxyError) -> bool {
        matches!(error, ProxyError::Upstream(Failure::Lost(_)))
    }

    /// Makes the client's call upstream with the operation's key and
    /// attempt in `_meta` (`idem/key`, `idem/attempt`), for an upstream
    /// that can deduplicate on them.
    async fn call(
        &self,
        _args: Map<String, Value>,
        ctx: &WriteCtx<()>,
    ) -> Result<Value, ProxyError> {
        let (link, request, route, cancelled, drain) = CALL
            .try_with(|call| {
                let mut request = call.request.clone();
                if let Some(meta) = super::jsonrpc::meta_mut(&mut request) {
                    meta.insert("idem/key".into(), ctx.idem_key().as_str().into());
                    meta.insert("idem/attempt".into(), ctx.attempt().into());
                }
                (
                    call.link.clone(),
                    request,
                    call.route.clone(),
                    call.cancelled.clone(),
                    call.drain.clone(),
                )
            })
            .map_err(|_| ProxyError::NoCall)?;
        let (tx, rx) = oneshot::channel();
        let id = link
            .request(request, Some(route), Reply::Gateway(tx))
            .await
            .map_err(ProxyError::Upstream)?;
        let answer = tokio::select! {
            answer = rx => match answer {
                Ok(Ok(answer)) => answer,
                Ok(Err(failure)) => return Err(ProxyError::Upstream(failure)),
                Err(_) => return Err(lost("the upstream connection went")),
            },
            () = tokio::time::sleep(self.timeout) => {
                link.cancel(id, "idem gateway: the call's timeout passed").await;
                return Err(lost(&format!("no answer within {:?}", self.timeout)));
            }
            () = cancelled.cancellation() => {
                link.cancel(id, "the client cancelled the call").await;
                return Err(lost("the client cancelled the call before it was answered"));
            }
            () = drain.given_up() => {
                link.cancel(id, "idem gateway: shutting down").await;
                return Err(lost(
                    "the gateway shut down (its --drain passed) before the upstream answered",
                ));
            }
        };
        self.outcome(answer)
    }
}

impl ProxiedWrite {
    /// What the upstream's `answer` (a response) is for the record.
    fn outcome(&self, answer: Value) -> Result<Value, ProxyError> {
        if let Some(error) = answer.get("error") {
            let why = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("an error")
                .to_owned();
            pass_on(Unrecorded::Refused(error.clone()));
            return Err(ProxyError::Refused(why));
        }
        let result = answer.get("result").cloned().unwrap_or(Value::Null);
        let is_error = result.get("isError") == Some(&Value::Bool(true));
        let not_final = result
            .get("resultType")
            .and_then(Value::as_str)
            .is_some_and(|t| t == "input_required");
        if not_final || (is_error && self.error_results == ErrorResults::Release) {
            let text = if not_final {
                "the upstream server needs more input before the call can complete".to_owned()
            } else {
                text_of(&result)
            };
            pass_on(Unrecorded::Result(result));
            return Err(ProxyError::Unrecorded(text));
        }
        Ok(result)
    }
}

fn lost(why: &str) -> ProxyError {
    ProxyError::Upstream(Failure::Lost(why.to_owned()))
}

/// Leaves `answer` for the session, if it asked for it.
fn pass_on(answer: Unrecorded) {
    let _ = CALL.try_with(|call| *call.unrecorded.borrow_mut() = Some(answer));
}

/// The text of a result's text blocks, one per line.
pub(crate) fn text_of(result: &Value) -> String {
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|block| block.get("type") == Some(&Value::from("text")))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        "the upstream tool reported an error".to_owned()
    } else {
        texts.join("\n")
    }
}
