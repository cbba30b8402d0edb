//! A check a user runs on their own write tool: the duplicates that happen
//! in production, played against the tool, its arguments and the user's
//! fake downstream, with what the tool did in each (the guide's chapter
//! "Testing your tools"). Each scenario gets a registry, a store and an application
//! state of its own, made by the user's factory, so that a fake with
//! business rules ("already refunded") sees each scenario as the first;
//! and it runs under a tenant of its own, so that its key is its own even
//! where a factory hands out one shared downstream. For a tool that needs
//! a person's approval, the check approves what each scenario asks, as a
//! person would, and plays approval itself (`approval.rs`).

mod approval;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::ctx::{Ctx, WriteCtx};
use crate::error::ToolError;
use crate::key::IdemKey;
use crate::registry::{CallContext, CallThroughRegistry, Registry, marker};
use crate::store::ClaimRequest;
use crate::tool::{Approval, OnUncertain, ToolInfo, Verified, WriteOptions, WriteTool};

use super::report::{RetryReport, Row, Verdict, answer, counted, once, refused, unsafe_};

/// What [`RetryCheck::new`] accepts: a `#[write_tool]` function, or a
/// type implementing [`WriteTool`]. `M` tells the two apart and is inferred.
pub trait IntoWriteTool<S, M> {
    /// The tool type.
    type Tool: WriteTool<S>;
    /// The tool.
    fn into_write_tool(self) -> Self::Tool;
}

impl<S, T, F> IntoWriteTool<S, marker::WriteFn<T>> for F
where
    F: Fn(CallThroughRegistry<T>) -> std::convert::Infallible,
    T: WriteTool<S> + Default,
{
    type Tool = T;
    fn into_write_tool(self) -> T {
        T::default()
    }
}

impl<S, T: WriteTool<S>> IntoWriteTool<S, marker::Write> for T {
    type Tool = T;
    fn into_write_tool(self) -> T {
        self
    }
}

/// What the body saw each time it ran: the key and the attempt.
type Seen = Arc<Mutex<Vec<(IdemKey, u32)>>>;

/// The user's tool, noting every run.
struct Observed<T> {
    tool: Arc<T>,
    seen: Seen,
}

impl<S: Send + Sync + 'static, T: WriteTool<S>> WriteTool<S> for Observed<T> {
    type Args = T::Args;
    type Output = T::Output;
    type Error = T::Error;

    fn info(&self) -> ToolInfo {
        self.tool.info()
    }

    fn options(&self) -> WriteOptions {
        self.tool.options()
    }

    fn is_permanent(&self, error: &T::Error) -> bool {
        self.tool.is_permanent(error)
    }

    fn is_uncertain(&self, error: &T::Error) -> bool {
        self.tool.is_uncertain(error)
    }

    async fn verify(
        &self,
        args: T::Args,
        ctx: &WriteCtx<S>,
    ) -> Result<Verified<T::Output>, String> {
        self.tool.verify(args, ctx).await
    }

    fn needs_approval(&self, args: &T::Args, ctx: &Ctx<S>) -> bool {
        self.tool.needs_approval(args, ctx)
    }

    async fn call(&self, args: T::Args, ctx: &WriteCtx<S>) -> Result<T::Output, T::Error> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push((ctx.idem_key().clone(), ctx.attempt()));
        }
        self.tool.call(args, ctx).await
    }
}

/// A hook on the user's state: counts effects, or arms a failure.
type Hook<S> = Box<dyn Fn(&S) -> usize + Send + Sync>;

/// Makes a scenario's application state.
type Factory<S> = Box<dyn Fn() -> S + Send + Sync>;

/// Plays the duplicates that happen in production against one write tool
/// and its arguments: the same call twice, concurrent duplicates, a crash
/// after the claim, a crash after the side effect, and (when told how to
/// make the downstream fail) a transient and a permanent error, each
/// followed by the retry. [`run`](Self::run) reports what the tool did in
/// each; [`RetryReport::assert_ok`] fails a test with that report.
///
/// Every scenario starts from nothing: a new store, and a new application
/// state from the factory given to [`new`](Self::new), so a fake
/// downstream that refuses what it has done before (a second refund of an
/// order) refuses only true duplicates. A scenario whose first call the
/// fake refuses is reported as [`Verdict::CouldNotPlay`], apart from the
/// tool's own faults ([`Verdict::Unsafe`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Mutex;
/// use idem_runtime::testing::RetryCheck;
/// use idem_runtime::{ToolInfo, WriteCtx, WriteTool};
/// use serde_json::json;
///
/// /// A payment provider that, like Stripe, honours an idempotency key.
/// #[derive(Default)]
/// struct Provider { charges: Mutex<Vec<String>> }
///
/// #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// struct Amount { amount: u64 }
///
/// struct Charge;
/// impl WriteTool<Provider> for Charge {
///     type Args = Amount;
///     type Output = usize;
///     type Error = String;
///     fn info(&self) -> ToolInfo { ToolInfo::new("charge", "Charge a card.") }
///     async fn call(&self, _: Self::Args, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
///         let mut charges = ctx.state().charges.lock().unwrap();
///         let key = ctx.idem_key().to_string();
///         if !charges.contains(&key) { charges.push(key); }
///         Ok(charges.len())
///     }
/// }
///
/// RetryCheck::new(Charge, Provider::default, json!({"amount": 100}))
///     .effects(|p| p.charges.lock().unwrap().len())
///     .run()
///     .await
///     .assert_ok();
/// # }
/// ```
pub struct RetryCheck<S, T> {
    tool: Arc<T>,
    state: Factory<S>,
    args: Value,
    effects: Option<Hook<S>>,
    transient: Option<Hook<S>>,
    permanent: Option<Hook<S>>,
}

impl<S: Send + Sync + 'static, T: WriteTool<S>> RetryCheck<S, T> {
    /// A check of `tool` (a `#[write_tool]` function or a [`WriteTool`])
    /// called with `args`, each scenario on a fresh application state that
    /// `state` makes, with its fake downstream: `Provider::default`, or
    /// `|| Shop::at(&dir)`.
    pub fn new<M>(
        tool: impl IntoWriteTool<S, M, Tool = T>,
        state: impl Fn() -> S + Send + Sync + 'static,
        args: Value,
    ) -> Self {
        RetryCheck {
            tool: Arc::new(tool.into_write_tool()),
            state: Box::new(state),
            args,
            effects: None,
            transient: None,
            permanent: None,
        }
    }

    /// How many effects the downstream has recorded (charges made, mails
    /// sent): each scenario must leave one (none after a permanent
    /// error), which holds when the tool passes `ctx.idem_key()`
    /// downstream and the downstream deduplicates on it.
    pub fn effects(mut self, count: impl Fn(&S) -> usize + Send + Sync + 'static) -> Self {
        self.effects = Some(Box::new(count));
        self
    }

    /// Arms the downstream to fail the next call with an error the tool
    /// should treat as transient (a timeout): the retry must run again.
    pub fn transient_failure(mut self, arm: impl Fn(&S) + Send + Sync + 'static) -> Self {
        self.transient = Some(Box::new(move |s| {
            arm(s);
            0
        }));
        self
    }

    /// Arms the downstream to fail the next call with an error the tool
    /// should treat as permanent (a declined card): the retry must get
    /// the same error without running.
    pub fn permanent_failure(mut self, arm: impl Fn(&S) + Send + Sync + 'static) -> Self {
        self.permanent = Some(Box::new(move |s| {
            arm(s);
            0
        }));
        self
    }

    /// Plays every scenario, each from nothing, and reports what the tool
    /// did in each.
    pub async fn run(self) -> RetryReport {
        let mut rows = Vec::new();
        for scenario in Scenario::ALL {
            let play = match self.play() {
                Ok(play) => play,
                Err(e) => return RetryReport::unregistrable(e.to_string()),
            };
            let mut row = match scenario {
                Scenario::Twice => play.twice().await,
                Scenario::Concurrently => play.concurrently().await,
                Scenario::CrashAfterClaim => play.after_a_crash_after_the_claim().await,
                Scenario::CrashAfterEffect => play.after_a_crash_after_the_effect().await,
                Scenario::Transient => play.after_a_failure(self.transient.as_deref(), false).await,
                Scenario::Permanent => play.after_a_failure(self.permanent.as_deref(), true).await,
                Scenario::Approved if self.tool.options().approval == Approval::Never => continue,
                Scenario::Approved => play.approved_once().await,
            };
            let policy = self.tool.options().on_uncertain;
            counted(&mut row, scenario.effects(policy));
            rows.push(row);
        }
        RetryReport { rows }
    }

    /// A scenario's registry, on a store and a state of its own.
    fn play(&self) -> Result<Play<'_, S, T>, crate::RegistryError> {
        let seen: Seen = Arc::default();
        let observed = Observed {
            tool: self.tool.clone(),
            seen: seen.clone(),
        };
        let registry = Registry::builder((self.state)()).tool(observed).build()?;
        Ok(Play {
            registry,
            tool: &*self.tool,
            name: self.tool.info().name.to_string(),
            args: &self.args,
            seen,
            approvals: std::sync::atomic::AtomicUsize::new(0),
            effects: self.effects.as_deref(),
        })
    }
}

/// The scenarios, in the order played.
#[derive(Clone, Copy)]
enum Scenario {
    Twice,
    Concurrently,
    CrashAfterClaim,
    CrashAfterEffect,
    Transient,
    Permanent,
    /// For a tool that needs a person's approval.
    Approved,
}

impl Scenario {
    /// The effects a played scenario leaves downstream: one, or none after
    /// a permanent error, or after a crash before the side effect for a
    /// tool that refuses to run an uncertain operation again.
    fn effects(self, policy: OnUncertain) -> usize {
        match (self, policy) {
            (Scenario::Permanent, _) | (Scenario::CrashAfterClaim, OnUncertain::Refuse) => 0,
            _ => 1,
        }
    }

    const ALL: [Scenario; 7] = [
        Scenario::Twice,
        Scenario::Concurrently,
        Scenario::CrashAfterClaim,
        Scenario::CrashAfterEffect,
        Scenario::Transient,
        Scenario::Permanent,
        Scenario::Approved,
    ];
}

/// One scenario's registry, and the check's hooks.
struct Play<'a, S, T> {
    registry: Registry<S>,
    tool: &'a T,
    name: String,
    args: &'a Value,
    seen: Seen,
    /// How many approvals the check has given, as a person would.
    approvals: std::sync::atomic::AtomicUsize,
    effects: Option<&'a (dyn Fn(&S) -> usize + Send + Sync)>,
}

/// How long a claim left behind by a simulated crash holds.
const CRASHED_LEASE: Duration = Duration::from_millis(50);

impl<S: Send + Sync + 'static, T: WriteTool<S>> Play<'_, S, T> {
    fn context(scenario: &'static str) -> CallContext<'static> {
        CallContext::run("retry-check").tenant(scenario)
    }

    /// The scenario's call; one that waits for a person's approval is
    /// approved, as a person would, and made again.
    async fn call(&self, scenario: &'static str) -> Result<Value, ToolError> {
        match self.ask(scenario).await {
            Err(ToolError::ApprovalRequired { key, .. }) => {
                self.approve(&key).await;
                self.ask(scenario).await
            }
            other => other,
        }
    }

    /// The scenario's call, as it is answered.
    async fn ask(&self, scenario: &'static str) -> Result<Value, ToolError> {
        let context = Self::context(scenario);
        self.registry
            .call(context, &self.name, self.args.clone())
            .await
    }

    fn effects(&self) -> Option<usize> {
        self.effects.map(|count| count(self.registry.state()))
    }

    /// A scenario's row: what ran since `start`, no callers yet, passed.
    fn row(&self, scenario: &'static str, start: (usize, Option<usize>, usize)) -> Row {
        let seen = self
            .seen
            .lock()
            .map(|s| s[start.0..].to_vec())
            .unwrap_or_default();
        let effects = match (start.1, self.effects()) {
            (Some(before), Some(after)) => Some(after.saturating_sub(before)),
            _ => None,
        };
        Row {
            scenario,
            runs: seen.len(),
            keys: seen.iter().map(|(k, _)| k.clone()).collect(),
            attempts: seen.iter().map(|(_, a)| *a).collect(),
            callers: Vec::new(),
            effects,
            approved: self.approvals.load(std::sync::atomic::Ordering::SeqCst) - start.2,
            verdict: Verdict::Passed,
        }
    }

    /// Where a scenario starts: the runs, the downstream's effects and the
    /// check's approvals so far.
    fn start(&self) -> (usize, Option<usize>, usize) {
        let runs = self.seen.lock().map(|s| s.len()).unwrap_or(0);
        let approvals = self.approvals.load(std::sync::atomic::Ordering::SeqCst);
        (runs, self.effects(), approvals)
    }

    async fn twice(&self) -> Row {
        const SCENARIO: &str = "the same call twice";
        let start = self.start();
        let first = self.call(SCENARIO).await;
        let second = self.call(SCENARIO).await;
        let mut row = self.row(SCENARIO, start);
        row.verdict = match (&first, &second) {
            (Err(e), _) => refused("the first call", e),
            (Ok(a), Ok(b)) if a != b => unsafe_("the repeat got another result"),
            (Ok(_), Ok(_)) => once(&row, 1),
            (Ok(_), Err(e)) => Verdict::Unsafe(format!("the repeat failed: {e}")),
        };
        row.callers = vec![answer(&first), answer(&second)];
        row
    }

    async fn concurrently(&self) -> Row {
        const SCENARIO: &str = "4 concurrent duplicates";
        let start = self.start();
        let (a, b, c, d) = tokio::join!(
            self.call(SCENARIO),
            self.call(SCENARIO),
            self.call(SCENARIO),
            self.call(SCENARIO)
        );
        let answers = [a, b, c, d];
        let mut row = self.row(SCENARIO, start);
        let results: Vec<&Value> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
        let failed = answers.iter().find_map(|a| match a {
            Err(ToolError::InFlight { .. }) | Ok(_) => None,
            Err(e) => Some(e),
        });
        row.verdict = match failed {
            // Every run failed in the body (a transient error lets the
            // next duplicate run): the fake refused what it never saw.
            Some(e)
                if results.is_empty()
                    && answers.iter().all(|a| {
                        matches!(
                            a,
                            Err(ToolError::Failed { .. } | ToolError::InFlight { .. })
                        )
                    }) =>
            {
                refused("every call", e)
            }
            Some(e) => Verdict::Unsafe(format!("a duplicate failed otherwise than in flight: {e}")),
            None if results.iter().any(|r| *r != results[0]) => {
                unsafe_("duplicates got different results")
            }
            None => once(&row, 1),
        };
        row.callers = answers.iter().map(answer).collect();
        row
    }

    /// A worker claimed the operation and crashed before running it: the
    /// call waits out the lease and runs, one attempt higher (a tool that
    /// verifies runs once its `verify` says nothing happened); a tool that
    /// refuses answers `OutcomeUnknown` and runs nothing.
    async fn after_a_crash_after_the_claim(&self) -> Row {
        const SCENARIO: &str = "a crash after the claim";
        let start = self.start();
        let crashed = self.claim_and_abandon(SCENARIO).await;
        let retry = self.call_after_the_lease(SCENARIO).await;
        let mut row = self.row(SCENARIO, start);
        let policy = self.tool.options().on_uncertain;
        row.verdict = match (&crashed, &retry) {
            (Err(e), _) => Verdict::CouldNotPlay(format!("could not stage the crash: {e}")),
            (_, Err(ToolError::OutcomeUnknown { .. })) if policy != OnUncertain::Rerun => {
                once(&row, 0)
            }
            (_, Ok(_)) if policy == OnUncertain::Refuse => {
                unsafe_("the retry ran a tool that refuses to run an uncertain operation again")
            }
            (_, Ok(_)) if policy == OnUncertain::Verify && row.runs == 0 => unsafe_(
                "verify said the operation happened, but the crashed worker never reached its side effect: it must answer NotDone",
            ),
            // The crashed worker never ran the body: the retry is its first run.
            (_, Err(e)) => refused("the retry, the body's first run", e),
            _ if row.attempts.first() != Some(&1) => {
                unsafe_("the retry did not count the crashed attempt")
            }
            _ => once(&row, 1),
        };
        row.callers = vec![answer(&retry)];
        row
    }

    /// A worker ran the body (the side effect happened) and crashed before
    /// recording it: the retry runs the body again, under the same key, so
    /// a downstream that deduplicates on the key records one effect; a tool
    /// that verifies answers what `verify` says happened without running
    /// again; one that refuses answers `OutcomeUnknown`.
    async fn after_a_crash_after_the_effect(&self) -> Row {
        const SCENARIO: &str = "a crash after the side effect";
        let start = self.start();
        let staged = match self.claim_and_abandon(SCENARIO).await {
            Ok(key) => self.run_body_unrecorded(SCENARIO, key).await,
            Err(e) => Err(e),
        };
        let retry = self.call_after_the_lease(SCENARIO).await;
        let mut row = self.row(SCENARIO, start);
        let policy = self.tool.options().on_uncertain;
        row.verdict = match (&staged, &retry) {
            (Err(e), _) => Verdict::CouldNotPlay(format!("could not stage the crash: {e}")),
            (Ok(Some(refusal)), _) => Verdict::CouldNotPlay(format!(
                "the fake downstream refused the crashed worker's run, on a fresh state: {refusal}"
            )),
            (_, Err(ToolError::OutcomeUnknown { .. })) if policy != OnUncertain::Rerun => {
                once(&row, 1)
            }
            (_, Ok(_)) if policy == OnUncertain::Refuse => {
                unsafe_("the retry ran a tool that refuses to run an uncertain operation again")
            }
            (_, Ok(_)) if policy == OnUncertain::Verify && row.runs > 1 => unsafe_(
                "verify said the operation did not happen, but the crashed worker had made its side effect: it must answer Done",
            ),
            (_, Ok(_)) if policy == OnUncertain::Verify => Verdict::Passed,
            (_, Err(e)) => Verdict::Unsafe(format!(
                "the retry failed ({e}): a downstream that deduplicates on ctx.idem_key() answers a repeat of what it did with what it did"
            )),
            _ if row.keys.len() != 2 || row.keys[0] != row.keys[1] => {
                unsafe_("the body did not see the same key both times")
            }
            _ => Verdict::Passed,
        };
        row.callers = vec![answer(&retry)];
        row
    }

    /// The downstream fails the first call (armed by `arm`); the retry
    /// runs again after a transient error, and gets the same error without
    /// running after a permanent one.
    async fn after_a_failure(
        &self,
        arm: Option<&(dyn Fn(&S) -> usize + Send + Sync)>,
        permanent: bool,
    ) -> Row {
        let scenario = if permanent {
            "a permanent error, then the retry"
        } else {
            "a transient error, then the retry"
        };
        let start = self.start();
        let Some(arm) = arm else {
            let mut row = self.row(scenario, start);
            row.verdict = Verdict::NotPlayed;
            row.callers = vec![
                "not played: no failure to arm (transient_failure / permanent_failure)".into(),
            ];
            return row;
        };
        arm(self.registry.state());
        let first = self.call(scenario).await;
        let retry = self.call(scenario).await;
        let mut row = self.row(scenario, start);
        row.verdict = match (&first, permanent) {
            (Ok(_), _) => Verdict::CouldNotPlay("the armed failure did not fail the call".into()),
            (
                Err(ToolError::Failed {
                    permanent: true, ..
                }),
                false,
            ) => unsafe_(
                "the error was classified permanent, so the retry replayed it: mark only errors that can never succeed with permanent_errors",
            ),
            (
                Err(ToolError::Failed {
                    permanent: false, ..
                }),
                true,
            ) => unsafe_(
                "the error was classified transient, so the retry ran the tool again: mark it with permanent_errors",
            ),
            (Err(ToolError::Failed { .. }), false) => match &retry {
                Err(e) => refused("the retry after a transient error", e),
                Ok(_) => match once(&row, 2) {
                    Verdict::Passed if row.attempts.get(1) != Some(&1) => {
                        unsafe_("the retry did not count the failed attempt")
                    }
                    verdict => verdict,
                },
            },
            (Err(ToolError::Failed { .. }), true) if row.runs != 1 => {
                unsafe_("the retry ran the tool again")
            }
            (Err(ToolError::Failed { .. }), true) => Verdict::Passed,
            (Err(e), _) => {
                Verdict::CouldNotPlay(format!("the call failed before the tool could fail: {e}"))
            }
        };
        row.callers = vec![answer(&first), answer(&retry)];
        row
    }

    /// Claims the scenario's key as a worker that then crashes: the claim
    /// is left to lapse.
    async fn claim_and_abandon(&self, scenario: &'static str) -> Result<IdemKey, ToolError> {
        let (key, fingerprint) = self
            .registry
            .identify(Self::context(scenario), &self.name, self.args.clone())?
            .ok_or_else(|| ToolError::UnknownTool {
                name: self.name.clone(),
            })?;
        let store_error = |source| ToolError::Store {
            tool: self.name.clone(),
            source,
        };
        match self
            .registry
            .store()
            .claim(
                &key,
                ClaimRequest::new(&self.name, &fingerprint, CRASHED_LEASE),
            )
            .await
            .map_err(store_error)?
        {
            crate::store::Claim::Acquired(_)
            | crate::store::Claim::TakenOver(_)
            | crate::store::Claim::Approved(_) => Ok(key),
            crate::store::Claim::Existing(_) => Err(ToolError::InFlight {
                tool: self.name.clone(),
                key: key.to_string(),
            }),
        }
    }

    /// Runs the body under the abandoned claim, as the crashed worker did,
    /// recording nothing: the error the body returned, if it did.
    async fn run_body_unrecorded(
        &self,
        scenario: &'static str,
        key: IdemKey,
    ) -> Result<Option<String>, ToolError> {
        let args: T::Args =
            serde_json::from_value(self.args.clone()).map_err(|e| ToolError::InvalidArgs {
                tool: self.name.clone(),
                message: e.to_string(),
            })?;
        let state = self.registry.shared_state();
        let ctx = WriteCtx::new(
            Ctx::new("retry-check", Some(scenario), state),
            key.clone(),
            0,
            std::sync::Arc::default(),
        );
        if let Ok(mut seen) = self.seen.lock() {
            seen.push((key.clone(), 0));
        }
        // What it returned is lost with the crashed worker; a refusal
        // means the scenario never had its side effect.
        Ok(self
            .tool
            .call(args, &ctx)
            .await
            .err()
            .map(|e| e.to_string()))
    }

    /// The call, once the abandoned claim has lapsed.
    async fn call_after_the_lease(&self, scenario: &'static str) -> Result<Value, ToolError> {
        tokio::time::sleep(CRASHED_LEASE * 2).await;
        loop {
            match self.call(scenario).await {
                Err(ToolError::InFlight { .. }) => tokio::time::sleep(CRASHED_LEASE).await,
                other => return other,
            }
        }
    }
}
