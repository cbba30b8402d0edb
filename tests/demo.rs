//! The demo (`cargo run --example agent`) is part of the contract: with
//! idem every scene ends with one charge; with `--naive` every scene shows
//! the double charge; with `--no-idempotency-keys`, only `rerun` charges
//! twice after a crash mid-charge. `cargo test` builds the example; this
//! runs it.

use std::path::PathBuf;
use std::process::Command;

use idem::testing::RetryCheck;
use serde_json::json;

// The demo's tool and payment provider, for the retry check below; the
// rest of the demo is run as a program.
#[allow(dead_code)]
#[path = "../examples/agent/scenes.rs"]
mod scenes;
mod support;

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/demo-<hash> → target/<profile>/examples/<name>
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    dir.join("examples").join(name)
}

fn run(args: &[&str]) -> String {
    let out = Command::new(example("agent"))
        .args(args)
        .output()
        .expect("run the agent example (built by `cargo test`)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "agent {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn with_idem_every_scene_charges_once() {
    let out = run(&[]);
    assert_eq!(out.matches("provider 1 charge ✔").count(), 3, "{out}");
    assert_eq!(out.matches("↺ replayed").count(), 3, "{out}");
    assert!(out.contains("☠ process killed after the charge"), "{out}");
}

#[test]
fn with_approval_the_call_waits_and_one_approval_charges_once() {
    let out = run(&["--approval", "--approve-as", "ops"]);
    assert!(
        out.contains("the charge waits; in another terminal: idem approve --store"),
        "{out}"
    );
    assert!(
        out.contains("approved that very charge, while the call waited"),
        "{out}"
    );
    assert!(
        !out.contains("… not run"),
        "the call waited instead of asking to call again: {out}"
    );
    assert!(out.contains("✔ ran"), "{out}");
    assert!(out.contains("↺ replayed"), "{out}");
    assert_eq!(out.matches("provider 1 charge ✔").count(), 1, "{out}");
}

#[test]
fn without_idem_every_scene_charges_twice() {
    let out = run(&["--naive"]);
    assert_eq!(
        out.matches("provider 2 charges ✗ DOUBLE CHARGE").count(),
        3,
        "{out}"
    );
    assert!(!out.contains("replayed"), "{out}");
}

#[tokio::test]
async fn the_demos_charge_card_is_safe_to_retry() {
    let dir = support::TempDir::new("retry-check");
    let args = json!({"amount": 4200, "currency": "eur", "customer_id": "cus_42"});
    let at = dir.0.clone();
    let report = RetryCheck::new(scenes::charge_card, move || scenes::Shop::at(&at), args)
        .effects(scenes::Shop::charges)
        .run()
        .await;
    report.assert_ok();
    // Every scenario ran and left one charge.
    let played: Vec<_> = report.rows.iter().filter(|r| r.runs > 0).collect();
    assert_eq!(played.len(), 4, "{report}");
    assert!(played.iter().all(|r| r.effects == Some(1)), "{report}");
}

#[test]
fn without_idempotency_keys_only_rerun_charges_twice_after_a_crash_in_the_body() {
    let out = run(&["--no-idempotency-keys"]);
    assert_eq!(out.matches("provider 1 charge ✔").count(), 4, "{out}");
    assert_eq!(
        out.matches("provider 2 charges ✗ DOUBLE CHARGE").count(),
        1,
        "only rerun double-charges: {out}"
    );
    assert!(out.contains("✔ verified"), "{out}");
    assert!(
        out.contains("it is not known whether this operation"),
        "{out}"
    );
}
