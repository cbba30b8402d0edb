//! News of changed records, for the calls that wait on them
//! ([`IdemStore::announce`](super::IdemStore::announce),
//! [`IdemStore::watch`](super::IdemStore::watch)): a key announced is
//! told to every call of this process watching it; a store that carries
//! announcements between processes (PostgreSQL `NOTIFY`, Redis `PUBLISH`)
//! also listens for them, on a connection of its own, from the first
//! watch until the store is dropped, and tells what it hears here.
//!
//! News is a hint, never the truth: a waiting call reads the record
//! again when told, and looks at it now and then anyway, so an
//! announcement lost (a listener reconnecting, a store that carries none)
//! costs only time.

// The listener is for the stores that carry announcements between
// processes; without them, only the announcements within a process are.
#![cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code))]

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::broadcast;

use crate::error::StoreError;
use crate::key::IdemKey;
use crate::store::BoxFuture;

/// How many announcements a watcher may fall behind before it is simply
/// woken (it then reads the record, as on news of its own key).
const BACKLOG: usize = 256;

/// How long a listener whose connection failed or ended waits before the
/// next, at first and at most (doubling in between).
const RELISTEN_FIRST: Duration = Duration::from_secs(1);
const RELISTEN_AT_MOST: Duration = Duration::from_secs(30);

/// The announcements of one store, within this process, and its
/// listener for those of other processes, once started.
pub(crate) struct News {
    teller: Teller,
    /// The listener, once started; aborted when the store is dropped.
    listening: Mutex<Option<Listener>>,
}

/// The task that listens; dropping this stops it.
struct Listener(tokio::task::JoinHandle<()>);

impl Drop for Listener {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What tells the watchers of this process: a handle a listener keeps.
#[derive(Clone)]
pub(crate) struct Teller(broadcast::Sender<Arc<str>>);

impl Teller {
    /// Tells the calls watching `key` that its record changed.
    pub(crate) fn tell(&self, key: &str) {
        // No watcher at all is no error.
        let _ = self.0.send(Arc::from(key));
    }
}

impl News {
    pub(crate) fn new() -> News {
        News {
            teller: Teller(broadcast::channel(BACKLOG).0),
            listening: Mutex::new(None),
        }
    }

    /// Tells the calls of this process watching `key` that its record
    /// changed: the whole of [`IdemStore::announce`] for a store whose
    /// records are one process's (or seen by looking from the others).
    ///
    /// [`IdemStore::announce`]: crate::IdemStore::announce
    pub(crate) fn announce(&self, key: &IdemKey) -> BoxFuture<'static, Result<(), StoreError>> {
        self.teller.tell(key.as_str());
        Box::pin(async { Ok(()) })
    }

    /// Starts, unless it runs already, a task that listens with the
    /// function `make` makes (which tells what it hears through the
    /// [`Teller`] it is given, and returns when its connection ends or
    /// fails, with why), again and again, until this is dropped. `what`
    /// names the store in logs. A listener that stopped (its runtime shut
    /// down, while the store lives on for another) is started again.
    pub(crate) fn listen<F, Fut>(&self, what: &'static str, make: impl FnOnce() -> F)
    where
        F: Fn(Teller) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        let mut listening = self
            .listening
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if listening.as_ref().is_none_or(|l| l.0.is_finished()) {
            let listen = relisten(what, self.teller.clone(), make());
            *listening = Some(Listener(tokio::spawn(listen)));
        }
    }

    /// Returns once `key` is told, or after `within`, whichever comes
    /// first; sooner when this watcher fell behind the news.
    pub(crate) async fn watch(&self, key: &IdemKey, within: Duration) {
        let mut news = self.teller.0.subscribe();
        let told = async {
            loop {
                match news.recv().await {
                    Ok(told) if *told == *key.as_str() => return,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    // This holds the sender: never closed.
                    Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                }
            }
        };
        let _ = tokio::time::timeout(within, told).await;
    }
}

/// Listens with `listen`, again after a pause each time it ends: the
/// pause doubles while listens fail at once, and starts over after one
/// that lasted.
async fn relisten<F, Fut>(what: &'static str, teller: Teller, listen: F)
where
    F: Fn(Teller) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut pause = RELISTEN_FIRST;
    loop {
        let started = tokio::time::Instant::now();
        match listen(teller.clone()).await {
            Ok(()) => tracing::debug!(store = what, "the connection that listened for news ended"),
            Err(why) => {
                tracing::debug!(store = what, error = %why, "could not listen for news; waiting calls look at their records meanwhile")
            }
        }
        if started.elapsed() > RELISTEN_AT_MOST {
            pause = RELISTEN_FIRST;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RELISTEN_AT_MOST);
    }
}
