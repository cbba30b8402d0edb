//! What a registry tells its webhooks (feature `notify`) of the decisions
//! it records: an approval or a refusal (`decide`), a resolution
//! (`resolve`); and how a process that is about to exit waits for them
//! to be sent.

use std::time::Duration;

use super::dispatch::Registry;
use crate::notify::{Event, EventKind};
use crate::store::{About, RecordInfo};

impl<S: Send + Sync + 'static> Registry<S> {
    /// Tells the registry's webhooks, if it has any, that `kind` happened
    /// to `record`'s operation; `add` adds to what the event says.
    pub(super) fn tell(
        &self,
        record: &RecordInfo,
        kind: EventKind,
        add: impl FnOnce(Event) -> Event,
    ) {
        let Some(notifier) = &self.inner.shared.notifier else {
            return;
        };
        notifier.send_made(kind, || {
            // A record that does not open (another registry's keys) is
            // told without what it is.
            let opened = self.opened_about(record).ok().flatten();
            let about = opened.as_deref().and_then(About::parse);
            let tool = record.tool.as_deref().unwrap_or_default();
            add(Event::new(kind, &record.key, tool, about.as_ref()))
        });
    }

    /// Waits until every webhook this registry queued so far is delivered
    /// or given up, for at most `within`; whether they all were (`true`
    /// without webhooks). For a process about to exit (`idem approve`):
    /// a server need not, as its webhooks are sent beside its calls.
    pub async fn flush_notifications(&self, within: Duration) -> bool {
        match &self.inner.shared.notifier {
            Some(notifier) => notifier.flush(within).await,
            None => true,
        }
    }
}
