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
    token: Option<Value>,
    sink: Sink,
    id: Value,
    sent: AtomicU32,
}

impl Progress {
    pub(super) fn new(token: Option<Value>, route: &Route) -> Progress {
        let (sink, id) = (route.sink.clone(), route.id.clone());
        let sent = AtomicU32::new(0);
        Progress {
            token,
            sink,
            id,
            sent,
        }
    }

    pub(super) fn tell(&self, waiting: &Waiting<'_>) {
        let Some(token) = &self.token else {
            return;
        };
        let progress = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        let params =
            json!({"progressToken": token, "progress": progress, "message": waiting.says()});
        let notification =
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params});
        self.sink.deliver(notification, Some(&self.id));
    }
}
