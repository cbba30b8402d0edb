//! What the engine tells the registry about a call, beyond its result:
//! how it was answered (ran, replayed, waited for, run without a claim),
//! and the call's span, on which it records the key and the attempt.
//! The registry turns it into the span's outcome and the metrics
//! (docs/spec.md, "Seeing every decision").

use std::sync::atomic::{AtomicU8, Ordering};

use crate::key::IdemKey;

/// How a call was answered, when its result alone does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum How {
    /// Nothing was noted: a read tool ran, or the call ended before the
    /// store was asked.
    Unnoted = 0,
    /// The body ran under a claim.
    Ran = 1,
    /// A recorded outcome was replayed at once.
    Replayed = 2,
    /// A recorded outcome was replayed after waiting for the first call.
    Waited = 3,
    /// The body ran without a claim (`OnStoreError::Run`).
    RanWithoutClaim = 4,
    /// `verify` said an uncertain operation took effect: its result was
    /// recorded without running the body.
    Verified = 5,
    /// The operation was recorded as awaiting a person's approval; nothing
    /// ran.
    AwaitingApproval = 6,
    /// The body ran, using up a person's approval of the operation.
    RanApproved = 7,
    /// A person's refusal of the operation was replayed.
    Denied = 8,
}

/// One call's span, how it was answered, and (feature `metrics`) its
/// tool's metric keys.
#[derive(Debug)]
pub(crate) struct CallTrace<'a> {
    span: tracing::Span,
    how: AtomicU8,
    #[cfg(feature = "metrics")]
    metrics: Option<&'a crate::metrics::ToolKeys>,
    #[cfg(not(feature = "metrics"))]
    metrics: std::marker::PhantomData<&'a ()>,
}

impl<'a> CallTrace<'a> {
    pub(crate) fn new(span: tracing::Span) -> CallTrace<'a> {
        CallTrace {
            span,
            how: AtomicU8::new(How::Unnoted as u8),
            metrics: Default::default(),
        }
    }

    /// The called tool's metric keys.
    #[cfg(feature = "metrics")]
    pub(crate) fn with_metrics(mut self, metrics: Option<&'a crate::metrics::ToolKeys>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The called tool's metric keys, if it is registered.
    #[cfg(feature = "metrics")]
    pub(crate) fn metrics(&self) -> Option<&'a crate::metrics::ToolKeys> {
        self.metrics
    }

    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Notes how the call was answered.
    pub(crate) fn answered(&self, how: How) {
        self.how.store(how as u8, Ordering::Relaxed);
    }

    /// How the call was answered.
    pub(crate) fn how(&self) -> How {
        match self.how.load(Ordering::Relaxed) {
            1 => How::Ran,
            2 => How::Replayed,
            3 => How::Waited,
            4 => How::RanWithoutClaim,
            5 => How::Verified,
            6 => How::AwaitingApproval,
            7 => How::RanApproved,
            8 => How::Denied,
            _ => How::Unnoted,
        }
    }

    /// Records the operation's key on the span (`idem.key`).
    pub(crate) fn key(&self, key: &IdemKey) {
        if !self.span.is_disabled() {
            self.span.record("idem.key", key.as_str());
        }
    }

    /// Records the claim's attempt on the span (`idem.attempt`).
    pub(crate) fn attempt(&self, attempt: u32) {
        self.span.record("idem.attempt", attempt);
    }
}

/// Notes on `trace`, if the call has one.
pub(crate) fn note(trace: Option<&CallTrace<'_>>, how: How) {
    if let Some(trace) = trace {
        trace.answered(how);
    }
}
