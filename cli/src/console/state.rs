//! What the console serves from: the store, the namespace, the tenants
//! it shows, the webhooks decisions are sent to, and its users; what of
//! the store it may show; and what it read (`read.rs`), kept a moment
//! (`fresh.rs`).

use idem::notify::Webhooks;
use idem::store::{RecordInfo, ScanFilter};
use idem::{IdemKey, IdemStore};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

use super::fresh::Fresh;
use super::read::{self, Namespace};
use super::users::Users;
use super::views;
use crate::refused::Refused;

/// What the console serves from.
pub(crate) struct Console {
    pub(super) store: Arc<dyn IdemStore>,
    /// The namespace's records.
    pub(super) filter: ScanFilter,
    /// The tenants shown; all when empty.
    pub(super) tenants: Vec<String>,
    pub(super) webhooks: Option<Webhooks>,
    pub(super) users: Users,
    /// The namespace and the decisions, as read a moment ago.
    namespace: Fresh<Namespace>,
    decisions: Fresh<Vec<Value>>,
}

/// How long one scan of the namespace serves every page that asks, at
/// least: half the page's refresh, so that what comes shows within two
/// refreshes.
const NAMESPACE_SERVES: Duration = Duration::from_millis(500);

/// How long one read of the decisions serves, at least: the page asks for
/// them every ten seconds.
const DECISIONS_SERVE: Duration = Duration::from_secs(5);

impl Console {
    /// A console on `store`'s records of `filter`'s namespace, of
    /// `tenants` (all when empty).
    pub(super) fn new(
        store: Arc<dyn IdemStore>,
        filter: ScanFilter,
        tenants: Vec<String>,
        webhooks: Option<Webhooks>,
        users: Users,
    ) -> Console {
        Console {
            store,
            filter,
            tenants,
            webhooks,
            users,
            namespace: Fresh::new(NAMESPACE_SERVES),
            decisions: Fresh::new(DECISIONS_SERVE),
        }
    }

    /// The records of the namespace this console shows, as read a
    /// moment ago.
    pub(super) async fn namespace(&self) -> Result<Arc<Namespace>, String> {
        self.namespace
            .get(|| read::namespace(&*self.store, &self.filter, |r| self.shows(r)))
            .await
    }

    /// The decisions the records this console shows keep, newest first,
    /// as read a moment ago.
    pub(super) async fn decisions(&self) -> Result<Arc<Vec<Value>>, String> {
        let read = || async {
            let namespace = self.namespace().await?;
            Ok(read::decisions(&*self.store, &namespace).await)
        };
        self.decisions.get(read).await
    }

    /// Forgets what was read: a decision was made, and the page that
    /// made it reads anew.
    pub(super) async fn decided(&self) {
        self.namespace.forget().await;
        self.decisions.forget().await;
    }

    /// The record under `key` if this console may show it (its tenant is
    /// one of `--tenant`'s, when given).
    pub(super) async fn visible(&self, key: &IdemKey) -> Result<Option<RecordInfo>, String> {
        let record = self
            .store
            .inspect(key)
            .await
            .map_err(|e| format!("cannot read {key}: {e}"))?;
        Ok(record.filter(|r| self.shows(r)))
    }

    /// Whether the record under `key` is one this console may decide:
    /// else, not found, as if it were not there.
    pub(super) async fn seen(&self, key: &IdemKey) -> Result<(), Refused> {
        match self.visible(key).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(Refused::NotFound(format!(
                "no record under {key} (expired, never written, or mistyped)"
            ))),
            Err(e) => Err(Refused::Store(e)),
        }
    }

    /// Whether this console shows `record`: all without `--tenant`;
    /// else only a record whose tenant is one of them (a sealed one, whose
    /// tenant cannot be read, is not).
    pub(super) fn shows(&self, record: &RecordInfo) -> bool {
        if self.tenants.is_empty() {
            return true;
        }
        views::tenant(record).is_some_and(|t| self.tenants.contains(&t))
    }
}
