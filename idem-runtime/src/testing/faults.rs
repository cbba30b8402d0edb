//! [`FaultyStore`]: a store wrapper that makes chosen operations fail or
//! hang, for the wrapper's fail-closed logic against an in-process store.
//! Backends with a server meet real network faults instead, through
//! [`Proxy`](super::Proxy).

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use crate::error::StoreError;
use crate::key::IdemKey;
use crate::store::{
    BoxFuture, Claim, ClaimRequest, Entry, IdemStore, LeaseToken, Outcome, RecordInfo, ScanFilter,
    ScanPage,
};

/// Which store operation a [`FaultyStore`] disturbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Op {
    /// `claim`
    Claim,
    /// `settle` with [`Outcome::Done`]
    Complete,
    /// `settle` with [`Outcome::Released`]
    Release,
    /// `settle` with [`Outcome::Failed`]
    Fail,
    /// `settle` with [`Outcome::Unknown`]
    MarkUnknown,
    /// `renew`
    Renew,
    /// `get`
    Get,
    /// `settle` with [`Outcome::Awaiting`]
    AskApproval,
    /// `settle` with [`Outcome::Approved`]
    Approve,
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
    faults: [AtomicU8; 9],
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

    /// `operation` as the fault set for `op` disturbs it, judged when it
    /// is first polled.
    fn gate<'a, T: Send + 'a>(
        &'a self,
        op: Op,
        operation: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        Box::pin(async move {
            match Fault::of(&self.faults[op as usize]) {
                Fault::Unavailable => Err(StoreError::unavailable("injected outage")),
                Fault::Hang => std::future::pending().await,
                Fault::None => operation.await,
            }
        })
    }
}

impl<S: IdemStore> IdemStore for FaultyStore<S> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn claim<'a>(
        &'a self,
        key: &'a IdemKey,
        request: ClaimRequest<'a>,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        self.gate(Op::Claim, self.inner.claim(key, request))
    }

    fn settle<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        outcome: Outcome<'a>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let op = match outcome {
            Outcome::Done { .. } => Op::Complete,
            Outcome::Failed { .. } => Op::Fail,
            Outcome::Released => Op::Release,
            Outcome::Unknown { .. } => Op::MarkUnknown,
            Outcome::Awaiting { .. } => Op::AskApproval,
            Outcome::Approved { .. } => Op::Approve,
        };
        self.gate(op, self.inner.settle(key, token, outcome))
    }

    fn renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.gate(Op::Renew, self.inner.renew(key, token, lease))
    }

    fn get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        self.gate(Op::Get, self.inner.get(key))
    }

    fn announce<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.announce(key)
    }

    fn watch<'a>(&'a self, key: &'a IdemKey, within: Duration) -> BoxFuture<'a, ()> {
        self.inner.watch(key, within)
    }

    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.inner.purge_expired()
    }

    fn count_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.inner.count_expired()
    }

    fn inspect<'a>(
        &'a self,
        key: &'a IdemKey,
    ) -> BoxFuture<'a, Result<Option<RecordInfo>, StoreError>> {
        self.inner.inspect(key)
    }

    fn scan<'a>(
        &'a self,
        filter: &'a ScanFilter,
        cursor: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<ScanPage, StoreError>> {
        self.inner.scan(filter, cursor, limit)
    }
}
