//! `idem` run as an operator runs it, against records the registry made
//! in real stores (a SQLite file, Redis, PostgreSQL): the key it derives is
//! the registry's, `show` prints the record found by key or by operation,
//! `list` and `stats` scan a namespace, `release` ends a stuck claim and
//! fences its worker, `pending` lists the unknown outcomes and `resolve`
//! answers them (one of two racing resolutions landing), `purge` deletes,
//! and every failure is one line and a non-zero exit.

mod common;

use common::{servers, skip};

use std::process::{Command, Output};

use idem::prelude::*;
use idem::store::Claim;
use idem::store::ClaimRequest;
use idem::store::Outcome;
use idem::{
    IdemKey, IdemStore, PostgresOptions, PostgresStore, RedisStore, SqliteStore, StoreError,
};
use serde_json::{Value, json};

/// Charge an order.
#[write_tool(ttl = "1h")]
async fn charge(order: String, amount: u64, ctx: &WriteCtx) -> Result<Value, String> {
    Ok(json!({"charge": format!("ch_{order}"), "amount": amount, "key": ctx.idem_key().as_str()}))
}

fn idem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .output()
        .expect("run idem")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "idem failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One line on stderr, and a non-zero exit.
fn failure(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "idem succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

/// A registry on `store` under namespace `ns`, with the result of one
/// charge recorded.
async fn records(store: std::sync::Arc<dyn IdemStore>, ns: &str) -> Registry<()> {
    let registry = Registry::builder(())
        .store(store)
        .namespace(ns)
        .tool(charge)
        .build()
        .expect("registry");
    registry
        .call("run-42", "charge", json!({"order": "o-1", "amount": 4200}))
        .await
        .expect("charged");
    registry
}

/// What every store must show: the key derived as the registry does, the
/// record by key and by operation, as a table and as JSON, and a missing
/// record as an error.
async fn shows_what_the_registry_recorded(
    url: &str,
    extra: &[&str],
    registry: &Registry<()>,
    ns: &str,
) {
    let args = json!({"order": "o-1", "amount": 4200});
    let (key, fingerprint) = registry
        .identify("run-42", "charge", args.clone())
        .expect("identify")
        .expect("a write tool");
    let args_text = args.to_string();
    let operation = [
        "--tool",
        "charge",
        "--run",
        "run-42",
        "--namespace",
        ns,
        "--args",
        &args_text,
    ];
    let derived = stdout(&idem(&[&["key"][..], &operation].concat()));
    assert_eq!(derived.trim(), key.as_str());

    let by_key = [&["show", "--store", url, key.as_str()][..], extra].concat();
    let table = stdout(&idem(&by_key));
    assert!(table.contains("state        done"), "{table}");
    assert!(table.contains(&fingerprint.to_hex()), "{table}");
    assert!(table.contains("\"charge\": \"ch_o-1\""), "{table}");

    let by_operation = [
        &["show", "--store", url][..],
        &operation,
        &["--json"],
        extra,
    ]
    .concat();
    let record: Value =
        serde_json::from_str(&stdout(&idem(&by_operation))).expect("one JSON object");
    assert_eq!(record["state"], "done");
    assert_eq!(record["result"]["charge"], "ch_o-1");
    assert_eq!(record["key"], key.as_str());

    assert!(table.contains("tool         charge"), "{table}");

    let mut missing = vec!["show", "--store", url, "idem:0000"];
    missing.extend_from_slice(extra);
    let err = failure(&idem(&missing));
    assert!(err.contains("no record under idem:0000"), "{err}");
    lists_and_releases(url, extra, registry, ns, &key).await;
    pending_and_resolved(url, extra, registry.store().clone(), ns).await;
    approvals_and_decisions(url, extra, registry.store().clone(), ns).await;
}

/// With a done record (`done`) and a claim left stuck by a crashed worker:
/// `list` and `stats` show both, `release` refuses without a confirmation
/// or with a wrong token, and then ends the claim: the worker is fenced
/// and the next call runs.
async fn lists_and_releases(
    url: &str,
    extra: &[&str],
    registry: &Registry<()>,
    ns: &str,
    done: &IdemKey,
) {
    let args = json!({"order": "o-2", "amount": 100});
    let (stuck, fingerprint) = registry
        .identify("run-42", "charge", args.clone())
        .expect("identify")
        .expect("a write tool");
    let lease = std::time::Duration::from_secs(600);
    let Ok(Claim::Acquired(worker)) = registry
        .store()
        .claim(&stuck, ClaimRequest::new("charge", &fingerprint, lease))
        .await
    else {
        panic!("the worker's claim")
    };
    fn with<'a>(args: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [args, extra].concat()
    }

    let table = stdout(&idem(&with(
        &["list", "--store", url, "--namespace", ns],
        extra,
    )));
    assert_eq!(table.lines().count(), 3, "a header and two rows: {table}");
    assert!(
        table.contains(done.as_str()) && table.contains(stuck.as_str()),
        "{table}"
    );
    // Each row says its run: the done record's was called in run-42; the
    // stuck claim, made by hand, says none.
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let column = header
        .iter()
        .position(|c| *c == "RUN")
        .expect("a RUN column");
    let run_of = |key: &IdemKey| {
        let row = table
            .lines()
            .find(|l| l.contains(key.as_str()))
            .unwrap_or_default();
        row.split_whitespace()
            .nth(column)
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(run_of(done), "run-42", "{table}");
    assert_eq!(run_of(&stuck), "-", "{table}");
    let running = stdout(&idem(&with(
        &[
            "list",
            "--store",
            url,
            "--namespace",
            ns,
            "--state",
            "running",
            "--json",
        ],
        extra,
    )));
    let row: Value = serde_json::from_str(running.trim()).expect("one JSON line");
    assert_eq!(row["key"], stuck.as_str());
    assert_eq!(row["tool"], "charge");
    assert_eq!(row["holder"], worker.id_hex());

    let stats: Value = serde_json::from_str(&stdout(&idem(&with(
        &["stats", "--store", url, "--namespace", ns, "--json"],
        extra,
    ))))
    .expect("one JSON object");
    assert_eq!(stats["records"], 2);
    assert_eq!(stats["states"]["running"], 1);
    assert_eq!(stats["tools"]["charge"]["done"], 1);
    assert_eq!(stats["oldest_running"]["key"], stuck.as_str());

    let release = |how: &[&str]| {
        idem(&with(
            &[&["release", "--store", url, stuck.as_str()][..], how].concat(),
            extra,
        ))
    };
    let err = failure(&release(&["--force"]));
    assert!(
        err.contains("give --yes"),
        "a live lease is not released unasked: {err}"
    );
    let err = failure(&release(&["--token", &"0".repeat(32)]));
    assert!(err.contains("was not released"), "{err}");
    let released = release(&["--force", "--yes"]);
    stdout(&released);
    let log = String::from_utf8_lossy(&released.stderr);
    assert!(
        log.contains("released") && log.contains("forced"),
        "logged: {log}"
    );
    assert!(
        matches!(
            registry
                .store()
                .settle(
                    &stuck,
                    &worker,
                    Outcome::Done {
                        result: "{}",
                        ttl: lease
                    }
                )
                .await,
            Err(StoreError::LeaseLost)
        ),
        "the worker that held the claim is fenced"
    );
    let ran = registry
        .call("run-42", "charge", args)
        .await
        .expect("runs again");
    assert_eq!(ran["charge"], "ch_o-2");
    let err = failure(&idem(&with(
        &["release", "--store", url, done.as_str(), "--force", "--yes"],
        extra,
    )));
    assert!(err.contains("is done, not running"), "{err}");
}

/// What a command printed, and its lines as JSON objects.
fn json_lines(out: &Output) -> (String, Vec<Value>) {
    let printed = stdout(out);
    let rows = printed
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (printed, rows)
}

/// Send the customer an email: at most once.
#[write_tool(on_uncertain = "refuse")]
async fn send_email(to: String, ctx: &WriteCtx) -> Result<Value, String> {
    Ok(json!({"sent_to": to, "attempt": ctx.attempt()}))
}

/// Leaves the email to `to` unknown: a worker claims it and crashes (its
/// claim lapses), and the next call, for tenant `acme`, refuses to send
/// it again. Returns its key.
async fn unknown_email(registry: &Registry<()>, to: &str) -> IdemKey {
    let context = idem::CallContext::run("run-42").tenant("acme");
    let (key, fingerprint) = registry
        .identify(context, "send_email", json!({ "to": to }))
        .expect("identify")
        .expect("a write tool");
    let short = std::time::Duration::from_millis(100);
    let claimed = registry
        .store()
        .claim(&key, ClaimRequest::new("send_email", &fingerprint, short))
        .await;
    assert!(matches!(claimed, Ok(Claim::Acquired(_))), "{claimed:?}");
    tokio::time::sleep(short * 3).await;
    let refused = registry
        .call(context, "send_email", json!({ "to": to }))
        .await;
    assert!(
        matches!(refused, Err(ToolError::OutcomeUnknown { .. })),
        "{refused:?}"
    );
    key
}

/// What every store must show of unknown outcomes: `pending` lists them,
/// oldest first, with tool, tenant, attempt and reason; `resolve` answers
/// one done (its result then replayed) and one to run again (the tool then
/// runs), refuses a record that is not unknown, and of two `idem resolve`
/// racing on one record exactly one lands; `stats` counts them.
async fn pending_and_resolved(
    url: &str,
    extra: &[&str],
    store: std::sync::Arc<dyn IdemStore>,
    ns: &str,
) {
    let registry = Registry::builder(())
        .store(store)
        .namespace(ns)
        .tool(send_email)
        .build()
        .expect("registry");
    let keys = [
        unknown_email(&registry, "a@example.com").await,
        unknown_email(&registry, "b@example.com").await,
        unknown_email(&registry, "c@example.com").await,
    ];
    let cmd = |args: &[&str]| idem(&[args, extra].concat());
    let (listed, rows) = json_lines(&cmd(&[
        "pending",
        "--store",
        url,
        "--namespace",
        ns,
        "--json",
    ]));
    assert_eq!(rows.len(), 3, "{listed}");
    for row in &rows {
        assert_eq!(
            (&row["tool"], &row["tenant"], &row["attempt"]),
            (&json!("send_email"), &json!("acme"), &json!(1)),
            "{row}"
        );
        assert!(
            row["reason"].as_str().is_some_and(|r| r.contains("lapsed")),
            "{row}"
        );
    }
    let ages: Vec<u64> = rows
        .iter()
        .map(|r| r["age_ms"].as_u64().expect("an age"))
        .collect();
    assert!(
        ages.windows(2).all(|w| w[0] >= w[1]),
        "oldest first: {ages:?}"
    );
    let stats: Value = serde_json::from_str(&stdout(&cmd(&[
        "stats",
        "--store",
        url,
        "--namespace",
        ns,
        "--json",
    ])))
    .expect("one JSON object");
    assert_eq!(stats["tools"]["send_email"]["unknown"], 3);

    let [sent, unsent, raced] = &keys;
    let resolved = cmd(&[
        "resolve",
        "--store",
        url,
        sent.as_str(),
        "--done",
        r#"{"sent_to":"by hand"}"#,
    ]);
    stdout(&resolved);
    assert!(String::from_utf8_lossy(&resolved.stderr).contains("resolved"));
    let context = idem::CallContext::run("run-42").tenant("acme");
    let replayed = registry
        .call(context, "send_email", json!({"to": "a@example.com"}))
        .await
        .expect("the operator's result");
    assert_eq!(replayed, json!({"sent_to": "by hand"}));
    let err = failure(&cmd(&["resolve", "--store", url, sent.as_str(), "--rerun"]));
    assert!(err.contains("is done, not unknown"), "{err}");
    stdout(&cmd(&[
        "resolve",
        "--store",
        url,
        unsent.as_str(),
        "--rerun",
    ]));
    let ran = registry
        .call(context, "send_email", json!({"to": "b@example.com"}))
        .await
        .expect("runs again");
    assert_eq!(ran["attempt"], 2);

    // Both started before either is waited for: they race.
    let racing: Vec<_> = [["--done", "{}"], ["--failed", "bounced"]]
        .iter()
        .map(|answer| {
            let args = [
                &["resolve", "--store", url, raced.as_str()][..],
                answer,
                extra,
            ]
            .concat();
            Command::new(env!("CARGO_BIN_EXE_idem"))
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start idem")
        })
        .collect();
    let outcomes: Vec<Output> = racing
        .into_iter()
        .map(|child| child.wait_with_output().expect("idem ends"))
        .collect();
    let landed = outcomes.iter().filter(|out| out.status.success()).count();
    for lost in outcomes.iter().filter(|out| !out.status.success()) {
        let err = String::from_utf8_lossy(&lost.stderr);
        assert!(
            err.contains("was not resolved") || err.contains("not unknown"),
            "the loser is told: {err}"
        );
    }
    assert_eq!(landed, 1, "exactly one of two resolutions lands");
}

/// Delete a customer's account: a person approves each one, within 30
/// minutes; a refusal is kept three days.
#[write_tool(approval = "required", approval_window = "30m", ttl = "3d")]
async fn delete_account(account: String, ctx: &WriteCtx) -> Result<Value, String> {
    Ok(json!({"deleted": account, "attempt": ctx.attempt()}))
}

/// `idem show --json` of the record under `key`.
fn shown_json(url: &str, extra: &[&str], key: &str) -> Value {
    let shown = idem(&[&["show", "--store", url, key, "--json"], extra].concat());
    serde_json::from_str(&stdout(&shown)).expect("one JSON object")
}

/// What every store must show of operations awaiting approval:
/// `approvals` lists them with tool, tenant, run and arguments; `approve`
/// lets the next call run once, keeping who approved, within the tool's
/// window, and `revoke` takes it back while unused; `deny` has every call
/// answered the refusal, kept the tool's TTL; a decision on a record that
/// does not await one is refused, naming what it is.
async fn approvals_and_decisions(
    url: &str,
    extra: &[&str],
    store: std::sync::Arc<dyn IdemStore>,
    ns: &str,
) {
    let registry = Registry::builder(())
        .store(store)
        .namespace(ns)
        .tool(delete_account)
        .build()
        .expect("registry");
    let context = idem::CallContext::run("run-7").tenant("acme");
    let call =
        |account: &str| registry.call(context, "delete_account", json!({ "account": account }));
    let mut keys = Vec::new();
    for account in ["ann", "bob"] {
        match call(account).await {
            Err(ToolError::ApprovalRequired { key, .. }) => keys.push(key),
            other => panic!("the call asks for approval, got {other:?}"),
        }
    }
    let cmd = |args: &[&str]| idem(&[args, extra].concat());
    let (listed, rows) = json_lines(&cmd(&[
        "approvals",
        "--store",
        url,
        "--namespace",
        ns,
        "--json",
    ]));
    assert_eq!(rows.len(), 2, "{listed}");
    let arguments: Vec<&Value> = rows.iter().map(|row| &row["arguments"]).collect();
    assert!(arguments.contains(&&json!({"account": "ann"})), "{listed}");
    for row in &rows {
        assert_eq!(
            (&row["tool"], &row["tenant"], &row["run"]),
            (&json!("delete_account"), &json!("acme"), &json!("run-7")),
            "{row}"
        );
    }
    let table = stdout(&cmd(&["approvals", "--store", url, "--namespace", ns]));
    assert!(table.contains(r#"arguments: {"account":"ann"}"#), "{table}");
    let (ann, bob) = (keys[0].as_str(), keys[1].as_str());
    let approved = cmd(&["approve", "--store", url, ann, "--by", "ops-lead"]);
    stdout(&approved);
    let said = String::from_utf8_lossy(&approved.stderr);
    assert!(said.contains("the approval is good for 30m00s"), "{said}");
    let kept = shown_json(url, extra, ann)["expires_in_ms"].as_u64();
    assert!(
        kept.is_some_and(|ms| ms <= 1_800_000),
        "the tool's window: {kept:?}"
    );
    revoked_and_approved_again(url, extra, ann).await;
    assert!(
        matches!(call("ann").await, Err(ToolError::ApprovalRequired { .. })),
        "revoked: it waits again"
    );
    let again = cmd(&["approve", "--store", url, ann, "--by", "ops-lead"]);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("the approval is good for 30m00s"), "{said}");
    let ran = call("ann").await.expect("runs once approved");
    assert_eq!(call("ann").await.expect("replayed"), ran);
    let err = failure(&cmd(&["revoke", "--store", url, ann, "--by", "x"]));
    assert!(err.contains("is done: it ran"), "{err}");
    let shown: Value =
        serde_json::from_str(&stdout(&cmd(&["show", "--store", url, ann, "--json"])))
            .expect("one JSON object");
    assert_eq!(shown["state"], "done");
    assert_eq!(shown["approved"]["by"], "ops-lead", "{shown}");
    let err = failure(&cmd(&["approve", "--store", url, ann, "--by", "x"]));
    assert!(err.contains("is done, not awaiting approval"), "{err}");
    let denied = cmd(&[
        "deny",
        "--store",
        url,
        bob,
        "--reason",
        "the customer called back",
        "--by",
        "ops-lead",
    ]);
    stdout(&denied);
    let said = String::from_utf8_lossy(&denied.stderr);
    assert!(said.contains("the refusal is kept for 3d00h"), "{said}");
    let kept = shown_json(url, extra, bob)["expires_in_ms"].as_u64();
    let day = 86_400_000;
    assert!(
        kept.is_some_and(|ms| ms > 2 * day),
        "the tool's TTL: {kept:?}"
    );
    match call("bob").await {
        Err(ToolError::Denied { by, reason, .. }) => assert_eq!(
            (by.as_deref(), reason.as_str()),
            (Some("ops-lead"), "the customer called back")
        ),
        other => panic!("the refusal is answered, got {other:?}"),
    }
    let shown = shown_json(url, extra, bob);
    assert_eq!(shown["refused"]["by"], "ops-lead", "{shown}");
}

/// `revoke` of the approved record under `key`: it awaits again, saying
/// who revoked it, on the tool's terms; a second revocation is refused,
/// saying it is not approved.
async fn revoked_and_approved_again(url: &str, extra: &[&str], key: &str) {
    let cmd = |args: &[&str]| idem(&[args, extra].concat());
    let revoked = cmd(&["revoke", "--store", url, key, "--by", "ops-lead"]);
    stdout(&revoked);
    let said = String::from_utf8_lossy(&revoked.stderr);
    assert!(
        said.contains("it awaits a decision again, for 3d00h"),
        "{said}"
    );
    let shown = shown_json(url, extra, key);
    assert_eq!(shown["state"], "awaiting", "{shown}");
    assert_eq!(shown["why"]["revoked"]["by"], "ops-lead", "{shown}");
    assert_eq!(shown["why"]["window_ms"], 1_800_000, "{shown}");
    let err = failure(&cmd(&["revoke", "--store", url, key, "--by", "x"]));
    assert!(err.contains("awaits approval: it is not approved"), "{err}");
}

/// `approve`, `deny` and `resolve` given `--config` (a file with a
/// `[notify]` table, as the gateway's) tell its receiver what they
/// recorded, signed under its secret; a file without one is refused.
#[tokio::test(flavor = "multi_thread")]
async fn decisions_are_told_to_the_webhooks_of_the_config() {
    let dir = std::env::temp_dir().join(format!("idem-cli-notify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("idem.db");
    let store: std::sync::Arc<dyn IdemStore> =
        std::sync::Arc::new(SqliteStore::open(&path).await.expect("open"));
    let registry = Registry::builder(())
        .store(store)
        .tool(delete_account)
        .tool(send_email)
        .build()
        .expect("registry");
    let receiver = idem::testing::Receiver::start().await;
    let secret = idem::notify::WebhookSecret::generate();
    let config = dir.join("gateway.toml");
    let toml = format!(
        "[notify]\nurl = \"{}\"\nsecret = \"{secret}\"\n",
        receiver.url()
    );
    std::fs::write(&config, toml).expect("config");
    let (url, config) = (
        path.to_str().expect("UTF-8"),
        config.to_str().expect("UTF-8"),
    );
    let asked = |account: &'static str| {
        let registry = &registry;
        async move {
            match registry
                .call("r", "delete_account", json!({ "account": account }))
                .await
            {
                Err(ToolError::ApprovalRequired { key, .. }) => key.to_string(),
                other => panic!("the call asks for approval, got {other:?}"),
            }
        }
    };
    let (ann, bob) = (asked("ann").await, asked("bob").await);
    let email = unknown_email(&registry, "c@example.com").await.to_string();
    stdout(&idem(&[
        "approve", "--store", url, &ann, "--by", "ana", "--config", config,
    ]));
    let reason = ["--reason", "no"];
    stdout(&idem(
        &[
            &[
                "deny", "--store", url, &bob, "--by", "bo", "--config", config,
            ][..],
            &reason,
        ]
        .concat(),
    ));
    stdout(&idem(&[
        "resolve", "--store", url, &email, "--rerun", "--config", config,
    ]));
    let received = receiver.received();
    let events: Vec<(String, Value)> = received
        .iter()
        .map(|r| {
            let event = common::signed_event(r, &secret);
            (
                event["type"].as_str().expect("a type").to_owned(),
                event["data"].clone(),
            )
        })
        .collect();
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        ["approval.approved", "approval.denied", "outcome.resolved"],
        "one each, sent before each command ended"
    );
    assert_eq!(
        (&events[0].1["key"], &events[0].1["by"]),
        (&json!(ann), &json!("ana"))
    );
    assert_eq!(events[0].1["arguments"], json!({ "account": "ann" }));
    assert_eq!(
        (&events[1].1["by"], &events[1].1["reason"]),
        (&json!("bo"), &json!("no"))
    );
    assert_eq!(
        (&events[2].1["tenant"], &events[2].1["resolution"]),
        (&json!("acme"), &json!("rerun"))
    );
    let bare = dir.join("bare.toml");
    std::fs::write(&bare, "[tools.x]\nkind = \"read\"\n").expect("config");
    let err = failure(&idem(&[
        "approve",
        "--store",
        url,
        &ann,
        "--by",
        "x",
        "--config",
        bare.to_str().expect("UTF-8"),
    ]));
    assert!(err.contains("has no [notify] table"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn sqlite_records_are_shown_and_purged() {
    let dir = std::env::temp_dir().join(format!("idem-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("idem.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let registry = records(std::sync::Arc::new(store), "cli").await;
    let url = path.to_str().expect("UTF-8 path");
    shows_what_the_registry_recorded(url, &[], &registry, "cli").await;
    let counted = stdout(&idem(&["purge", "--store", url, "--dry-run"]));
    assert!(
        counted.contains("0 expired records would be deleted"),
        "{counted}"
    );
    let purged = stdout(&idem(&["purge", "--store", url]));
    assert!(purged.contains("0 expired records deleted"), "{purged}");
    // A path with no file is an error, and no file is made there.
    let absent = dir.join("absent.db");
    let absent_url = absent.to_str().expect("UTF-8 path");
    let err = failure(&idem(&["show", "--store", absent_url, "idem:00"]));
    assert!(err.contains("no SQLite file at"), "{err}");
    assert!(!absent.exists(), "idem made a file at {absent_url}");
    // A reader that went (`| head`) ends a command quietly.
    for command in [["stats", "--store", url], ["pending", "--store", url]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
            .args(command)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run idem");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("idem ends");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("panicked"),
            "{command:?}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn redis_records_are_shown() {
    let url = std::env::var("IDEM_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let store = match RedisStore::connect(&url).await {
        Ok(store) => store,
        Err(e) => {
            skip::unavailable(
                &format!("Redis at {url} ({e})"),
                "Start redis-server on 127.0.0.1:6379.",
            );
            return;
        }
    };
    let ns = format!("cli-{}", std::process::id());
    let registry = records(std::sync::Arc::new(store), &ns).await;
    shows_what_the_registry_recorded(&url, &[], &registry, &ns).await;
}

/// On a Redis Cluster, `list` and `stats` find the records of every
/// primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_listed_node_by_node() {
    if !servers::redis_binaries() {
        return;
    }
    let cluster = servers::RedisCluster::start();
    let store = RedisStore::connect_cluster(cluster.urls())
        .await
        .expect("connect to the cluster");
    let registry = Registry::builder(())
        .store(store)
        .namespace("cli")
        .tool(charge)
        .build()
        .expect("registry");
    let mut keys = std::collections::BTreeSet::new();
    for order in 0..12 {
        let args = json!({"order": format!("o-{order}"), "amount": 100});
        registry
            .call("run-42", "charge", args.clone())
            .await
            .expect("charged");
        let (key, _) = registry
            .identify("run-42", "charge", args)
            .expect("identify")
            .expect("a write tool");
        keys.insert(key.into_string());
    }
    let url = &cluster.urls()[0];
    let listed = stdout(&idem(&[
        "list",
        "--store",
        url,
        "--cluster",
        "--namespace",
        "cli",
        "--json",
    ]));
    let found: std::collections::BTreeSet<String> = listed
        .lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).expect("a JSON line");
            row["key"].as_str().expect("a key").to_owned()
        })
        .collect();
    assert_eq!(found, keys, "every record, from every node");
    let stats: Value = serde_json::from_str(&stdout(&idem(&[
        "stats",
        "--store",
        url,
        "--cluster",
        "--namespace",
        "cli",
        "--json",
    ])))
    .expect("one JSON object");
    assert_eq!(stats["tools"]["charge"]["done"], 12);
    let err = failure(&idem(&["list", "--store", "/tmp/x.db", "--cluster"]));
    assert!(err.contains("--cluster is for redis://"), "{err}");
}

#[tokio::test]
async fn postgres_records_are_shown_from_a_named_table() {
    let url = std::env::var("IDEM_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let table = format!("idem_cli_{}", std::process::id());
    let options = PostgresOptions::new().table(table.clone());
    let store = match PostgresStore::connect_with(&url, options).await {
        Ok(store) => store,
        Err(e) => {
            skip::unavailable(
                &format!("PostgreSQL at {url} ({e})"),
                "Start PostgreSQL on 127.0.0.1:5432.",
            );
            return;
        }
    };
    let registry = records(std::sync::Arc::new(store), "cli").await;
    shows_what_the_registry_recorded(&url, &["--table", &table], &registry, "cli").await;
    let purged = stdout(&idem(&["purge", "--store", &url, "--table", &table]));
    assert!(purged.contains("expired records deleted"), "{purged}");
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to drop the table");
    tokio::spawn(connection);
    let drop = format!("DROP TABLE {table}; DROP TABLE {table}_schema");
    client.batch_execute(&drop).await.expect("drop the tables");
    // A table that is not there is an error, and is not made.
    let absent = format!("{table}_absent");
    let err = failure(&idem(&[
        "show", "--store", &url, "--table", &absent, "idem:00",
    ]));
    assert!(err.contains("cannot open the store"), "{err}");
    let found = client
        .query(
            "SELECT 1 FROM pg_tables WHERE tablename = $1 OR tablename = $2",
            &[&absent, &format!("{absent}_schema")],
        )
        .await
        .expect("look for the table");
    assert!(found.is_empty(), "idem made {absent}");
}

#[tokio::test]
async fn migrate_creates_a_postgres_table_or_prints_the_sql_for_a_dba() {
    let url = std::env::var("IDEM_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let (client, connection) = match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
        Ok(pair) => pair,
        Err(e) => {
            skip::unavailable(
                &format!("PostgreSQL at {url} ({e})"),
                "Start PostgreSQL on 127.0.0.1:5432.",
            );
            return;
        }
    };
    tokio::spawn(connection);
    let (made, printed) = (
        format!("idem_migrate_{}", std::process::id()),
        format!("idem_migrate_sql_{}", std::process::id()),
    );
    let list = |table: &str| idem(&["list", "--store", &url, "--table", table]);
    // Not there: read-only commands do not make it.
    let err = failure(&list(&made));
    assert!(err.contains("cannot open the store"), "{err}");
    let said = stdout(&idem(&["migrate", "--store", &url, "--table", &made]));
    assert!(
        said.contains(&format!("the table {made} is at schema version")),
        "{said}"
    );
    stdout(&list(&made));
    // Again: nothing to do, and nothing fails.
    stdout(&idem(&["migrate", "--store", &url, "--table", &made]));

    // The SQL alone, applied by someone else, makes a table idem reads.
    let sql = stdout(&idem(&[
        "migrate",
        "--store",
        &url,
        "--table",
        &printed,
        "--print-sql",
    ]));
    assert!(
        sql.contains(&format!("CREATE TABLE IF NOT EXISTS {printed}")),
        "{sql}"
    );
    client.batch_execute(&sql).await.expect("apply the SQL");
    stdout(&list(&printed));
    for table in [&made, &printed] {
        let drop = format!("DROP TABLE {table}; DROP TABLE {table}_schema");
        client.batch_execute(&drop).await.expect("drop the tables");
    }
    // Elsewhere: Redis needs nothing; the SQL is PostgreSQL's alone.
    let said = stdout(&idem(&["migrate", "--store", "redis://127.0.0.1:1"]));
    assert!(said.contains("Redis needs no migration"), "{said}");
    let err = failure(&idem(&["migrate", "--store", "/tmp/x.db", "--print-sql"]));
    assert!(
        err.contains("--print-sql is for a PostgreSQL store"),
        "{err}"
    );
}

/// The subcommands of `idem` (and of `idem SUB`), as `--help` lists them.
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut args: Vec<&str> = path.to_vec();
    args.push("--help");
    let help = stdout(&idem(&args));
    let Some((_, commands)) = help.split_once("Commands:") else {
        return Vec::new();
    };
    let commands = commands.split("\n\n").next().unwrap_or_default();
    commands
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The long flags `idem PATH --help` lists.
fn flags(path: &[&str]) -> Vec<String> {
    let mut args: Vec<&str> = path.to_vec();
    args.push("--help");
    let help = stdout(&idem(&args));
    let mut flags: Vec<String> = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .map(|word| {
            word.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .split('=')
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .filter(|flag| !["--help", "--version"].contains(&flag.as_str()))
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn every_flag_of_every_command_is_in_the_docs() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut docs = String::new();
    for page in [
        "README.md",
        "docs/gateway.md",
        "docs/console.md",
        "CONTRIBUTING.md",
    ] {
        docs += &std::fs::read_to_string(format!("{root}/{page}")).expect("read the docs");
    }
    for chapter in std::fs::read_dir(format!("{root}/src/guide")).expect("the guide") {
        docs += &std::fs::read_to_string(chapter.expect("a chapter").path()).expect("read it");
    }
    let mut missing = Vec::new();
    let mut commands: Vec<Vec<String>> = subcommands(&[]).into_iter().map(|c| vec![c]).collect();
    let mut seen = 0;
    while let Some(path) = commands.pop() {
        let path_refs: Vec<&str> = path.iter().map(String::as_str).collect();
        for sub in subcommands(&path_refs) {
            let mut deeper = path.clone();
            deeper.push(sub);
            commands.push(deeper);
        }
        for flag in flags(&path_refs) {
            seen += 1;
            // The flag as a word of its own, not the start of a longer one.
            let named = docs.match_indices(&flag).any(|(at, _)| {
                let next = docs[at + flag.len()..].chars().next();
                next.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
            });
            if !named {
                missing.push(format!("idem {} {flag}", path.join(" ")));
            }
        }
    }
    assert!(seen > 40, "only {seen} flags found");
    assert!(
        missing.is_empty(),
        "flags the docs never name:\n{}",
        missing.join("\n")
    );
}

#[test]
fn failures_are_one_line_and_a_non_zero_exit() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["key", "--tool", "charge", "--args", "{}"],
            "--run is required",
        ),
        (
            &["key", "--tool", "charge", "--run", "r", "--args", "{"],
            "--args is not JSON",
        ),
        (
            &["show", "--store", "/no/such/file.db", "idem:00"],
            "no SQLite file at /no/such/file.db",
        ),
        (
            &["show", "--store", "mysql://x", "idem:00"],
            "unknown store URL",
        ),
        (
            &[
                "show",
                "--store",
                "postgres://u:hunter2@127.0.0.1:1/x",
                "idem:00",
            ],
            "cannot open the store at postgres://u:***@127.0.0.1:1/x",
        ),
    ];
    for (args, expected) in cases {
        let err = failure(&idem(args));
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}

#[test]
fn completions_are_printed_for_a_shell() {
    let bash = stdout(&idem(&["completions", "bash"]));
    assert!(bash.contains("_idem()"), "{bash}");
}
