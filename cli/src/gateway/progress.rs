//! A write that waits for a person (`approval_wait`, `uncertain_wait`),
//! as its client sees it: a `notifications/progress` now and then, on the
//! call's route, when the client gave a progress token.

use std::sync::atomic::{AtomicU32, Ordering};

use idem::Waiting;
use serde_json::{Value, json};

use super::link::{Route, Sink};

/// What tells a client that gave a progress token that its call waits
/// for a person: a `notifications/progress` on the call's route.
pub(super) struct Progress {
    token: Value,
    sink: Sink,
    id: Value,
    sent: AtomicU32,
}

impl Progress {
    /// What tells the client of `route` under `token`; `None` (nothing
    /// to tell, nothing made) when the client gave no token.
    pub(super) fn new(token: Option<Value>, route: &Route) -> Option<Progress> {
        Some(Progress {
            token: token?,
            sink: route.sink.clone(),
            id: route.id.clone(),
            sent: AtomicU32::new(0),
        })
    }

    pub(super) fn tell(&self, waiting: &Waiting<'_>) {
        let token = &self.token;
        let progress = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        let params =
            json!({"progressToken": token, "progress": progress, "message": waiting.says()});
        let notification =
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params});
        self.sink.deliver(notification, Some(&self.id));
    }
}
