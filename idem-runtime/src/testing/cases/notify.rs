//! Webhooks: each registry tells its receiver what it recorded (an
//! operation that comes to await approval, a person's approval and
//! refusal, an unknown outcome and its resolution), each event signed as
//! Standard Webhooks signs, its arguments shown as the record shows them.

use std::time::Duration;

use serde_json::json;

use crate::error::ToolError;
use crate::key::IdemKey;
use crate::notify::{Notify, WebhookSecret};
use crate::registry::{Registry, Resolution};
use crate::store::RecordState;
use crate::testing::cases::wait::once_in;
use crate::testing::fixtures::Counter;
use crate::testing::harness::Harness;
use crate::testing::helpers::*;
use crate::testing::receiver::{Received, Receiver};
use crate::tool::{Approval, OnUncertain, WriteOptions};

/// Events of a waiting call approved, one refused, and an unknown outcome
/// resolved, each sent by the registry that recorded it (the caller's, or
/// a person's without the tool), reach the receiver signed under the
/// secret, and say what the record says of the operation.
pub async fn registry_tells_its_webhooks_what_it_records<H: Harness>(h: &H) {
    let receiver = Receiver::start().await;
    let secret = WebhookSecret::generate();
    let notify = || Notify::standard(receiver.url(), secret.clone()).expect("a notify");
    let ns = namespace();
    let asks = WriteOptions::new()
        .approval(Approval::Required)
        .approval_wait(LONG)
        .hide_fields(&["n"]);
    let counter = Counter::new(Duration::ZERO, asks);
    let app = registry_with(h.store(), &ns, &counter, |b| b.notify(notify()));
    let person = operator_with(h.store(), &ns, |b| b.notify(notify()));
    let args = |n: u64| json!({ "n": n });
    let (approved, ()) = tokio::join!(app.call("r", "counter", args(1)), async {
        let k = once_in(&app, args(1), RecordState::Awaiting).await;
        person.approve(&k, "ana").await.expect("approved");
    });
    approved.expect("approved while it waited");
    let (refused, ()) = tokio::join!(app.call("r", "counter", args(2)), async {
        let k = once_in(&app, args(2), RecordState::Awaiting).await;
        person.deny(&k, "bob", "not today").await.expect("refused");
    });
    assert!(
        matches!(refused, Err(ToolError::Denied { .. })),
        "{refused:?}"
    );

    let refuse = WriteOptions::new().on_uncertain(OnUncertain::Refuse);
    let risky = registry_with(h.store(), &ns, &Counter::new(Duration::ZERO, refuse), |b| {
        b.notify(notify())
    });
    let k = unknown_then_resolved(&risky, &person).await;

    let received = receiver.wait_for(6, LONG).await;
    let mut events: Vec<(String, serde_json::Value)> = received
        .iter()
        .map(|r| (verified(r, &secret), r.json()))
        .collect();
    events.sort_by(|a, b| a.0.cmp(&b.0));
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "approval.approved",
            "approval.denied",
            "approval.requested",
            "approval.requested",
            "outcome.resolved",
            "outcome.unknown"
        ]
    );
    let data = |i: usize| &events[i].1["data"];
    assert_eq!(
        (&data(0)["by"], &data(0)["arguments"]),
        (&json!("ana"), &json!({ "n": "(hidden)", "fail": false }))
    );
    assert_eq!(
        (&data(1)["by"], &data(1)["reason"]),
        (&json!("bob"), &json!("not today"))
    );
    assert_eq!(
        (&data(2)["run"], &data(2)["tool"]),
        (&json!("r"), &json!("counter"))
    );
    assert_eq!(data(4)["resolution"], "rerun");
    assert_eq!(
        (&data(5)["key"], &data(5)["arguments"]["n"]),
        (&json!(k.as_str()), &json!(3))
    );
    assert!(person.flush_notifications(LONG).await && app.flush_notifications(LONG).await);
}

/// Makes an outcome of `registry`'s unknown (its body fails so), and has
/// `person` resolve it to run again; its key.
async fn unknown_then_resolved(registry: &Registry<()>, person: &Registry<()>) -> IdemKey {
    let unknown = registry.call("r", "counter", json!({ "n": 3, "uncertain": true }));
    let Err(ToolError::OutcomeUnknown { key, .. }) = unknown.await else {
        panic!("the outcome is not unknown");
    };
    let k = IdemKey::from_raw(key);
    let resolved = person.resolve(&k, Resolution::Rerun).await;
    resolved.expect("resolved");
    k
}

/// The event type of `received`, whose signature must verify under
/// `secret`, and not once its body or timestamp is changed.
fn verified(received: &Received, secret: &WebhookSecret) -> String {
    let header = |name: &str| {
        received
            .header(name)
            .unwrap_or_else(|| panic!("no {name} header"))
    };
    let (id, signature) = (header("webhook-id"), header("webhook-signature"));
    let timestamp: u64 = header("webhook-timestamp").parse().expect("a timestamp");
    let body = &received.body;
    assert!(
        secret.verify(id, timestamp, body, signature),
        "signed under the secret"
    );
    assert!(
        !secret.verify(id, timestamp + 1, body, signature),
        "a changed timestamp"
    );
    let mut changed = body.clone();
    changed.push(b' ');
    assert!(
        !secret.verify(id, timestamp, &changed, signature),
        "a changed body"
    );
    received.json()["type"].as_str().expect("a type").to_owned()
}
