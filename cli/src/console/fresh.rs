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
use std::time::Duration;

use tokio::sync::Mutex;
// Tokio's clock, which its tests can pause and move.
use tokio::time::Instant;

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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts the reads `fresh` makes, each taking `took` of the paused
    /// clock.
    async fn read(fresh: &Fresh<usize>, reads: &AtomicUsize, took: Duration) -> usize {
        let value = fresh
            .get(|| async {
                tokio::time::sleep(took).await;
                Ok(reads.fetch_add(1, Ordering::SeqCst) + 1)
            })
            .await;
        *value.expect("read")
    }

    /// A read is kept for the time asked, or four times what it took if
    /// longer; then read anew; and forgotten at once when told.
    #[tokio::test(start_paused = true)]
    async fn a_read_is_kept_as_long_as_asked_or_four_times_its_cost() {
        let (fresh, reads) = (Fresh::new(Duration::from_millis(500)), AtomicUsize::new(0));
        let cheap = Duration::from_millis(10);
        assert_eq!(read(&fresh, &reads, cheap).await, 1);
        tokio::time::advance(Duration::from_millis(490)).await;
        assert_eq!(
            read(&fresh, &reads, cheap).await,
            1,
            "kept for the time asked"
        );
        tokio::time::advance(Duration::from_millis(20)).await;
        assert_eq!(read(&fresh, &reads, cheap).await, 2, "then read anew");

        // A read of 1 s is kept 4 s, longer than the 0.5 s asked.
        fresh.forget().await;
        assert_eq!(
            read(&fresh, &reads, Duration::from_secs(1)).await,
            3,
            "forgotten"
        );
        tokio::time::advance(Duration::from_millis(3_990)).await;
        assert_eq!(
            read(&fresh, &reads, cheap).await,
            3,
            "kept four times its cost"
        );
        tokio::time::advance(Duration::from_millis(20)).await;
        assert_eq!(read(&fresh, &reads, cheap).await, 4);
    }

    /// Those who ask while a read is under way get that read: one read for
    /// all of them.
    #[tokio::test(start_paused = true)]
    async fn those_who_ask_during_a_read_share_it() {
        let (fresh, reads) = (Fresh::new(Duration::from_millis(500)), AtomicUsize::new(0));
        let took = Duration::from_millis(100);
        let values =
            futures_util::future::join_all((0..5).map(|_| read(&fresh, &reads, took))).await;
        assert_eq!(values, [1; 5]);
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }
}
