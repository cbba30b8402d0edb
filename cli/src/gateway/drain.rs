//! How `idem gateway --http` stops on SIGTERM or SIGINT, as a service
//! behind a load balancer is stopped (a rolling restart, a scale-down):
//!
//! 1. It drains: `/readyz` answers 503, an `initialize` is answered 503
//!    with `Retry-After`, and a new write is answered an error saying the
//!    gateway is shutting down and the call was not made, so the client
//!    retries elsewhere (another gateway on the same store replays or runs
//!    it once). Reads and the writes in flight go on.
//! 2. It waits for the writes in flight to be answered and recorded, at
//!    most `--drain` (30 s by default).
//! 3. At that deadline, a write still waiting for its upstream is given
//!    up as one whose outcome is unknown: the upstream is told to stop,
//!    the record says the outcome is uncertain (the tool's `on_uncertain`
//!    decides what a duplicate does), and the client is answered so.
//!    Nothing in flight is left `running`, and nothing is lost.
//! 4. Its sessions end, their upstreams with them, and it exits.

use std::time::Duration;

use tokio::sync::watch;

/// How long a write may still take to be recorded once given up at the
/// deadline (the store's own timeouts bound it further).
pub(super) const RECORD_GRACE: Duration = Duration::from_secs(10);

/// Where the gateway stands in its stopping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Serving,
    Draining,
    /// The deadline passed: writes still in flight are given up.
    GivenUp,
}

/// The gateway's stopping, shared by its sessions.
pub(crate) struct Drain(watch::Sender<Stage>);

impl Default for Drain {
    fn default() -> Drain {
        Drain(watch::Sender::new(Stage::Serving))
    }
}

impl Drain {
    /// Whether the gateway is stopping: no new session or write.
    pub(crate) fn draining(&self) -> bool {
        *self.0.borrow() != Stage::Serving
    }

    /// Starts draining.
    pub(super) fn begin(&self) {
        self.0.send_if_modified(|stage| {
            let was = *stage == Stage::Serving;
            if was {
                *stage = Stage::Draining;
            }
            was
        });
    }

    /// The deadline passed: what is in flight is given up.
    pub(super) fn give_up(&self) {
        self.0.send_replace(Stage::GivenUp);
    }

    /// Returns once the deadline has passed (at once if it has).
    pub(crate) async fn given_up(&self) {
        let mut stage = self.0.subscribe();
        let _ = stage.wait_for(|s| *s == Stage::GivenUp).await;
    }
}

/// The text a write is answered while the gateway drains.
pub(crate) const SHUTTING_DOWN: &str = "idem gateway is shutting down: this call was not made. \
     Try it again (through another gateway on the same store it runs once, or is answered its \
     result)";

/// Returns when the process is asked to stop (SIGTERM, or SIGINT), with
/// the signal's name; never, where signals cannot be listened for.
pub(super) async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!("cannot listen for SIGTERM: the gateway will not drain when stopped");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
