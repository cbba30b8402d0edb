//! A call that waits for a person, over MCP: the client that gave a
//! progress token is sent a progress notification when the call starts to
//! wait ("awaiting approval by a person (operation KEY)") and every
//! `TELL_WAITING_EVERY` after, so that it does not give up on a silent
//! call. (A client's cancellation ends the wait, never a running body:
//! `CallContext::stop_waiting_when`.)

use std::sync::atomic::{AtomicU32, Ordering};

use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext};

use crate::registry::Waiting;

/// What tells one call's client that the call waits.
pub(super) struct Progress {
    token: ProgressToken,
    peer: Peer<RoleServer>,
    sent: AtomicU32,
}

impl Progress {
    /// For the call of `request`, when its client gave a progress token.
    pub(super) fn of(
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Progress> {
        let token = request
            .meta
            .as_ref()
            .and_then(|meta| meta.get_progress_token())
            .or_else(|| context.meta.get_progress_token())?;
        Some(Progress {
            token,
            peer: context.peer.clone(),
            sent: AtomicU32::new(0),
        })
    }

    /// Tells the client what the call waits for: a notification, sent
    /// beside the call (never waited on).
    pub(super) fn tell(&self, waiting: &Waiting<'_>) {
        let progress = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        let notification = ProgressNotificationParam::new(self.token.clone(), f64::from(progress))
            .with_message(waiting.says());
        let peer = self.peer.clone();
        tokio::spawn(async move {
            if let Err(e) = peer.notify_progress(notification).await {
                tracing::debug!(error = %e, "a progress notification was not sent");
            }
        });
    }
}
