//! `idem::testing::RetryCheck`, the check users run on their own write
//! tools: a tool that passes its key downstream and classifies its errors
//! passes every scenario; a tool that does not pass its key, or that calls
//! a permanent error transient (or the reverse), fails the scenario that
//! shows it, and the report says why. Each scenario starts from a fresh
//! state, so a fake with a business rule ("already refunded") passes, and
//! a fake that refuses a first call is reported apart from the tool.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use idem::prelude::*;
use idem::testing::{RetryCheck, RetryReport, Verdict};
use serde_json::json;

/// A fake payment provider: deduplicates on the idempotency key it is
/// given, and fails the next charge when armed.
#[derive(Default)]
struct Provider {
    charges: Mutex<Vec<Option<String>>>,
    fail_transient: AtomicBool,
    fail_permanent: AtomicBool,
}

impl Provider {
    fn charge(&self, key: Option<&str>) -> Result<usize, String> {
        if self.fail_transient.swap(false, Ordering::SeqCst) {
            return Err("timeout".into());
        }
        if self.fail_permanent.swap(false, Ordering::SeqCst) {
            return Err("declined".into());
        }
        let mut charges = self.charges.lock().expect("lock");
        let seen = key.is_some() && charges.iter().any(|c| c.as_deref() == key);
        if !seen {
            charges.push(key.map(str::to_owned));
        }
        Ok(charges.len())
    }

    fn count(&self) -> usize {
        self.charges.lock().expect("lock").len()
    }
}

fn declined(e: &String) -> bool {
    e == "declined"
}

/// Charge a card, passing the key downstream.
#[write_tool(permanent_errors = declined)]
async fn charge(amount: u64, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
    let _ = amount;
    ctx.state().charge(Some(ctx.idem_key().as_str()))
}

/// Charge a card, forgetting the key.
#[write_tool(permanent_errors = declined)]
async fn charge_without_key(amount: u64, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
    let _ = amount;
    ctx.state().charge(None)
}

/// Charge a card, every error transient.
#[write_tool]
async fn charge_all_transient(amount: u64, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
    let _ = amount;
    ctx.state().charge(Some(ctx.idem_key().as_str()))
}

/// Charge a card, and a second time without the key: two effects a run.
#[write_tool(permanent_errors = declined)]
async fn charge_and_charge_again(amount: u64, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
    let _ = amount;
    ctx.state().charge(Some(ctx.idem_key().as_str()))?;
    ctx.state().charge(None)
}

/// Charge a card once a person approves, passing the key downstream.
#[write_tool(permanent_errors = declined, approval = "required")]
async fn charge_approved(amount: u64, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
    let _ = amount;
    ctx.state().charge(Some(ctx.idem_key().as_str()))
}

/// Whether a charge needs a person's approval: above 50.
fn over_fifty(amount: &u64, ctx: &Ctx<Provider>) -> bool {
    let _ = ctx;
    *amount > 50
}

/// Charge a card, a person approving the large ones.
#[write_tool(permanent_errors = declined, approval = over_fifty)]
async fn charge_large_approved(amount: u64, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
    let _ = amount;
    ctx.state().charge(Some(ctx.idem_key().as_str()))
}

async fn check<M>(
    tool: impl idem::testing::IntoWriteTool<Provider, M, Tool = impl idem::WriteTool<Provider>>,
) -> RetryReport {
    RetryCheck::new(tool, Provider::default, json!({"amount": 100}))
        .effects(Provider::count)
        .transient_failure(|p| p.fail_transient.store(true, Ordering::SeqCst))
        .permanent_failure(|p| p.fail_permanent.store(true, Ordering::SeqCst))
        .run()
        .await
}

/// What `assert_ok` panics with: it must panic.
fn failure(report: &RetryReport) -> String {
    let panic = std::panic::catch_unwind(|| report.assert_ok()).expect_err("assert_ok fails");
    panic.downcast_ref::<String>().cloned().unwrap_or_default()
}

/// What is wrong with the tool in `scenario`, if anything.
fn problem<'a>(report: &'a RetryReport, scenario: &str) -> Option<&'a str> {
    match verdict(report, scenario) {
        Verdict::Unsafe(why) => Some(why),
        _ => None,
    }
}

fn verdict<'a>(report: &'a RetryReport, scenario: &str) -> &'a Verdict {
    let row = report.rows.iter().find(|r| r.scenario == scenario);
    &row.unwrap_or_else(|| panic!("no scenario {scenario}: {report}"))
        .verdict
}

#[tokio::test]
async fn a_tool_that_passes_its_key_and_classifies_its_errors_passes() {
    let report = check(charge).await;
    report.assert_ok();
    let text = report.to_string();
    for scenario in [
        "the same call twice",
        "4 concurrent duplicates",
        "a crash after the claim",
        "a crash after the side effect",
        "a transient error, then the retry",
        "a permanent error, then the retry",
    ] {
        assert!(text.contains(scenario), "{text}");
    }
    let crash = report
        .rows
        .iter()
        .find(|r| r.scenario == "a crash after the side effect");
    let crash = crash.expect("the crash scenario");
    assert_eq!(
        (crash.runs, crash.attempts.clone()),
        (2, vec![0, 1]),
        "{report}"
    );
    assert_eq!(crash.effects, Some(1), "{report}");
}

/// A tool that needs a person's approval passes every scenario, the check
/// approving what each asks as a person would, and the approval scenario:
/// asked once whatever the duplicates, one approval for one run. The
/// check of a tool that needs none has no approval scenario.
#[tokio::test]
async fn a_tool_that_needs_approval_passes_with_one_run_per_approval() {
    let report = check(charge_approved).await;
    report.assert_ok();
    let row = report
        .rows
        .iter()
        .find(|r| r.scenario == "asked twice, approved once, 4 duplicates")
        .unwrap_or_else(|| panic!("no approval scenario: {report}"));
    assert_eq!((row.runs, row.effects), (1, Some(1)), "{report}");
    assert_eq!(row.callers.len(), 6, "{report}");
    assert!(row.callers[0].contains("approval_required"), "{report}");
    assert_eq!(
        row.approved, 1,
        "the report says the check approved: {report}"
    );
    let twice = report
        .rows
        .iter()
        .find(|r| r.scenario == "the same call twice");
    assert_eq!(twice.map(|r| r.approved), Some(1), "{report}");
    assert!(
        report.to_string().contains("| approved by the check |"),
        "{report}"
    );
    let plain = check(charge).await;
    assert!(
        plain.rows.iter().all(|r| !r.scenario.contains("approved")),
        "{plain}"
    );
}

/// A tool whose function decides approval is played as one that needs it,
/// for arguments the function says need it: the check approves as a
/// person would, and the report counts the approvals; for arguments that
/// need none, the approval scenario says it could not be played.
#[tokio::test]
async fn a_tool_whose_function_decides_approval_is_played_approved() {
    let report = check(charge_large_approved).await;
    report.assert_ok();
    let approvals: usize = report.rows.iter().map(|r| r.approved).sum();
    assert!(
        approvals >= 2,
        "each scenario approved as a person would: {report}"
    );
    let small = RetryCheck::new(
        charge_large_approved,
        Provider::default,
        json!({"amount": 10}),
    )
    .run()
    .await;
    let scenario = "asked twice, approved once, 4 duplicates";
    match verdict(&small, scenario) {
        Verdict::CouldNotPlay(why) => assert!(why.contains("need no approval"), "{small}"),
        other => panic!("the approval scenario needs arguments that need approval: {other:?}"),
    }
    assert!(small.rows.iter().all(|r| r.approved == 0), "{small}");
}

#[tokio::test]
async fn a_tool_that_forgets_its_key_fails_the_crash_after_the_side_effect() {
    let report = check(charge_without_key).await;
    assert!(!report.passed(), "{report}");
    let why = problem(&report, "a crash after the side effect").unwrap_or_default();
    assert!(why.contains("pass ctx.idem_key() downstream"), "{report}");
    // The store alone makes the other duplicates harmless.
    assert_eq!(problem(&report, "the same call twice"), None, "{report}");
    let message = failure(&report);
    assert!(
        message.contains("| a crash after the side effect | 2 |"),
        "{message}"
    );
}

#[tokio::test]
async fn a_tool_that_calls_every_error_transient_fails_the_permanent_scenario() {
    let report = check(charge_all_transient).await;
    let why = problem(&report, "a permanent error, then the retry").unwrap_or_default();
    assert!(why.contains("classified transient"), "{report}");
    assert_eq!(
        problem(&report, "a transient error, then the retry"),
        None,
        "{report}"
    );
}

/// A refund service with the rule real ones have: an order is refunded
/// once. A repeat under the same idempotency key gets the first refund
/// back; another refund of the same order is refused.
#[derive(Default)]
struct Refunds {
    done: Mutex<Vec<(String, String)>>,
    /// Refuse everything: a fake set up wrongly.
    closed: bool,
}

impl Refunds {
    fn closed() -> Refunds {
        Refunds {
            closed: true,
            ..Refunds::default()
        }
    }

    fn refund(&self, order: &str, key: &str) -> Result<String, String> {
        if self.closed {
            return Err("the refund service is closed".into());
        }
        let mut done = self.done.lock().expect("lock");
        if let Some((_, k)) = done.iter().find(|(o, k)| o == order && k == key) {
            return Ok(format!("refund of {order} under {}", &k[k.len() - 6..]));
        }
        if done.iter().any(|(o, _)| o == order) {
            return Err(format!("order {order} already refunded"));
        }
        done.push((order.to_owned(), key.to_owned()));
        Ok(format!("refund of {order} under {}", &key[key.len() - 6..]))
    }

    fn count(&self) -> usize {
        self.done.lock().expect("lock").len()
    }
}

/// Refund an order, the reason the model gives ignored.
#[write_tool(ignore = [reason])]
async fn refund(
    order_id: String,
    reason: String,
    ctx: &WriteCtx<Refunds>,
) -> Result<String, String> {
    let _ = reason;
    ctx.state().refund(&order_id, ctx.idem_key().as_str())
}

#[tokio::test]
async fn a_fake_that_refunds_an_order_once_passes_and_a_closed_one_is_told_apart() {
    let args = json!({"order_id": "o-1", "reason": "damaged"});
    let report = RetryCheck::new(refund, Refunds::default, args.clone())
        .effects(Refunds::count)
        .run()
        .await;
    // On one shared state the order would be refunded in the first
    // scenario and every later one refused as "already refunded".
    report.assert_ok();
    let played: Vec<_> = report.rows.iter().filter(|r| r.runs > 0).collect();
    assert_eq!(played.len(), 4, "{report}");
    assert!(played.iter().all(|r| r.effects == Some(1)), "{report}");

    let closed = RetryCheck::new(refund, Refunds::closed, args)
        .effects(Refunds::count)
        .run()
        .await;
    assert!(!closed.passed(), "{closed}");
    for scenario in [
        "the same call twice",
        "4 concurrent duplicates",
        "a crash after the claim",
        "a crash after the side effect",
    ] {
        match verdict(&closed, scenario) {
            Verdict::CouldNotPlay(why) => assert!(
                why.contains("the fake downstream refused") && why.contains("closed"),
                "{closed}"
            ),
            other => panic!("{scenario}: {other:?}\n{closed}"),
        }
    }
    let message = failure(&closed);
    assert!(
        message.starts_with("the check could not play every scenario"),
        "{message}"
    );
}

#[tokio::test]
async fn every_scenario_counts_its_effects() {
    let report = check(charge_and_charge_again).await;
    // The body runs once, as it must, but leaves two charges.
    let why = problem(&report, "the same call twice").unwrap_or_default();
    assert!(why.contains("recorded 2 effects, not 1"), "{report}");
    let why = problem(&report, "4 concurrent duplicates").unwrap_or_default();
    assert!(why.contains("recorded 2 effects, not 1"), "{report}");
}

/// Asks the provider whether the charge went through: it counts one for
/// any key (it cannot tell them apart, as a gateway without keys cannot).
async fn charged(amount: u64, ctx: &WriteCtx<Provider>) -> Result<Verified<usize>, String> {
    let _ = amount;
    let n = ctx.state().count();
    Ok(if n > 0 {
        Verified::Done(n)
    } else {
        Verified::NotDone
    })
}

/// Asks the provider, and always hears "not done": a wrong verify.
async fn never_charged(amount: u64, ctx: &WriteCtx<Provider>) -> Result<Verified<usize>, String> {
    let _ = (amount, ctx);
    Ok(Verified::NotDone)
}

/// Charge a card without a key, at most once.
#[write_tool(permanent_errors = declined, on_uncertain = "refuse")]
async fn charge_at_most_once(amount: u64, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
    let _ = amount;
    ctx.state().charge(None)
}

/// Charge a card without a key, asking the provider after a crash.
#[write_tool(permanent_errors = declined, verify = charged)]
async fn charge_verified(amount: u64, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
    let _ = amount;
    ctx.state().charge(None)
}

/// Charge a card without a key, with a verify that is wrong.
#[write_tool(permanent_errors = declined, verify = never_charged)]
async fn charge_badly_verified(amount: u64, ctx: &WriteCtx<Provider>) -> Result<usize, String> {
    let _ = amount;
    ctx.state().charge(None)
}

/// Against a provider that cannot deduplicate, a crash after the side
/// effect: `refuse` leaves one effect and answers `OutcomeUnknown` (and none
/// after a crash before it); a right `verify` leaves exactly one effect
/// and replays without running; a `verify` that says "not done" after the
/// effect is caught.
#[tokio::test]
async fn a_crash_under_refuse_or_verify_leaves_one_effect_and_a_wrong_verify_is_caught() {
    let refuse = check(charge_at_most_once).await;
    refuse.assert_ok();
    let row = |report: &RetryReport, scenario: &str| {
        let row = report.rows.iter().find(|r| r.scenario == scenario);
        row.cloned().expect("the scenario")
    };
    let crash = row(&refuse, "a crash after the side effect");
    assert_eq!((crash.runs, crash.effects), (1, Some(1)), "{refuse}");
    assert!(crash.callers[0].contains("outcome_unknown"), "{refuse}");
    let before = row(&refuse, "a crash after the claim");
    assert_eq!((before.runs, before.effects), (0, Some(0)), "{refuse}");

    let verified = check(charge_verified).await;
    verified.assert_ok();
    let crash = row(&verified, "a crash after the side effect");
    assert_eq!((crash.runs, crash.effects), (1, Some(1)), "{verified}");
    let before = row(&verified, "a crash after the claim");
    assert_eq!(
        (before.runs, before.attempts.clone()),
        (1, vec![1]),
        "{verified}"
    );

    let wrong = check(charge_badly_verified).await;
    let why = problem(&wrong, "a crash after the side effect").unwrap_or_default();
    assert!(
        why.contains("verify said the operation did not happen"),
        "{wrong}"
    );
}
