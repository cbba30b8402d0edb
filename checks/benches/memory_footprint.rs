//! What a `MemoryStore` record costs: fills a store with N recorded
//! results (1-byte results, keys and fingerprints as the registry makes
//! them) and reports the resident memory per entry beyond the result's own
//! size, from `/proc/self/statm` (Linux).
//!
//! ```text
//! cargo bench -p idem-checks --bench memory_footprint -- [N=1000000] [--subset]
//! ```
//!
//! By default each operation is keyed on all its arguments, so its
//! fingerprint is its key's digest (the usual case); with `--subset`, as for
//! a tool with `key = [..]`, every record keeps a fingerprint of its own,
//! with the tags of two checked fields.

use std::time::Duration;

use clap::Parser;
use idem::store::Claim;
use idem::store::ClaimRequest;
use idem::store::Outcome;
use idem::{Fingerprint, IdemKey, IdemStore, MemoryStore, Scope};
use serde_json::json;

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Fills a `MemoryStore` and reports the memory per record.
#[derive(Parser)]
struct Cli {
    /// How many records.
    #[arg(default_value_t = 1_000_000)]
    records: u64,
    /// Give every record a fingerprint of its own, as for a tool keyed on
    /// a subset of its arguments.
    #[arg(long)]
    subset: bool,
    /// What `cargo bench` passes; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let (n, subset) = (cli.records, cli.subset);
    // Keys made beforehand, so that only the store's own memory is counted.
    let keys: Vec<IdemKey> = (0..n)
        .map(|i| {
            IdemKey::derive(Scope::Run("run-1"), "charge_card", 1, &json!({ "n": i }))
                .with_namespace("shop")
        })
        .collect();
    let key_len = keys.first().map_or(0, |k| k.as_str().len());
    // Two field tags (8 bytes each) after the digest, as for `key = [a]`
    // on a tool with two more fields.
    let digest = Fingerprint::of(&json!({"other": "arguments"})).to_hex();
    let own = Fingerprint::from_hex(&format!("{digest}0123456789abcdef89abcdef01234567"))
        .ok_or("a tagged fingerprint")?;
    let fingerprint = |key: &IdemKey| {
        let hex = &key.as_str()[key.as_str().len() - 64..];
        match Fingerprint::from_hex(hex) {
            Some(digest) if !subset => digest,
            _ => own.clone(),
        }
    };
    let store = MemoryStore::new();
    let before = resident_bytes().ok_or("no /proc/self/statm")?;
    for key in &keys {
        let fp = fingerprint(key);
        if let Ok(Claim::Acquired(token)) = store
            .claim(
                key,
                ClaimRequest::new("bench", &fp, Duration::from_secs(30)),
            )
            .await
        {
            store
                .settle(
                    key,
                    &token,
                    Outcome::Done {
                        result: "1",
                        ttl: Duration::from_secs(3600),
                    },
                )
                .await?;
        }
    }
    let after = resident_bytes().ok_or("no /proc/self/statm")?;
    let per_entry = (after - before) as f64 / n as f64;
    println!(
        "{}",
        json!({
            "entries": store.len(),
            "fingerprints": if subset { "own" } else { "key digest" },
            "key_bytes": key_len,
            "result_bytes": 1,
            "resident_bytes_per_entry": (per_entry * 10.0).round() / 10.0,
            "beyond_result_bytes_per_entry": ((per_entry - 1.0) * 10.0).round() / 10.0,
        })
    );
    drop(keys);
    Ok(())
}
