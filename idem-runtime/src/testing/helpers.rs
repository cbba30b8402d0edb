//! What the cases share: fresh namespaces, keys, the two lease lengths,
//! assertions on claims, and a registry over the store under test.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::fixtures::Counter;
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey, Scope};
use crate::registry::{Registry, RegistryBuilder};
use crate::store::{Claim, Entry, IdemStore, LeaseToken, Outcome, RecordInfo};

/// A fresh namespace per case, so cases share no keys.
pub(super) fn namespace() -> String {
    format!("idem-test-{:016x}", LeaseToken::generate(0).id() as u64)
}

pub(super) fn key(ns: &str, tag: &str) -> IdemKey {
    IdemKey::derive(Scope::Run(tag), "conformance", 1, &json!({ "tag": tag })).with_namespace(ns)
}

pub(super) fn fp(n: u64) -> Fingerprint {
    Fingerprint::of(&json!({ "n": n }))
}

/// [`fp`] with `fields` field tags, as a tool keyed on a subset of its
/// arguments stores it.
pub(super) fn tagged_fp(n: u64, fields: usize) -> Fingerprint {
    let tags = (0..fields)
        .map(|i| crate::key::field_tag(&[3; 32], &format!("f{i}"), Some(&json!(n))))
        .collect();
    fp(n).with_fields(tags)
}

/// The tool the store cases' records name.
pub(super) const TOOL: &str = "conformance";

pub(super) const LONG: Duration = Duration::from_secs(60);
pub(super) const SHORT: Duration = Duration::from_millis(250);

/// A result, kept [`LONG`].
pub(super) fn done_with(result: &str) -> Outcome<'_> {
    Outcome::Done { result, ttl: LONG }
}

/// A permanent failure, kept [`LONG`].
pub(super) fn failed_with(error: &str) -> Outcome<'_> {
    Outcome::Failed { error, ttl: LONG }
}

/// Sleeps well past a [`SHORT`] lease or TTL.
pub(super) async fn past_short() {
    tokio::time::sleep(SHORT * 3).await;
}

/// The record under `key`, which must be there.
pub(super) async fn inspected(store: &dyn IdemStore, key: &IdemKey) -> RecordInfo {
    match store.inspect(key).await {
        Ok(Some(info)) => info,
        other => panic!("inspect {key}: expected a record, got {other:?}"),
    }
}

pub(super) fn acquired(claim: Result<Claim, StoreError>) -> LeaseToken {
    match claim {
        Ok(Claim::Acquired(token)) => token,
        other => panic!("expected the claim to be acquired, got {other:?}"),
    }
}

/// The token of a claim that took a lapsed one over.
pub(super) fn taken_over(claim: Result<Claim, StoreError>) -> LeaseToken {
    match claim {
        Ok(Claim::TakenOver(token)) => token,
        other => panic!("a claim after a lapse must say it took over, got {other:?}"),
    }
}

pub(super) fn existing(claim: Result<Claim, StoreError>) -> Entry {
    match claim {
        Ok(Claim::Existing(entry)) => entry,
        other => panic!("expected an existing entry, got {other:?}"),
    }
}

pub(super) fn lease_lost(result: Result<(), StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::LeaseLost)),
        "{what}: expected LeaseLost, got {result:?}"
    );
}

/// A registry over `store` in namespace `ns` with `counter`, configured
/// further by `configure`.
pub(super) fn registry_with(
    store: Arc<dyn IdemStore>,
    ns: &str,
    counter: &Counter,
    configure: impl FnOnce(RegistryBuilder<()>) -> RegistryBuilder<()>,
) -> Registry<()> {
    let builder = Registry::builder(())
        .store(store)
        .namespace(ns)
        .tool(counter.clone());
    match configure(builder).build() {
        Ok(r) => r,
        Err(e) => panic!("registry: {e}"),
    }
}

pub(super) fn registry(store: Arc<dyn IdemStore>, ns: &str, counter: &Counter) -> Registry<()> {
    registry_with(store, ns, counter, |b| b)
}

/// A registry on `store` in namespace `ns` that holds no tools: an
/// operator's, or another service's.
pub(super) fn operator(store: Arc<dyn IdemStore>, ns: &str) -> Registry<()> {
    operator_with(store, ns, |b| b)
}

/// [`operator`], configured further by `configure`.
pub(super) fn operator_with(
    store: Arc<dyn IdemStore>,
    ns: &str,
    configure: impl FnOnce(RegistryBuilder<()>) -> RegistryBuilder<()>,
) -> Registry<()> {
    let builder = Registry::builder(()).store(store).namespace(ns);
    configure(builder).build().expect("a registry of no tools")
}

/// Whether `outcome` is the answer that the operation waits for a
/// person's approval, under `key`.
pub(super) fn waits(
    outcome: &Result<serde_json::Value, crate::error::ToolError>,
) -> Option<IdemKey> {
    match outcome {
        Err(crate::error::ToolError::ApprovalRequired { key, .. }) => Some(key.clone()),
        _ => None,
    }
}

/// Whether `watcher` hears `key` announced through `announcer`
/// ([`IdemStore::watch`], [`IdemStore::announce`]), which announces it
/// every 50 ms until it does (a listener may still be connecting), for
/// at most a minute; the watch itself would last ten.
pub(super) async fn hears(
    watcher: &dyn IdemStore,
    announcer: &dyn IdemStore,
    key: &IdemKey,
) -> bool {
    let announcing = async {
        loop {
            announcer.announce(key).await.expect("announced");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        () = watcher.watch(key, 10 * LONG) => true,
        () = announcing => unreachable!("announces until heard"),
        () = tokio::time::sleep(LONG) => false,
    }
}
