//! Webhooks against receivers that fail, for real: one that answers 500
//! (retried with the same `webhook-id` until it answers), one that answers
//! 400 (not retried), one that is not there (given up after `retry_for`)
//! and one that answers after 5 s (the queue fills and drops). Every call
//! is answered all the same; what is given up or dropped is logged at
//! `warn` and counted, and no log line holds the secret or a Slack URL's
//! path. (What each event says, signed, on every store: the conformance
//! case `registry_tells_its_webhooks_what_it_records`.) One test, alone in
//! its binary, as it reads its logs.

mod support;

use std::time::Duration;

use idem::notify::{Notify, WebhookSecret};
use idem::testing::{Counter, Receiver};
use idem::{Approval, Registry, ToolError, WriteOptions};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use serde_json::json;

const PATIENCE: Duration = Duration::from_secs(60);

/// A registry whose one tool asks for approval, notifying as `notify` says.
fn asking(notify: Notify) -> Registry<()> {
    let asks = WriteOptions::new().approval(Approval::Required);
    Registry::builder(())
        .tool(Counter::new(Duration::ZERO, asks))
        .notify(notify)
        .build()
        .expect("registry")
}

/// Calls operation `n`, which must be answered that it awaits approval.
async fn ask(registry: &Registry<()>, n: u64) {
    let answer = registry.call("r", "counter", json!({ "n": n })).await;
    assert!(
        matches!(answer, Err(ToolError::ApprovalRequired { .. })),
        "{answer:?}"
    );
}

/// How many webhooks ended as `delivery` since the last look (a
/// snapshot takes the counts).
fn counted(snapshotter: &Snapshotter, delivery: &str) -> u64 {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            key.key().name() == "idem.notify.events"
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == "idem.delivery" && l.value() == delivery)
        })
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum()
}

#[tokio::test]
async fn failing_receivers_cost_the_calls_nothing_and_are_retried_logged_and_counted() {
    let (logs, _tracing) = support::Logs::capture(tracing::Level::INFO);
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let secret = WebhookSecret::generate();

    // 500: sent again, with the same id, until it is answered 2xx.
    let receiver = Receiver::start().await;
    receiver.answer(500);
    let registry = asking(Notify::standard(receiver.url(), secret.clone()).unwrap());
    ask(&registry, 1).await;
    let failed = receiver.wait_for(2, PATIENCE).await;
    receiver.answer(200);
    assert!(
        registry.flush_notifications(PATIENCE).await,
        "delivered once answered"
    );
    let attempts = receiver.received();
    assert!(
        failed.len() >= 2 && attempts.len() > failed.len(),
        "{}",
        attempts.len()
    );
    let id = attempts[0].header("webhook-id").expect("an id");
    assert!(attempts.iter().all(|a| a.header("webhook-id") == Some(id)));
    assert_eq!(counted(&snapshotter, "delivered"), 1);

    // 400: not sent again.
    receiver.answer(400);
    ask(&registry, 2).await;
    assert!(registry.flush_notifications(PATIENCE).await);
    assert_eq!(receiver.received().len(), attempts.len() + 1, "one attempt");
    assert_eq!(counted(&snapshotter, "given_up"), 1);

    // Nobody there: given up after `retry_for`; a Slack URL's path is its
    // secret, and is never logged.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("address").port()
    };
    let slack = format!("http://127.0.0.1:{port}/services/T0/B0/SLACKPATHSECRET");
    let nobody = asking(
        Notify::slack(&slack)
            .unwrap()
            .retry_for(Duration::from_secs(2)),
    );
    ask(&nobody, 1).await;
    assert!(nobody.flush_notifications(PATIENCE).await, "given up");
    assert_eq!(counted(&snapshotter, "given_up"), 1);

    // Slow (5 s an answer): the deliveries wait, the queue fills, what
    // does not fit is dropped; every call is answered.
    let slow = Receiver::start().await;
    slow.delay(Duration::from_secs(5));
    let notify = Notify::standard(slow.url(), secret.clone())
        .unwrap()
        .queue(2)
        .unwrap();
    let registry = asking(notify);
    for n in 0..40 {
        ask(&registry, n).await;
    }
    assert!(counted(&snapshotter, "dropped") > 0, "a full queue drops");
    assert!(
        !registry
            .flush_notifications(Duration::from_millis(100))
            .await
    );

    let logs = logs.text();
    assert!(logs.contains("a webhook was not delivered"), "{logs}");
    assert!(logs.contains("answered 400") && logs.contains("the webhook queue is full"));
    for secret in [secret.to_string().as_str(), "SLACKPATHSECRET", "/services/"] {
        assert!(!logs.contains(secret), "{secret} was logged");
    }
}
