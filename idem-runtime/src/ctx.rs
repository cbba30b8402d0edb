//! The contexts handed to tool bodies.

use std::ops::Deref;
use std::sync::Arc;

use crate::key::IdemKey;

/// What every tool body may see: the run it is called in and the
/// application state `S` the registry was built with.
pub struct Ctx<S = ()> {
    run_id: Arc<str>,
    state: Arc<S>,
}

impl<S> Ctx<S> {
    pub(crate) fn new(run_id: &str, state: Arc<S>) -> Ctx<S> {
        Ctx {
            run_id: run_id.into(),
            state,
        }
    }

    /// The agent run this call belongs to.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The application state given to [`Registry::builder`](crate::Registry::builder).
    pub fn state(&self) -> &S {
        &self.state
    }
}

impl<S> std::fmt::Debug for Ctx<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// The context of a write tool: a [`Ctx`] plus the operation's identity.
///
/// Pass [`idem_key`](Self::idem_key) downstream (a payment API's
/// idempotency key, a message id) so that even a duplicate that gets past
/// the store — a lapsed lease, a lost record — is deduplicated there.
pub struct WriteCtx<S = ()> {
    ctx: Ctx<S>,
    key: IdemKey,
    attempt: u32,
}

impl<S> WriteCtx<S> {
    pub(crate) fn new(ctx: Ctx<S>, key: IdemKey, attempt: u32) -> WriteCtx<S> {
        WriteCtx { ctx, key, attempt }
    }

    /// The operation's key: the same for every retry of this operation,
    /// across processes and restarts.
    pub fn idem_key(&self) -> &IdemKey {
        &self.key
    }

    /// How many earlier claims of this operation ended without a recorded
    /// result: released after a transient failure, or lapsed after a crash.
    /// `0` on the first run.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

impl<S> Deref for WriteCtx<S> {
    type Target = Ctx<S>;

    fn deref(&self) -> &Ctx<S> {
        &self.ctx
    }
}

impl<S> std::fmt::Debug for WriteCtx<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteCtx")
            .field("run_id", &self.ctx.run_id)
            .field("idem_key", &self.key)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}
