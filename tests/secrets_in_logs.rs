//! What the logs may hold: no argument value, result fragment or tool error
//! text above `debug` (keys are hashes and may be logged). A tool whose
//! arguments, errors, panics and results carry a marker runs every way it
//! can end, with every level captured; the marker may appear at `debug` and
//! below only. Alone in its own test binary: tracing caches per-callsite
//! interest process-wide.

mod support;

use std::sync::Arc;

use idem::prelude::*;
use idem::store::ClaimRequest;
use idem::store::Entry;
use idem::store::Outcome;
use idem::{IdemStore, MemoryStore};
use serde_json::json;

const MARKER: &str = "SECRET-7f3a";

/// Charge a card; how it ends is up to `how`.
#[write_tool(permanent_errors = |e: &String| e.starts_with("declined"))]
async fn charge(card: String, how: String, ctx: &WriteCtx) -> Result<String, String> {
    let _ = ctx;
    match how.as_str() {
        "permanent" => Err(format!("declined: {card}")),
        "transient" => Err(format!("gateway timeout for {card}")),
        "panic" => panic!("card {card} broke the tool"),
        _ => Ok(format!("charged {card}")),
    }
}

/// Look a card up; panics on request.
#[read_tool]
async fn look_up(card: String) -> Result<String, String> {
    panic!("lookup of {card} failed")
}

/// Count something: its recorded result will not fit.
#[write_tool]
async fn count(card: String, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = (card, ctx);
    Ok(1)
}

#[tokio::test]
async fn secrets_appear_only_at_debug_and_below() {
    let (logs, _guard) = support::Logs::capture(tracing::Level::TRACE);

    let store = Arc::new(MemoryStore::new());
    let registry = Registry::builder(())
        .store(store.clone())
        .tool(charge)
        .tool(look_up)
        .tool(count)
        .build()
        .expect("registry");
    let card = format!("4111-{MARKER}");
    for how in ["ok", "ok", "permanent", "transient", "panic"] {
        let _ = registry
            .call("r", "charge", json!({"card": card, "how": how}))
            .await;
    }
    let _ = registry.call("r", "look_up", json!({"card": card})).await;
    // A recorded result that no longer fits the result type, and quotes
    // the marker.
    let args = json!({"card": card});
    let (key, fingerprint) = registry
        .identify("r", "count", args.clone())
        .expect("identify")
        .expect("a write tool");
    let idem::store::Claim::Acquired(token) = store
        .claim(
            &key,
            ClaimRequest::new(
                "charge_card",
                &fingerprint,
                std::time::Duration::from_secs(30),
            ),
        )
        .await
        .expect("claim")
    else {
        panic!("a fresh key")
    };
    store
        .settle(
            &key,
            &token,
            Outcome::Done {
                result: &json!(card).to_string(),
                ttl: std::time::Duration::from_secs(60),
            },
        )
        .await
        .expect("plant");
    assert!(matches!(
        store.get(&key).await,
        Ok(Some(Entry::Done { .. }))
    ));
    let unfit = registry.call("r", "count", args).await;
    match unfit {
        Err(e) => assert!(!e.to_string().contains(MARKER), "the caller's error: {e}"),
        Ok(v) => panic!("a result that does not fit was replayed: {v}"),
    }

    let text = logs.text();
    let mut at_debug = 0;
    for line in text.lines().filter(|l| l.contains(MARKER)) {
        let level = line.split_whitespace().next().unwrap_or("");
        assert!(
            matches!(level, "DEBUG" | "TRACE"),
            "the marker is logged at {level}: {line}"
        );
        at_debug += 1;
    }
    assert!(
        at_debug > 0,
        "the details are still there at debug:\n{text}"
    );
    for event in [
        "the tool panicked",
        "permanent failure recorded",
        "key released",
        "no longer fits",
    ] {
        assert!(text.contains(event), "no {event:?} event in:\n{text}");
    }
}
