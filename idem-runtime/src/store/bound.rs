//! The caller's bound on a store operation, seen from inside the store.
//!
//! The registry bounds every store operation by its store timeout
//! (`engine::task::bounded`). A store that also bounds each command it
//! sends (Redis's response timeout) arms a second timer on every command,
//! and when the caller's limit is no longer than the command's, the
//! caller's always ends the wait first: the second timer is armed and torn
//! down for nothing (about 600 instructions a command, a quarter of a
//! replay's cost beyond the key). [`Limited`] tells the operation being
//! polled what its caller's limit is, for the time of each poll, on the
//! polling thread; [`caller_limit`] reads it, so that the store arms its
//! own timer only when that timer could fire first.
//!
//! A store operation polled outside the registry (the `idem` tool, a
//! store used directly) has no caller's limit and keeps its own.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

thread_local! {
    static LIMIT: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// The limit after which the caller of the store operation being polled on
/// this thread stops waiting for it, counted from when the operation
/// began; `None` when no caller bounds it.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) fn caller_limit() -> Option<Duration> {
    LIMIT.with(Cell::get)
}

/// `fut`, polled with [`caller_limit`] saying `limit`: the caller stops
/// waiting for it `limit` after its first poll, or sooner.
pub(crate) fn limited<F: Future>(limit: Duration, fut: F) -> Limited<F> {
    Limited { limit, fut }
}

pin_project_lite::pin_project! {
    /// [`limited`]'s future.
    pub(crate) struct Limited<F> {
        limit: Duration,
        #[pin]
        fut: F,
    }
}

impl<F: Future> Future for Limited<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _set = Set::to(Some(*this.limit));
        this.fut.poll(cx)
    }
}

/// The limit set for one poll, and the one it replaced, put back when the
/// poll ends, panic or not: a limit left behind would let a later,
/// unbounded operation on this thread go without its own timer.
struct Set {
    before: Option<Duration>,
}

impl Set {
    fn to(limit: Option<Duration>) -> Set {
        Set {
            before: LIMIT.with(|cell| cell.replace(limit)),
        }
    }
}

impl Drop for Set {
    fn drop(&mut self) {
        LIMIT.with(|cell| cell.set(self.before));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_limit_holds_while_the_operation_is_polled_and_only_then() {
        assert_eq!(caller_limit(), None);
        let seen = limited(Duration::from_millis(250), async {
            let first = caller_limit();
            tokio::task::yield_now().await;
            (first, caller_limit())
        })
        .await;
        assert_eq!(
            seen,
            (
                Some(Duration::from_millis(250)),
                Some(Duration::from_millis(250))
            )
        );
        assert_eq!(caller_limit(), None);
    }

    #[tokio::test]
    async fn an_inner_limit_gives_way_to_the_outer_when_it_ends() {
        let seen = limited(Duration::from_secs(2), async {
            let inner = limited(Duration::from_secs(1), async { caller_limit() }).await;
            (inner, caller_limit())
        })
        .await;
        assert_eq!(
            seen,
            (Some(Duration::from_secs(1)), Some(Duration::from_secs(2)))
        );
    }

    #[test]
    fn a_poll_that_panics_leaves_no_limit_behind() {
        let panicked = std::panic::catch_unwind(|| {
            let waker = std::task::Waker::noop();
            let mut cx = Context::from_waker(waker);
            let mut fut = std::pin::pin!(limited(Duration::from_secs(1), async {
                panic!("a store that panics")
            }));
            let _ = fut.as_mut().poll(&mut cx);
        });
        assert!(panicked.is_err());
        assert_eq!(caller_limit(), None);
    }
}
