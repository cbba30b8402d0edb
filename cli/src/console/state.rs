//! What the console serves from: the store, the namespace, the tenants
//! it shows, the webhooks decisions are sent to, and its users; and what
//! of the store it may show.

use idem::notify::Webhooks;
use idem::store::{RecordInfo, RecordState, ScanFilter};
use idem::{IdemKey, IdemStore};
use std::sync::Arc;

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
}

impl Console {
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

    /// The namespace's records in `state` this console shows.
    pub(super) async fn records(&self, state: RecordState) -> Result<Vec<RecordInfo>, String> {
        let filter = self.filter.clone().state(state);
        let mut records = Vec::new();
        crate::scan::scan(&*self.store, &filter, None, |r| {
            if self.shows(&r) {
                records.push(r);
            }
        })
        .await?;
        Ok(records)
    }

    /// Every record of the namespace this console shows, the failed
    /// ones read whole (a scan does not read payloads, and a refusal is
    /// a failed record's payload).
    pub(super) async fn all_records(&self) -> Result<Vec<RecordInfo>, String> {
        let mut records = Vec::new();
        crate::scan::scan(&*self.store, &self.filter, None, |r| {
            if self.shows(&r) {
                records.push(r);
            }
        })
        .await?;
        for record in &mut records {
            if record.state == RecordState::Failed && record.payload.is_none() {
                let read = self.store.inspect(&record.key).await;
                if let Ok(Some(whole)) = read {
                    *record = whole;
                }
            }
        }
        Ok(records)
    }
}
