//! Small future combinators the wrapper is built from: a bound (and a span)
//! on store operations, panics caught as errors, one poll, and a future driven beside
//! another.

use std::convert::Infallible;
use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll};
use std::time::Duration;

use tracing::Instrument;

use super::settings::StoreMeta;
use crate::error::{StoreError, ToolError};
use crate::store::bound;

/// Bounds a store operation by the registry's store timeout, in a child
/// span of the call's (`idem.store`, with OpenTelemetry's
/// `db.system.name` and `db.operation.name`), timed with feature
/// `metrics`.
pub(crate) async fn bounded<T>(
    store: &StoreMeta,
    limit: Duration,
    op: &'static str,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let span = tracing::info_span!(
        target: "idem::store",
        "idem.store",
        otel.name = op,
        otel.kind = "client",
        db.system.name = store.backend,
        db.operation.name = op,
    );
    #[cfg(feature = "metrics")]
    let started = std::time::Instant::now();
    // A disabled span (no subscriber wants it) is not entered at every
    // poll.
    let result = if span.is_disabled() {
        within(limit, op, fut).await
    } else {
        within(limit, op, fut).instrument(span).await
    };
    #[cfg(feature = "metrics")]
    store
        .metrics
        .operation(op, result.is_ok(), started.elapsed());
    result
}

/// `fut`, or a timeout after `limit`.
async fn within<T>(
    limit: Duration,
    op: &'static str,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    // The store is told the limit, so that it need not arm a timer of its
    // own that this one would beat.
    let mut fut = pin!(bound::limited(limit, fut));
    // An in-process store answers at once: no timer (or clock read) then.
    if let Some(result) = poll_once(fut.as_mut()).await {
        return result;
    }
    match tokio::time::timeout(limit, fut).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::Timeout { op, after: limit }),
    }
}

/// Runs `fut`, turning a panic in it into `Err` with the panic's message,
/// so that a buggy tool fails its call instead of unwinding through the
/// caller (an MCP server would never answer the request).
pub(crate) fn catch_panic<F: Future>(fut: F) -> CatchPanic<F> {
    CatchPanic { fut }
}

pin_project_lite::pin_project! {
    /// [`catch_panic`]'s future. The combinators here are futures of their
    /// own rather than `async fn`s: an `async fn` keeps its argument and
    /// the pinned copy it polls, so a body's future would be held twice
    /// (and moved once more) on every call.
    pub(crate) struct CatchPanic<F> {
        #[pin]
        fut: F,
    }
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = self.project().fut;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".to_owned()))),
        }
    }
}

/// The error of a call whose body panicked.
pub(crate) fn panicked(name: &str, panic: &str) -> ToolError {
    ToolError::Failed {
        tool: name.to_owned(),
        message: format!("the tool panicked ({panic}); whether it took effect is unknown"),
        permanent: false,
    }
}

/// Polls `fut` once: its output if it is ready.
pub(crate) async fn poll_once<F: Future>(mut fut: Pin<&mut F>) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        Poll::Ready(match fut.as_mut().poll(cx) {
            Poll::Ready(out) => Some(out),
            Poll::Pending => None,
        })
    })
    .await
}

/// Drives `work` to completion while also driving `side`, which never ends
/// by itself (a heartbeat); `side` is dropped when `work` is done. `work`
/// is polled first, so work that is ready at once never starts `side`.
pub(crate) fn beside<W: Future, S: Future<Output = Infallible>>(work: W, side: S) -> Beside<W, S> {
    Beside { work, side }
}

pin_project_lite::pin_project! {
    /// [`beside`]'s future.
    pub(crate) struct Beside<W, S> {
        #[pin]
        work: W,
        #[pin]
        side: S,
    }
}

impl<W: Future, S: Future<Output = Infallible>> Future for Beside<W, S> {
    type Output = W::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<W::Output> {
        let this = self.project();
        if let Poll::Ready(out) = this.work.poll(cx) {
            return Poll::Ready(out);
        }
        match this.side.poll(cx) {
            Poll::Ready(never) => match never {},
            Poll::Pending => Poll::Pending,
        }
    }
}
