//! What the console read from the store, kept a moment: every page open
//! on the console refreshes each second, and a scan of a namespace with
//! 10,000 operations waiting is not free, so the pages share one read a
//! moment instead of making one each. A read is kept at least as long as
//! asked, and four times as long as it took, so that the console keeps
//! the store busy at most a fifth of the time however large the
//! namespace grows. A decision made here forgets what was kept, so the
//! page that made it sees it at once.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

/// How many times as long as a read took it is kept.
const KEPT_PER_READ: u32 = 4;

/// One read, as it came, when, and how long it is kept.
pub(super) struct Fresh<T> {
    /// How long a read is kept at least.
    serves: Duration,
    kept: Mutex<Option<Kept<T>>>,
}

struct Kept<T> {
    at: Instant,
    until: Duration,
    value: Arc<T>,
}

impl<T> Fresh<T> {
    /// A read kept at least for `serves`.
    pub(super) fn new(serves: Duration) -> Fresh<T> {
        Fresh {
            serves,
            kept: Mutex::new(None),
        }
    }

    /// What was read a moment ago, or what `read` reads now. Those who
    /// ask while it is read wait for that read rather than make their
    /// own; a read that fails is not kept.
    pub(super) async fn get<F>(&self, read: impl FnOnce() -> F) -> Result<Arc<T>, String>
    where
        F: Future<Output = Result<T, String>>,
    {
        let mut kept = self.kept.lock().await;
        if let Some(kept) = kept.as_ref()
            && kept.at.elapsed() < kept.until
        {
            return Ok(kept.value.clone());
        }
        let started = Instant::now();
        let value = Arc::new(read().await?);
        let until = self.serves.max(started.elapsed() * KEPT_PER_READ);
        *kept = Some(Kept {
            at: Instant::now(),
            until,
            value: value.clone(),
        });
        Ok(value)
    }

    /// Forgets what was read: the next `get` reads anew.
    pub(super) async fn forget(&self) {
        *self.kept.lock().await = None;
    }
}
