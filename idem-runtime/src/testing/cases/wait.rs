//! Waiting for a person: a call of a tool with an approval wait waits for
//! the decision made through another registry on the store (another
//! process, as far as the store can tell), and answers it: approved, the
//! body runs once between all the calls that waited, in whichever
//! registry; refused, the denial; no decision in time, the awaiting
//! answer. A call dropped while it waits leaves the operation awaiting.
//! A call of an unknown outcome with an uncertain wait answers what a
//! person resolves. A store tells the calls watching a record that it
//! was announced, from another store of the same records.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::ToolError;
use crate::key::IdemKey;
use crate::registry::{Registry, Resolution};
use crate::store::{IdemStore, RecordState};
use crate::testing::fixtures::Counter;
use crate::testing::harness::Harness;
use crate::testing::helpers::*;
use crate::tool::{Approval, OnUncertain, WriteOptions};

/// The key of the counter's operation `args` in `registry`, once its
/// record is in state `state` (looked at every 10 ms, for at most a
/// minute).
pub(super) async fn once_in(registry: &Registry<()>, args: Value, state: RecordState) -> IdemKey {
    let (key, _) = registry
        .identify("r", "counter", args)
        .expect("identify")
        .expect("a write tool");
    for _ in 0..6000 {
        if let Ok(Some(info)) = registry.store().inspect(&key).await
            && info.state == state
        {
            return key;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the record under {key} never came to be {state}");
}

/// Calls that wait for approval, in two registries on one store, run the
/// body once between them when a third approves, and all answer its
/// result; a refusal while a call waits is its answer; a call that waits
/// no longer than its wait answers that the operation awaits, and the
/// operation still does (as it does after a waiting call is dropped):
/// approved then, the next call runs it once.
pub async fn registry_waits_for_a_persons_decision<H: Harness>(h: &H) {
    let ns = namespace();
    let waiting = WriteOptions::new()
        .approval(Approval::Required)
        .approval_wait(LONG);
    let counter = Counter::new(Duration::ZERO, waiting);
    let (one, two) = (
        registry(h.store(), &ns, &counter),
        registry(h.store(), &ns, &counter),
    );
    let person = operator(h.store(), &ns);
    let args = json!({ "n": 1 });
    let (first, second, ()) = tokio::join!(
        one.call("r", "counter", args.clone()),
        two.call("r", "counter", args.clone()),
        async {
            let k = once_in(&one, args.clone(), RecordState::Awaiting).await;
            person.approve(&k, "ana").await.expect("approved");
        }
    );
    let first = first.expect("approved while it waited: it ran");
    assert_eq!(second.expect("the same answer"), first);
    assert_eq!(counter.total(), 1, "once between the waiting calls");

    let args = json!({ "n": 2 });
    let (refused, ()) = tokio::join!(one.call("r", "counter", args.clone()), async {
        let k = once_in(&one, args.clone(), RecordState::Awaiting).await;
        person.deny(&k, "bob", "not today").await.expect("refused");
    });
    assert!(
        matches!(&refused, Err(ToolError::Denied { by, reason, .. }) if by.as_deref() == Some("bob") && reason == "not today"),
        "refused while it waited: {refused:?}"
    );
    assert_eq!(counter.total(), 1, "a refused operation never runs");
    no_decision_in_time(h, &ns, &counter).await;
}

/// A call whose wait ends without a decision answers that the operation
/// awaits one; a call dropped while it waits leaves it awaiting too; an
/// approval then runs it once, at the next call.
async fn no_decision_in_time<H: Harness>(h: &H, ns: &str, counter: &Counter) {
    let brief = Counter::new(
        Duration::ZERO,
        WriteOptions::new()
            .approval(Approval::Required)
            .approval_wait(SHORT),
    );
    let registry = registry(h.store(), ns, &brief);
    let person = operator(h.store(), ns);
    let call = || registry.call("r", "counter", json!({ "n": 3 }));
    let k = waits(&call().await).expect("no decision within the wait: it awaits");
    let dropped = tokio::time::timeout(SHORT / 5, call()).await;
    assert!(dropped.is_err(), "still waiting when dropped: {dropped:?}");
    assert_eq!(
        inspected(registry.store(), &k).await.state,
        RecordState::Awaiting
    );
    person.approve(&k, "ana").await.expect("approved");
    let ran = call().await.expect("runs once approved");
    assert_eq!(call().await.expect("replayed"), ran);
    assert_eq!((brief.total(), counter.total()), (1, 1));
}

/// A call of an operation whose outcome its tool left unknown waits for a
/// person to resolve it, and answers what they resolved: the result they
/// give, or the failure; the body ran once.
pub async fn registry_waits_for_an_unknown_outcome_to_be_resolved<H: Harness>(h: &H) {
    let ns = namespace();
    let refuse = WriteOptions::new()
        .on_uncertain(OnUncertain::Refuse)
        .uncertain_wait(LONG);
    let counter = Counter::new(Duration::ZERO, refuse);
    let registry = registry(h.store(), &ns, &counter);
    let person = operator(h.store(), &ns);
    let given = json!({ "n": 1, "attempt": 0, "key": "resolved by hand" });
    let args = json!({ "n": 1, "uncertain": true });
    let (done, ()) = tokio::join!(registry.call("r", "counter", args.clone()), async {
        let k = once_in(&registry, args.clone(), RecordState::Unknown).await;
        let resolution = Resolution::Done(given.clone());
        person.resolve(&k, resolution).await.expect("resolved");
    });
    assert_eq!(done.expect("resolved as done while it waited"), given);

    let args = json!({ "n": 2, "uncertain": true });
    let (failed, ()) = tokio::join!(registry.call("r", "counter", args.clone()), async {
        let k = once_in(&registry, args.clone(), RecordState::Unknown).await;
        let resolution = Resolution::Failed("the bank says no".into());
        person.resolve(&k, resolution).await.expect("resolved");
    });
    assert!(
        matches!(&failed, Err(ToolError::Failed { message, .. }) if message.contains("the bank says no")),
        "resolved as failed while it waited: {failed:?}"
    );
    assert_eq!(counter.total(), 2, "each ran once, before it was unknown");
}

/// A store's watch of a key ends when another store over the same
/// records (one of its own where the harness names no server) announces
/// that key, and, while other keys are announced, when its time is up.
pub async fn announcements_wake_the_calls_watching_their_key<H: Harness>(h: &H) {
    let ns = namespace();
    let watcher = h.store();
    let announcer: Arc<dyn IdemStore> = match h.server() {
        Some(server) => h.store_via(server).await,
        None => h.store(),
    };
    let (k, other) = (key(&ns, "watched"), key(&ns, "other"));
    assert!(
        hears(&*watcher, &*announcer, &k).await,
        "a watch of {k} did not end in a minute of announcements"
    );
    // Only time ends this one: nothing announces its key.
    let (watched, ()) = tokio::join!(
        tokio::time::timeout(LONG, watcher.watch(&other, SHORT)),
        async {
            for _ in 0..3 {
                announcer.announce(&k).await.expect("announced");
            }
        }
    );
    assert!(watched.is_ok(), "a watch outlived its time");
}
