//! The write tool the suite calls: it counts its runs per operation,
//! remembers the key and attempt each saw, and on request fails (for good,
//! for now, or leaving its outcome unknown), returns a large result, runs
//! a hook (to inject a fault mid-call), stops when its lease is lost, or
//! verifies as it is told.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ctx::WriteCtx;
use crate::tool::{ToolInfo, Verified, WriteOptions, WriteTool};

/// Per operation, the (key, attempt) of each run.
type Runs = HashMap<u64, Vec<(String, u32)>>;

/// Called at the start of every run of a [`Counter`].
type Hook = Arc<dyn Fn() + Send + Sync>;

/// What a [`Counter`]'s `verify` answers for the arguments it is given.
type Verifier = Arc<dyn Fn(&CounterArgs) -> Result<Verified<CounterOut>, String> + Send + Sync>;

/// A write tool that counts how often each argument set ran.
#[derive(Clone, Default)]
pub struct Counter {
    runs: Arc<Mutex<Runs>>,
    total: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
    saw_lease_lost: Arc<AtomicUsize>,
    delay: Duration,
    options: WriteOptions,
    hook: Option<Hook>,
    stop_when_lease_lost: bool,
    verifier: Option<Verifier>,
    verifications: Arc<AtomicUsize>,
}

/// [`Counter`]'s arguments.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CounterArgs {
    /// Which operation.
    pub n: u64,
    /// Whether to fail (transiently).
    #[serde(default)]
    pub fail: bool,
    /// Fail permanently with this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_with: Option<String>,
    /// Pad the result with this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pad: Option<usize>,
    /// Fail with an error that leaves the outcome unknown (after running).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uncertain: bool,
}

/// [`Counter`]'s result.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct CounterOut {
    /// The operation.
    pub n: u64,
    /// The key it ran under.
    pub key: String,
    /// Its attempt number.
    pub attempt: u32,
    /// Whether it ran without a claim (`OnStoreError::Run`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unclaimed: bool,
    /// `pad` bytes of padding, if asked for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub padding: String,
}

/// [`Counter`]'s error: its message, and whether it is permanent.
#[derive(Debug)]
pub struct CounterError {
    message: String,
    permanent: bool,
    uncertain: bool,
}

impl std::fmt::Display for CounterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CounterError {}

impl Counter {
    /// A counter whose body sleeps `delay`, with `options`.
    pub fn new(delay: Duration, options: WriteOptions) -> Counter {
        Counter {
            delay,
            options,
            ..Counter::default()
        }
    }

    /// Calls `hook` at the start of every run (to cut a connection while
    /// the tool runs, say).
    pub fn on_run(mut self, hook: impl Fn() + Send + Sync + 'static) -> Counter {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Makes `verify` answer what `verifier` says for the arguments, after
    /// sleeping the counter's delay (the downstream's answer takes time).
    pub fn verifies_with(
        mut self,
        verifier: impl Fn(&CounterArgs) -> Result<Verified<CounterOut>, String> + Send + Sync + 'static,
    ) -> Counter {
        self.verifier = Some(Arc::new(verifier));
        self
    }

    /// How many times `verify` was asked.
    pub fn verifications(&self) -> usize {
        self.verifications.load(Ordering::SeqCst)
    }

    /// Makes the body end its sleep early when its lease is lost, as a body
    /// with steps would stop before the next one.
    pub fn stop_when_lease_lost(mut self) -> Counter {
        self.stop_when_lease_lost = true;
        self
    }

    /// How many bodies ran in all.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }

    /// How many bodies have finished.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }

    /// How many bodies finished knowing their lease was lost.
    pub fn saw_lease_lost(&self) -> usize {
        self.saw_lease_lost.load(Ordering::SeqCst)
    }

    /// The (key, attempt) of each run of operation `n`.
    pub fn runs(&self, n: u64) -> Vec<(String, u32)> {
        self.runs
            .lock()
            .map(|r| r.get(&n).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Sleeps the delay, or less if the lease is lost and the counter
    /// stops then.
    async fn work(&self, ctx: &WriteCtx<()>) {
        if self.stop_when_lease_lost {
            tokio::select! {
                () = tokio::time::sleep(self.delay) => {}
                () = ctx.lease_lost() => {}
            }
        } else {
            tokio::time::sleep(self.delay).await;
        }
    }
}

impl WriteTool<()> for Counter {
    type Args = CounterArgs;
    type Output = CounterOut;
    type Error = CounterError;

    fn info(&self) -> ToolInfo {
        ToolInfo::new("counter", "Counts its runs.")
    }

    fn options(&self) -> WriteOptions {
        self.options
    }

    fn is_permanent(&self, error: &CounterError) -> bool {
        error.permanent
    }

    fn is_uncertain(&self, error: &CounterError) -> bool {
        error.uncertain
    }

    /// Under [`Approval::Decided`](crate::Approval::Decided): operations
    /// from 100 up need a person's approval, as a charge above a limit.
    fn needs_approval(&self, args: &CounterArgs, _: &crate::ctx::Ctx<()>) -> bool {
        args.n >= 100
    }

    async fn verify(
        &self,
        args: CounterArgs,
        _: &WriteCtx<()>,
    ) -> Result<Verified<CounterOut>, String> {
        self.verifications.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        match &self.verifier {
            Some(verifier) => verifier(&args),
            None => Ok(Verified::Unknown),
        }
    }

    async fn call(
        &self,
        args: CounterArgs,
        ctx: &WriteCtx<()>,
    ) -> Result<CounterOut, CounterError> {
        self.total.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut runs) = self.runs.lock() {
            runs.entry(args.n)
                .or_default()
                .push((ctx.idem_key().to_string(), ctx.attempt()));
        }
        if let Some(hook) = &self.hook {
            hook();
        }
        self.work(ctx).await;
        if ctx.is_lease_lost() {
            self.saw_lease_lost.fetch_add(1, Ordering::SeqCst);
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        if let Some(message) = args.fail_with {
            return Err(CounterError {
                message,
                permanent: true,
                uncertain: false,
            });
        }
        if args.fail || args.uncertain {
            return Err(CounterError {
                message: if args.uncertain {
                    "timed out waiting for the downstream".into()
                } else {
                    "transient failure".into()
                },
                permanent: false,
                uncertain: args.uncertain,
            });
        }
        Ok(CounterOut {
            n: args.n,
            key: ctx.idem_key().to_string(),
            attempt: ctx.attempt(),
            unclaimed: !ctx.is_claimed(),
            padding: "x".repeat(args.pad.unwrap_or(0)),
        })
    }
}
