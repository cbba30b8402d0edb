//! Holding a claim from the moment it is acquired until its outcome is
//! recorded: the heartbeat that renews the lease beside the body (never
//! blocking it), the signal the body sees when its lease is lost, and the
//! settles (done, failed, released, unknown), retried
//! while the lease can be held.
//!
//! The lease is *known held* until the send time of the last successful
//! claim or renewal plus the lease: a renewal that fails leaves that
//! deadline where it was, and when it passes, another worker may claim the
//! key, so the body is told its lease is lost.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::settings::{StoreMeta, ToolSettings};
use super::task::bounded;
use super::trace::CallTrace;
use crate::ctx::Lease;
use crate::error::StoreError;
use crate::key::IdemKey;
use crate::seal::{PayloadKind, ResultKeys, seal};
use crate::store::{IdemStore, LeaseToken, Outcome};

/// The first pause between two tries of a failed store operation.
const FIRST_BACKOFF: Duration = Duration::from_millis(20);
/// The longest pause between two tries of a settling operation.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What a call's hold works with: the store and the tool's settings.
#[derive(Clone, Copy)]
pub(crate) struct Site<'a> {
    pub(crate) store: &'a dyn IdemStore,
    pub(crate) settings: &'a ToolSettings,
    /// The registry's bound on one store operation.
    pub(crate) limit: Duration,
    /// The tool's name, for logs and errors.
    pub(crate) tool: &'a str,
    /// The tool's output schema, for the note of an unknown outcome.
    pub(crate) output_schema: Option<&'a serde_json::Value>,
    /// What seals the payloads written.
    pub(crate) result_keys: Option<&'a ResultKeys>,
    /// The store's kind and metric keys.
    pub(crate) meta: &'a StoreMeta,
    /// Where the call's span, outcome and (feature `metrics`) its tool's
    /// metric keys are.
    pub(crate) trace: Option<&'a CallTrace<'a>>,
    /// What the record says of the operation (sealed as it is written),
    /// for the webhooks.
    #[cfg(feature = "notify")]
    pub(crate) about: Option<&'a str>,
    /// The registry's webhooks.
    #[cfg(feature = "notify")]
    pub(crate) notifier: Option<&'a crate::notify::Webhooks>,
}

/// One call's hold on its claim.
pub(crate) struct Hold<'a> {
    site: Site<'a>,
    key: &'a IdemKey,
    token: LeaseToken,
    claimed_at: Instant,
    /// Until when the lease is known held.
    held_until: Mutex<Instant>,
    /// The operations of one call never overlap: a renewal racing the
    /// settle would find the record settled and report the lease lost.
    ops: tokio::sync::Mutex<()>,
    /// What the body sees of the lease.
    lease: Arc<Lease>,
    /// The store said another worker holds the key: nothing this call
    /// writes can land any more.
    lease_lost: AtomicBool,
}

impl<'a> Hold<'a> {
    /// A hold on the claim `token` of `key`, acquired by a request sent at
    /// `claimed_at`; `lease` is what the body sees of it.
    pub(crate) fn new(
        site: Site<'a>,
        key: &'a IdemKey,
        token: LeaseToken,
        claimed_at: Instant,
        lease: Arc<Lease>,
    ) -> Hold<'a> {
        Hold {
            site,
            key,
            token,
            claimed_at,
            held_until: Mutex::new(claimed_at + site.settings.lease),
            ops: tokio::sync::Mutex::new(()),
            lease,
            lease_lost: AtomicBool::new(false),
        }
    }

    /// `text` as the payload to write: sealed when the registry has keys.
    pub(crate) fn sealed(&self, kind: PayloadKind, text: String) -> String {
        seal(self.site.result_keys, self.key, kind, text)
    }

    pub(crate) fn key(&self) -> &'a IdemKey {
        self.key
    }

    pub(crate) fn token(&self) -> &LeaseToken {
        &self.token
    }

    pub(crate) fn tool(&self) -> &'a str {
        self.site.tool
    }

    /// The tool's output schema, if its info gives one.
    pub(crate) fn output_schema(&self) -> Option<&'a serde_json::Value> {
        self.site.output_schema
    }

    pub(crate) fn settings(&self) -> &'a ToolSettings {
        self.site.settings
    }

    /// The tool's metric keys.
    #[cfg(feature = "metrics")]
    pub(crate) fn metrics(&self) -> Option<&'a crate::metrics::ToolKeys> {
        self.site.trace.and_then(CallTrace::metrics)
    }

    /// Tells the registry's webhooks, if it has any, that `kind` happened
    /// to the operation: an event of what the record says of it (opened;
    /// hidden fields replaced, as operators see them), to which `add`
    /// adds, made only when it can be queued.
    #[cfg(feature = "notify")]
    pub(crate) fn tell(
        &self,
        kind: crate::notify::EventKind,
        add: impl FnOnce(crate::notify::Event) -> crate::notify::Event,
    ) {
        let Some(notifier) = self.site.notifier else {
            return;
        };
        notifier.send_made(kind, || {
            let about = self.site.about.and_then(|text| {
                let (keys, key) = (self.site.result_keys, self.key);
                let opened = crate::seal::open(keys, key, PayloadKind::About, text.to_owned());
                crate::store::About::parse(&opened.ok()?)
            });
            let event = crate::notify::Event::new(kind, self.key, self.tool(), about.as_ref());
            add(event)
        });
    }

    /// How long a recorded outcome is kept.
    pub(crate) fn ttl(&self) -> Duration {
        self.site.settings.ttl
    }

    /// The largest result or error text recorded.
    pub(crate) fn max_result_bytes(&self) -> usize {
        self.site.settings.max_result_bytes
    }

    /// `text` as it can be recorded by every store and replayed: NUL
    /// characters (which PostgreSQL's `text` refuses) replaced by U+FFFD,
    /// and cut to `max_result_bytes` on a character boundary. The caller
    /// gets the same text as its duplicates.
    pub(crate) fn storable_error(&self, text: &str) -> String {
        const CUT: &str = " [truncated]";
        let limit = self.max_result_bytes();
        let mut text = text.replace('\0', "\u{fffd}");
        if text.len() > limit {
            let mut end = limit.saturating_sub(CUT.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str(CUT);
        }
        text
    }

    fn held_until(&self) -> Instant {
        *self
            .held_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn extend(&self, until: Instant) {
        let mut held = self
            .held_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *held = (*held).max(until);
    }

    /// Tells the body its lease is lost (once).
    fn lose(&self, why: &str) {
        if self.lease.lose() {
            #[cfg(feature = "metrics")]
            if let Some(keys) = self.metrics() {
                crate::metrics::lease_lost(keys);
            }
            tracing::warn!(tool = self.site.tool, key = %self.key, why, "lease lost while the tool runs: another worker may run this operation");
        }
    }

    /// One store operation of this call, bounded by the store timeout and
    /// never overlapping another.
    async fn op<T>(
        &self,
        name: &'static str,
        fut: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let _turn = self.ops.lock().await;
        let result = bounded(self.site.meta, self.site.limit, name, fut).await;
        if matches!(result, Err(StoreError::LeaseLost)) {
            self.lease_lost.store(true, Ordering::Relaxed);
        }
        result
    }

    /// Renews the lease every third of it, beside the body and beside the
    /// recording of its outcome; retries a failed renewal sooner; tells
    /// the body when the lease is lost. Renews up to `max_hold` after the
    /// claim, then lets the lease lapse. Never ends by itself.
    pub(crate) async fn heartbeat(&self) -> Infallible {
        let lease = self.site.settings.lease;
        let period = lease / 3;
        let give_up = self.claimed_at + self.site.settings.max_hold;
        let mut next = self.claimed_at + period;
        let mut backoff = FIRST_BACKOFF;
        loop {
            // Wake for the next renewal, or when the lease runs out first.
            let held_until = self.held_until();
            let wake = if held_until > Instant::now() {
                next.min(held_until)
            } else {
                next
            };
            tokio::time::sleep_until(wake).await;
            let now = Instant::now();
            if now >= self.held_until() {
                self.lose("renewals failed until the lease ran out");
            }
            if now < next {
                continue;
            }
            let remaining = give_up.saturating_duration_since(now);
            if remaining.is_zero() {
                tracing::warn!(tool = self.site.tool, key = %self.key, max_hold = ?self.site.settings.max_hold, "max_hold reached: the lease is no longer renewed and will lapse");
                tokio::time::sleep_until(self.held_until()).await;
                self.lose("max_hold reached");
                return std::future::pending().await;
            }
            let extension = lease.min(remaining);
            // Boxed: a renewal is rare beside a call, and its future
            // would enlarge every call's.
            match Box::pin(self.renew(extension)).await {
                Ok(()) => {
                    #[cfg(feature = "metrics")]
                    if let Some(keys) = self.metrics() {
                        crate::metrics::lease_renewed(keys);
                    }
                    self.extend(now + extension);
                    next = now + period;
                    backoff = FIRST_BACKOFF;
                }
                Err(StoreError::LeaseLost) => {
                    self.lose("the store says another worker holds the key");
                    return std::future::pending().await;
                }
                Err(e) => {
                    tracing::warn!(tool = self.site.tool, key = %self.key, error = %e, "lease renewal failed; retrying");
                    next = Instant::now() + backoff;
                    backoff = (backoff * 2).min(period.max(FIRST_BACKOFF));
                }
            }
        }
    }

    /// One renewal. If the lease runs out while it is in flight (a store
    /// that stalls), the body is told at once; the renewal goes on, and
    /// may still succeed if nobody claimed the key meanwhile.
    async fn renew(&self, extension: Duration) -> Result<(), StoreError> {
        let renewal = self.op(
            "renew",
            self.site.store.renew(self.key, &self.token, extension),
        );
        let mut renewal = std::pin::pin!(renewal);
        match tokio::time::timeout_at(self.held_until(), renewal.as_mut()).await {
            Ok(result) => result,
            Err(_) => {
                self.lose("the lease ran out while a renewal was in flight");
                renewal.await
            }
        }
    }

    /// Settles the claim with `outcome`, retrying a retryable failure (a
    /// dropped connection, a timeout) with backoff: up to `max_hold` after
    /// the claim (and at least while the lease is known held) to record a
    /// result or a failure, without which a retry would run the body again;
    /// only while the lease is known held to release, which the lease's
    /// lapse achieves anyway. Backends retry an operation whose connection
    /// dropped, and a settle repeated with the same token after it took
    /// effect succeeds, so a retry is always safe.
    pub(crate) async fn settle(&self, outcome: Outcome<'_>) -> Result<(), StoreError> {
        // The operation's name in traces and metrics.
        let name = match outcome {
            Outcome::Done { .. } => "settle_done",
            Outcome::Failed { .. } => "settle_failed",
            Outcome::Released => "settle_released",
            Outcome::Unknown { .. } => "settle_unknown",
            Outcome::Awaiting { .. } => "settle_awaiting",
            Outcome::Approved { .. } => "settle_approved",
        };
        let mut backoff = FIRST_BACKOFF;
        loop {
            let settled = self.site.store.settle(self.key, &self.token, outcome);
            let error = match self.op(name, settled).await {
                Ok(()) => return Ok(()),
                Err(e) if !e.is_retryable() => return Err(e),
                Err(e) => e,
            };
            if self.lease_lost.load(Ordering::Relaxed) {
                // A renewal was refused meanwhile: this cannot land.
                return Err(StoreError::LeaseLost);
            }
            let deadline = match outcome {
                Outcome::Released => self.held_until(),
                _ => (self.claimed_at + self.site.settings.max_hold).max(self.held_until()),
            };
            let now = Instant::now();
            if now + backoff >= deadline {
                return Err(error);
            }
            tracing::warn!(tool = self.site.tool, key = %self.key, op = name, error = %error, retry_in = ?backoff, "store operation failed; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}
