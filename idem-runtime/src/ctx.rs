//! The contexts handed to tool bodies.

use std::ops::Deref;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

use crate::key::IdemKey;

/// What every tool body may see: the run it is called in and the
/// application state `S` the registry was built with.
pub struct Ctx<S = ()> {
    run_id: Arc<str>,
    tenant: Option<Arc<str>>,
    state: Arc<S>,
}

impl<S> Ctx<S> {
    /// This context without its state, for the approval function of a
    /// tool that works with any state: what the macros pass.
    pub(crate) fn stateless(&self) -> Ctx<()> {
        Ctx {
            run_id: self.run_id.clone(),
            tenant: self.tenant.clone(),
            state: Arc::new(()),
        }
    }

    pub(crate) fn new(run_id: &str, tenant: Option<&str>, state: Arc<S>) -> Ctx<S> {
        Ctx {
            run_id: run_id.into(),
            tenant: tenant.map(Into::into),
            state,
        }
    }

    /// The agent run this call belongs to.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The tenant the call is made for
    /// ([`CallContext::tenant`](crate::CallContext::tenant)), if any.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
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

/// The context of a write tool: a [`Ctx`] plus the operation's identity
/// and its lease.
///
/// Pass [`idem_key`](Self::idem_key) downstream (a payment API's
/// idempotency key, a message id) so that even a duplicate that gets past
/// the store — a lapsed lease, a lost record — is deduplicated there.
///
/// # A body that outlives its lease
///
/// The registry renews the claim's lease while the body runs. If renewals
/// fail until the lease runs out (the store is unreachable or too slow) or
/// the store says another worker took the key over, the lease is lost:
/// another worker may now run the same operation. The body is not
/// cancelled — stopping a side effect half-way can be worse than finishing
/// it — but it can tell: [`lease_lost`](Self::lease_lost) resolves and
/// [`is_lease_lost`](Self::is_lease_lost) turns true, so a body with steps
/// can stop before its next one, and [`fencing_token`](Self::fencing_token)
/// lets a downstream refuse the older worker's writes. Whatever such a body
/// returns is not recorded over the new owner's record: its caller gets
/// [`ToolError::LeaseLost`](crate::ToolError::LeaseLost).
pub struct WriteCtx<S = ()> {
    ctx: Ctx<S>,
    key: IdemKey,
    attempt: u32,
    lease: Arc<Lease>,
    claimed: bool,
}

/// A call's lease as its hold tells its body: lost or not, and a wake-up
/// when it is lost. (A flag and one `Notify`: a `watch` channel, made on
/// every call, cost more than the rest of the context.)
#[derive(Debug, Default)]
pub(crate) struct Lease {
    lost: AtomicBool,
    changed: Notify,
}

impl Lease {
    /// Marks the lease lost; whether it was not already.
    pub(crate) fn lose(&self) -> bool {
        let first = !self.lost.swap(true, Ordering::AcqRel);
        if first {
            self.changed.notify_waiters();
        }
        first
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Resolves when the lease is lost; never, while it is held.
    async fn lost(&self) {
        loop {
            // Listening before looking, so that a loss between the two is
            // not missed.
            let mut changed = pin!(self.changed.notified());
            changed.as_mut().enable();
            if self.is_lost() {
                return;
            }
            changed.await;
        }
    }
}

impl<S> WriteCtx<S> {
    /// `lease` is the call's, as its hold tells it.
    pub(crate) fn new(ctx: Ctx<S>, key: IdemKey, attempt: u32, lease: Arc<Lease>) -> WriteCtx<S> {
        WriteCtx {
            ctx,
            key,
            attempt,
            lease,
            claimed: true,
        }
    }

    /// A context for a body run without a claim
    /// ([`OnStoreError::Run`](crate::OnStoreError::Run)): attempt 0, a lease
    /// that is never lost.
    /// This context without its state, for the `verify` of a tool that
    /// works with any state (and so cannot use it): what the macros pass.
    pub(crate) fn stateless(&self) -> WriteCtx<()> {
        WriteCtx {
            ctx: Ctx {
                run_id: self.ctx.run_id.clone(),
                tenant: self.ctx.tenant.clone(),
                state: Arc::new(()),
            },
            key: self.key.clone(),
            attempt: self.attempt,
            lease: self.lease.clone(),
            claimed: self.claimed,
        }
    }

    pub(crate) fn unclaimed(ctx: Ctx<S>, key: IdemKey) -> WriteCtx<S> {
        WriteCtx {
            ctx,
            key,
            attempt: 0,
            lease: Arc::default(),
            claimed: false,
        }
    }

    /// Whether this call holds the operation's claim: `true`, except for a
    /// tool with `on_store_error = "run"` whose store was unreachable, which
    /// runs without one ([`OnStoreError::Run`](crate::OnStoreError::Run)):
    /// a duplicate may then run too, and only a downstream deduplicating on
    /// [`idem_key`](Self::idem_key) catches it.
    pub fn is_claimed(&self) -> bool {
        self.claimed
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

    /// A number that grows with every claim of this operation: a worker
    /// that takes the key over after another's lease lapsed, or after a
    /// transient failure, has a higher one. A downstream that remembers the
    /// highest token it has seen for an [`idem_key`](Self::idem_key) and
    /// refuses lower ones fences off a worker that lost its lease. (It is
    /// [`attempt`](Self::attempt), which only grows while the operation's
    /// record lives: up to the result TTL, or an hour after its last lease.)
    pub fn fencing_token(&self) -> u64 {
        u64::from(self.attempt)
    }

    /// Whether this call's lease has been lost: the store said another
    /// worker took the key over, or renewals failed until the lease ran
    /// out, so another worker may be running the operation now.
    pub fn is_lease_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// Resolves when this call's lease is lost (see
    /// [`is_lease_lost`](Self::is_lease_lost)); never, while it is held.
    /// Race it against a step that should not run twice:
    ///
    /// ```
    /// # use idem_runtime::WriteCtx;
    /// # async fn send(_: &str) -> Result<(), String> { Ok(()) }
    /// async fn step(ctx: &WriteCtx) -> Result<(), String> {
    ///     tokio::select! {
    ///         sent = send(ctx.idem_key().as_str()) => sent,
    ///         () = ctx.lease_lost() => Err("lease lost: another worker may run this".into()),
    ///     }
    /// }
    /// ```
    pub async fn lease_lost(&self) {
        self.lease.lost().await;
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
            .field("lease_lost", &self.is_lease_lost())
            .finish_non_exhaustive()
    }
}
