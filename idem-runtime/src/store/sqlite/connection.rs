//! The thread that owns a `SqliteStore`'s connection, and the jobs sent to
//! it: each job carries a [`Ticket`] that says whether its caller still
//! waits, so that an operation whose caller gave up (the registry's store
//! timeout, a dropped future) is never applied afterwards.
//!
//! Two places enforce it. While a job waits for another process's lock, the
//! busy handler gives up as soon as the caller has. And a write commits only
//! after [`Ticket::commit`] has won the race against the caller's give-up.
//! What remains is the commit itself (a page write, an fsync with
//! `synchronous_full`): a caller that gives up during it is told nothing
//! was done although the write lands, as with any store whose answer is
//! lost; the wrapper's retries are safe against that.
//!
//! A write that finds the connection free and the file's lock untaken
//! runs on its caller's thread instead ([`Worker::write`]): it starts and
//! commits within one poll, so there is no giving up halfway to guard
//! against, and a lock held elsewhere sends it to the thread before it has
//! done anything.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError, mpsc};
use std::time::{Duration, Instant};

use rusqlite::{Connection, Transaction, TransactionBehavior};
use tokio::sync::oneshot;

use super::error::{sql_error, thread_stopped};
use crate::error::StoreError;

/// The caller waits for the job.
const WAITING: u8 = 0;
/// The caller gave up: the job must change nothing.
const ABANDONED: u8 = 1;
/// The job is committing: the caller must wait for its answer.
const COMMITTING: u8 = 2;

/// A job's view of its caller.
#[derive(Clone)]
pub(super) struct Ticket(Arc<AtomicU8>);

impl Ticket {
    /// Whether the caller gave up.
    fn abandoned(&self) -> bool {
        self.0.load(Ordering::Acquire) == ABANDONED
    }

    /// Claims the right to commit: false if the caller gave up first.
    fn commit(&self) -> bool {
        self.0
            .compare_exchange(WAITING, COMMITTING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// The caller's side of a ticket: gives up when dropped before the answer,
/// unless the job already started committing.
struct Waiter(Arc<AtomicU8>);

impl Drop for Waiter {
    fn drop(&mut self) {
        let _ = self
            .0
            .compare_exchange(WAITING, ABANDONED, Ordering::AcqRel, Ordering::Acquire);
    }
}

type Job = Box<dyn FnOnce(&mut Connection, &Ticket) + Send>;

/// What the connection's thread is asked to do.
enum Work {
    /// A job, unless its caller gave up.
    Job(Job, Ticket),
    /// A checkpoint of the write-ahead log, on a connection of its own.
    Checkpoint,
}

/// How many commits pass between two checkpoints of the write-ahead log,
/// when writes commit on their callers' threads (SQLite's own checkpoint
/// would run inside the commit that crosses its threshold, on the async
/// runtime's thread). A write is two or three pages: about SQLite's
/// default of 1,000 pages.
const CHECKPOINT_EVERY: u32 = 400;

/// The handle on the connection's thread.
pub(super) struct Worker {
    jobs: mpsc::Sender<Work>,
    /// The connection, which the thread locks for each job.
    conn: Arc<Mutex<Connection>>,
    /// Whether a write may run on its caller's thread when the connection
    /// is free (not with an fsync per commit).
    inline: bool,
    /// Commits since the last checkpoint, when writes run inline.
    commits: AtomicU32,
}

thread_local! {
    /// The job the connection's thread is running, and how long it may
    /// wait for a lock: what the busy handler consults.
    static CURRENT: RefCell<Option<(Ticket, Instant)>> = const { RefCell::new(None) };
}

/// SQLite's busy handler on the connection's thread: keeps waiting for
/// another process's lock while the job's caller waits and the busy
/// timeout has not passed.
fn busy(retries: i32) -> bool {
    let go_on = CURRENT.with(|current| match &*current.borrow() {
        Some((ticket, deadline)) => !ticket.abandoned() && Instant::now() < *deadline,
        None => false,
    });
    if go_on {
        // 1, 2, 4 .. 16 ms: prompt at first, cheap when the wait is long.
        let pause = 1u64 << retries.clamp(0, 4);
        std::thread::sleep(Duration::from_millis(pause));
    }
    go_on
}

impl Worker {
    /// Starts the thread: `open` makes its connection, whose result is
    /// returned; jobs may wait `busy_timeout` for another process's lock.
    /// With `inline`, writes run on their callers' threads when they can
    /// (see [`write`](Self::write)) and the thread checkpoints the log
    /// over a second connection (`open` is called twice), so that a
    /// checkpoint never holds the first.
    pub(super) async fn start(
        open: impl Fn() -> Result<Connection, StoreError> + Send + 'static,
        busy_timeout: Duration,
        inline: bool,
    ) -> Result<Worker, StoreError> {
        let (ready_tx, ready_rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("idem-sqlite".into())
            .spawn(move || {
                let opened = open().and_then(|mut conn| {
                    conn.busy_handler(Some(busy)).map_err(sql_error)?;
                    let checkpoints = if inline {
                        conn.pragma_update(None, "wal_autocheckpoint", 0)
                            .map_err(sql_error)?;
                        Some(open()?)
                    } else {
                        None
                    };
                    Ok((conn, checkpoints))
                });
                match opened {
                    Ok((conn, checkpoints)) => {
                        let (jobs, rx) = mpsc::channel::<Work>();
                        let conn = Arc::new(Mutex::new(conn));
                        let _ = ready_tx.send(Ok((jobs, conn.clone())));
                        serve(&conn, checkpoints.as_ref(), &rx, busy_timeout);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(StoreError::backend)?;
        let (jobs, conn) = ready_rx
            .await
            .map_err(|_| StoreError::backend("the SQLite thread ended while opening"))??;
        Ok(Worker {
            jobs,
            conn,
            inline,
            commits: AtomicU32::new(0),
        })
    }

    /// Runs `f` in an immediate (write-locked) transaction and commits it.
    /// On the caller's thread when this process's connection is free and
    /// the file's write lock is taken at once, the usual case: no hand-off
    /// to the connection's thread and back, two wake-ups of a sleeping
    /// thread, which on a small VM cost more than the write. Otherwise on
    /// the connection's thread, which waits for another process's lock
    /// (see [`run`](Self::run)).
    pub(super) async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        if let Some(mut conn) = self.free() {
            // This thread has no job (`CURRENT`): the busy handler gives
            // up at once, and the write goes to the thread instead.
            match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
                Ok(tx) => {
                    let out = f(&tx).and_then(|out| {
                        tx.commit().map_err(sql_error)?;
                        Ok(out)
                    });
                    self.committed();
                    return out;
                }
                Err(e) if is_busy(&e) => {}
                Err(e) => return Err(sql_error(e)),
            }
        }
        let out = self.run(move |conn, ticket| write(conn, ticket, f)).await;
        self.committed();
        out
    }

    /// The connection, if writes may run inline and no job holds it.
    fn free(&self) -> Option<MutexGuard<'_, Connection>> {
        if !self.inline {
            return None;
        }
        match self.conn.try_lock() {
            Ok(conn) => Some(conn),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Counts a commit; every [`CHECKPOINT_EVERY`] of them, has the
    /// connection's thread checkpoint the log.
    fn committed(&self) {
        let commits = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
        if self.inline && commits.is_multiple_of(CHECKPOINT_EVERY) {
            let _ = self.jobs.send(Work::Checkpoint);
        }
    }

    /// Runs `f` on the connection's thread. If this future is dropped
    /// before `f` commits, `f` changes nothing.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, &Ticket) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let state = Arc::new(AtomicU8::new(WAITING));
        let _waiter = Waiter(state.clone());
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |conn, ticket| {
            let _ = tx.send(f(conn, ticket));
        });
        self.jobs
            .send(Work::Job(job, Ticket(state)))
            .map_err(|_| thread_stopped())?;
        rx.await.map_err(|_| thread_stopped())?
    }
}

/// The connection's thread: runs each job whose caller still waits, with
/// the busy handler's deadline set for it, and the checkpoints on their
/// own connection (`PASSIVE`: it copies what no reader needs and waits for
/// nobody; the writes go on meanwhile).
fn serve(
    conn: &Mutex<Connection>,
    checkpoints: Option<&Connection>,
    work: &mpsc::Receiver<Work>,
    busy_timeout: Duration,
) {
    while let Ok(next) = work.recv() {
        let (job, ticket) = match next {
            Work::Job(job, ticket) => (job, ticket),
            Work::Checkpoint => {
                let done = checkpoints.map(|c| c.execute_batch("PRAGMA wal_checkpoint(PASSIVE)"));
                if let Some(Err(e)) = done {
                    tracing::debug!(error = %e, "a checkpoint of the SQLite log failed; the next one tries again");
                }
                continue;
            }
        };
        if ticket.abandoned() {
            continue;
        }
        let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        let deadline = Instant::now() + busy_timeout;
        CURRENT.with(|c| *c.borrow_mut() = Some((ticket.clone(), deadline)));
        job(&mut conn, &ticket);
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

/// Whether SQLite answered that another connection holds the lock.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Runs `f` in an immediate (write-locked) transaction and commits it only
/// if the caller still waits; otherwise rolls it back.
pub(super) fn write<T>(
    conn: &mut Connection,
    ticket: &Ticket,
    f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let out = f(&tx)?;
    if !ticket.commit() {
        // Dropping `tx` rolls it back.
        return Err(StoreError::unavailable(
            "the caller gave up before the write committed; nothing was changed",
        ));
    }
    tx.commit().map_err(sql_error)?;
    Ok(out)
}
