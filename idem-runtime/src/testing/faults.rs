//! [`FaultyStore`]: a store wrapper that makes chosen operations fail or
//! hang, for the wrapper's fail-closed logic against an in-process store.
//! Backends with a server meet real network faults instead, through
//! [`Proxy`](super::Proxy).

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};
use crate::store::{Claim, Entry, IdemStore, LeaseToken, RecordInfo, ScanFilter, ScanPage};

/// Which store operation a [`FaultyStore`] disturbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Op {
    /// `claim`
    Claim,
    /// `complete`
    Complete,
    /// `release`
    Release,
    /// `fail`
    Fail,
    /// `renew`
    Renew,
    /// `get`
    Get,
}

/// How a [`FaultyStore`] disturbs an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Fault {
    /// Pass it through.
    None = 0,
    /// Answer `StoreError::Unavailable` without touching the store.
    Unavailable = 1,
    /// Never answer.
    Hang = 2,
}

impl Fault {
    /// The fault `cell` holds (as [`FaultyStore::set`] stored it).
    fn of(cell: &AtomicU8) -> Fault {
        let stored = cell.load(Ordering::SeqCst);
        [Fault::Unavailable, Fault::Hang]
            .into_iter()
            .find(|fault| *fault as u8 == stored)
            .unwrap_or(Fault::None)
    }
}

/// A store wrapper that makes chosen operations fail or hang, to show how
/// the wrapper behaves when the store is down or slow. Everything else goes
/// to the real backend underneath.
pub struct FaultyStore<S> {
    inner: S,
    faults: [AtomicU8; 6],
}

impl<S: IdemStore> FaultyStore<S> {
    /// Wraps `inner`, faultless.
    pub fn new(inner: S) -> FaultyStore<S> {
        FaultyStore {
            inner,
            faults: Default::default(),
        }
    }

    /// Sets how `op` behaves from now on.
    pub fn set(&self, op: Op, fault: Fault) {
        self.faults[op as usize].store(fault as u8, Ordering::SeqCst);
    }

    /// Makes every operation behave as `fault`.
    pub fn set_all(&self, fault: Fault) {
        for f in &self.faults {
            f.store(fault as u8, Ordering::SeqCst);
        }
    }

    async fn gate<T>(
        &self,
        op: Op,
        fut: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match Fault::of(&self.faults[op as usize]) {
            Fault::Unavailable => Err(StoreError::unavailable("injected outage")),
            Fault::Hang => std::future::pending().await,
            Fault::None => fut.await,
        }
    }
}

impl<S: IdemStore> IdemStore for FaultyStore<S> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn claim(
        &self,
        key: &IdemKey,
        tool: &str,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        self.gate(Op::Claim, self.inner.claim(key, tool, fingerprint, lease))
            .await
    }
    async fn complete(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        result: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.gate(Op::Complete, self.inner.complete(key, token, result, ttl))
            .await
    }
    async fn release(&self, key: &IdemKey, token: &LeaseToken) -> Result<(), StoreError> {
        self.gate(Op::Release, self.inner.release(key, token)).await
    }
    async fn fail(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        error: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.gate(Op::Fail, self.inner.fail(key, token, error, ttl))
            .await
    }
    async fn renew(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        self.gate(Op::Renew, self.inner.renew(key, token, lease))
            .await
    }
    async fn get(&self, key: &IdemKey) -> Result<Option<Entry>, StoreError> {
        self.gate(Op::Get, self.inner.get(key)).await
    }
    async fn purge_expired(&self) -> Result<u64, StoreError> {
        self.inner.purge_expired().await
    }
    async fn count_expired(&self) -> Result<u64, StoreError> {
        self.inner.count_expired().await
    }
    async fn inspect(&self, key: &IdemKey) -> Result<Option<RecordInfo>, StoreError> {
        self.inner.inspect(key).await
    }
    async fn scan(
        &self,
        filter: &ScanFilter,
        cursor: &str,
        limit: usize,
    ) -> Result<ScanPage, StoreError> {
        self.inner.scan(filter, cursor, limit).await
    }
}
