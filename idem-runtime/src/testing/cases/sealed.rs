//! Recorded results and errors sealed at rest (feature `encryption`) over
//! the store under test: the store holds ciphertext, replays open it, keys
//! rotate, and a record that does not open (moved, under an unknown key,
//! plaintext where sealed ones are expected) is an error, never a run.

use std::time::Duration;

use serde_json::{Value, json};

use crate::error::ToolError;
use crate::registry::Registry;
use crate::store::{ClaimRequest, IdemStore};
use crate::testing::fixtures::Counter;
use crate::testing::harness::Harness;
use crate::testing::helpers::*;
use crate::tool::WriteOptions;

/// Sealed records hold no plaintext, replay, rotate, and refuse to open
/// anywhere but where they were written; without the `encryption` feature,
/// a registry without keys refuses a sealed record.
pub async fn registry_sealed_records_are_ciphertext_and_authenticated<H: Harness>(h: &H) {
    let ns = namespace();
    let counter = Counter::new(Duration::ZERO, WriteOptions::new());
    let plain = registry(h.store(), &ns, &counter);
    #[cfg(feature = "encryption")]
    with_keys::cases(h, &ns, &counter, &plain).await;
    // A registry without keys meets a sealed record: an error, not a run.
    let ran = counter.total();
    plant(h, &plain, json!({"n": 90}), "idem-sealed:v1:k1:AAAA").await;
    let err = plain
        .call("r", "counter", json!({"n": 90}))
        .await
        .expect_err("a sealed record, and no keys");
    assert_store_error(&err, "encrypted");
    assert_eq!(counter.total(), ran, "nothing ran");
}

/// Writes `payload` as the recorded result of `counter` called with
/// `args` in run `r`, straight through the store.
async fn plant<H: Harness>(h: &H, registry: &Registry<()>, args: Value, payload: &str) {
    let (key, fingerprint) = registry
        .identify("r", "counter", args)
        .expect("identify")
        .expect("a write tool");
    let store = h.store();
    let token = acquired(
        store
            .claim(&key, ClaimRequest::new(TOOL, &fingerprint, LONG))
            .await,
    );
    store
        .settle(&key, &token, done_with(payload))
        .await
        .expect("settle done");
}

fn assert_store_error(err: &ToolError, says: &str) {
    match err {
        ToolError::Store { source, .. } => {
            assert!(source.to_string().contains(says), "{source}");
        }
        other => panic!("expected a store error saying {says:?}, got {other:?}"),
    }
}

#[cfg(feature = "encryption")]
mod with_keys {
    use serde_json::json;

    use super::{assert_store_error, plant};
    use crate::error::ToolError;
    use crate::registry::Registry;
    use crate::seal::ResultKeys;
    use crate::store::{Entry, IdemStore};
    use crate::testing::fixtures::Counter;
    use crate::testing::harness::Harness;
    use crate::testing::helpers::registry_with;

    const K1: [u8; 32] = [1; 32];
    const K2: [u8; 32] = [2; 32];

    /// The recorded payload of `counter` called with `args`.
    async fn payload<H: Harness>(
        h: &H,
        registry: &Registry<()>,
        args: serde_json::Value,
    ) -> String {
        let (key, _) = registry
            .identify("r", "counter", args)
            .expect("identify")
            .expect("a write tool");
        match h.store().get(&key).await.expect("get") {
            Some(Entry::Done { result, .. }) => result,
            Some(Entry::Failed { error, .. }) => error,
            other => panic!("expected a record, got {other:?}"),
        }
    }

    /// The registries of one case: over one store, namespace and counter.
    struct Case<'a, H> {
        h: &'a H,
        ns: &'a str,
        counter: &'a Counter,
    }

    impl<H: Harness> Case<'_, H> {
        fn with(&self, keys: ResultKeys) -> Registry<()> {
            registry_with(self.h.store(), self.ns, self.counter, move |b| {
                b.encrypt_results(keys)
            })
        }
    }

    pub(super) async fn cases<H: Harness>(
        h: &H,
        ns: &str,
        counter: &Counter,
        plain: &Registry<()>,
    ) {
        let case = Case { h, ns, counter };
        let sealed = case.with(ResultKeys::new("k1", K1).expect("keys"));
        replayed_opened(&case, &sealed).await;
        // A sealed result copied onto another record does not open there.
        let moved = payload(h, &sealed, json!({"n": 1})).await;
        plant(h, &sealed, json!({"n": 3}), &moved).await;
        let err = sealed
            .call("r", "counter", json!({"n": 3}))
            .await
            .expect_err("moved");
        assert_store_error(&err, "fails authentication");
        rotated(&case).await;
        plaintext(&case, &sealed, plain).await;
        approval_sealed(h).await;
    }

    /// An operation awaiting approval is sealed like a result: what was
    /// asked and what the record says of it are ciphertext. The registry
    /// with the keys approves it (the approval sealed in the record too);
    /// one without them is refused, changing nothing.
    async fn approval_sealed<H: Harness>(h: &H) {
        use crate::error::ResolveError;
        use crate::tool::{Approval, WriteOptions};
        let options = WriteOptions::new().approval(Approval::Required);
        let counter = Counter::new(std::time::Duration::ZERO, options);
        let ns = crate::testing::helpers::namespace();
        let keys = ResultKeys::new("k1", K1).expect("keys");
        let sealed = registry_with(h.store(), &ns, &counter, move |b| b.encrypt_results(keys));
        let plain = registry_with(h.store(), &ns, &counter, |b| b);
        let key = match sealed.call("r", "counter", json!({"n": 7})).await {
            Err(ToolError::ApprovalRequired { key, .. }) => key,
            other => panic!("the call asks for approval, got {other:?}"),
        };
        let info = crate::testing::helpers::inspected(&*h.store(), &key).await;
        let (asked, about) = (
            info.payload.unwrap_or_default(),
            info.about.unwrap_or_default(),
        );
        assert!(
            asked.starts_with("idem-sealed:v1:k1:") && about.starts_with("idem-sealed:v1:k1:"),
            "in the clear: {asked:?}, {about:?}"
        );
        match plain.approve(&key, "ana").await {
            Err(ResolveError::Store(e)) => assert!(e.to_string().contains("encrypted"), "{e}"),
            other => panic!("a registry without the keys cannot approve, got {other:?}"),
        }
        sealed
            .approve(&key, "ana")
            .await
            .expect("approved with the keys");
        let info = crate::testing::helpers::inspected(&*h.store(), &key).await;
        let about = info.about.unwrap_or_default();
        assert!(
            about.starts_with("idem-sealed:v1:k1:") && !about.contains("ana"),
            "the approval in the clear: {about:?}"
        );
        sealed
            .call("r", "counter", json!({"n": 7}))
            .await
            .expect("runs once approved");
        assert_eq!(counter.total(), 1);
    }

    /// A result and a failure: ciphertext in the store, replayed opened.
    async fn replayed_opened<H: Harness>(case: &Case<'_, H>, sealed: &Registry<()>) {
        let (h, counter) = (case.h, case.counter);
        let first = sealed
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("runs");
        let again = sealed
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("replays");
        assert_eq!((first, counter.total()), (again, 1));
        let stored = payload(h, sealed, json!({"n": 1})).await;
        assert!(stored.starts_with("idem-sealed:v1:k1:"), "{stored}");
        assert!(
            !stored.contains("attempt"),
            "plaintext in the store: {stored}"
        );
        let declined = json!({"n": 2, "fail_with": "declined card 4111"});
        for _ in 0..2 {
            match sealed.call("r", "counter", declined.clone()).await {
                Err(ToolError::Failed { message, .. }) => assert!(message.contains("4111")),
                other => panic!("expected the recorded failure, got {other:?}"),
            }
        }
        assert_eq!(counter.total(), 2);
        let stored = payload(h, sealed, declined.clone()).await;
        assert!(
            stored.starts_with("idem-sealed:v1:k1:") && !stored.contains("4111"),
            "{stored}"
        );
        // What the record says of its operation is sealed too.
        let (key, _) = sealed
            .identify("r", "counter", declined)
            .expect("identify")
            .expect("a write tool");
        let about = h.store().inspect(&key).await.expect("inspect");
        let about = about.and_then(|info| info.about).unwrap_or_default();
        assert!(
            about.starts_with("idem-sealed:v1:k1:") && !about.contains("4111"),
            "the arguments in the clear: {about:?}"
        );
    }

    /// Rotation: k2 seals, k1 still opens; without k1, an error.
    async fn rotated<H: Harness>(case: &Case<'_, H>) {
        let rotated = case.with(
            ResultKeys::new("k2", K2)
                .and_then(|k| k.also("k1", K1))
                .expect("keys"),
        );
        rotated
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect("opened under k1");
        rotated
            .call("r", "counter", json!({"n": 4}))
            .await
            .expect("runs");
        assert!(
            payload(case.h, &rotated, json!({"n": 4}))
                .await
                .starts_with("idem-sealed:v1:k2:")
        );
        let forgot = case.with(ResultKeys::new("k2", K2).expect("keys"));
        let err = forgot
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect_err("no k1");
        assert_store_error(&err, "\"k1\"");
        assert_eq!(case.counter.total(), 3, "nothing ran again");
    }

    /// A plaintext record: refused, unless plaintext is accepted; a
    /// registry without keys refuses sealed records.
    async fn plaintext<H: Harness>(
        case: &Case<'_, H>,
        sealed: &Registry<()>,
        plain: &Registry<()>,
    ) {
        plain
            .call("r", "counter", json!({"n": 5}))
            .await
            .expect("runs");
        let err = sealed
            .call("r", "counter", json!({"n": 5}))
            .await
            .expect_err("plaintext");
        assert_store_error(&err, "not encrypted");
        let migrating = case.with(ResultKeys::new("k1", K1).expect("keys").accept_plaintext());
        migrating
            .call("r", "counter", json!({"n": 5}))
            .await
            .expect("accepted");
        let err = plain
            .call("r", "counter", json!({"n": 1}))
            .await
            .expect_err("sealed");
        assert_store_error(&err, "encrypted");
        migrating
            .call("r", "counter", json!({"n": 6}))
            .await
            .expect("runs");
        assert_eq!(case.counter.total(), 5);
    }
}
