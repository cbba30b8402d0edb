//! Key derivation against its floor, `serde_json::to_vec` + SHA-256 of the
//! same value, measured side by side: the two alternate in short slices
//! (about 20 ms each, in turn first), and each round gives one ratio. On a
//! VM whose speed drifts by a quarter within seconds, two criterion runs
//! taken one after the other can disagree on the ratio by more than the
//! thing measured; the median of per-round ratios does not.
//!
//! `cargo bench -p idem-checks --bench key_ratio [-- ROUNDS]` prints one line of
//! JSON per argument set (the sets of `checks/benches/idem.rs`):
//! `{"args":"small","bytes":89,"derive_ns":..,"floor_ns":..,"ratio":..,"ratio_p10":..,"ratio_p90":..,"rounds":..}`,
//! the times being medians over the rounds.

use std::hint::black_box;

use idem::{IdemKey, Scope};
use serde_json::Value;
use sha2::{Digest, Sha256};

#[path = "support/alternate.rs"]
mod alternate;
#[path = "support/arguments.rs"]
mod arguments;

fn derive(value: &Value) -> IdemKey {
    IdemKey::derive(Scope::Run("run-1"), "charge_card", 1, black_box(value))
}

fn floor(value: &Value) -> [u8; 32] {
    let bytes = serde_json::to_vec(black_box(value)).unwrap_or_default();
    Sha256::digest(&bytes).into()
}

fn main() {
    let rounds = alternate::rounds_from_args();
    for (name, value) in [
        ("small", arguments::small()),
        ("medium", arguments::medium()),
        ("nested", arguments::nested()),
    ] {
        let bytes = serde_json::to_vec(&value).map_or(0, |v| v.len());
        let times = alternate::alternate(
            rounds,
            &mut [
                &mut |n| {
                    (0..n).for_each(|_| {
                        black_box(derive(&value));
                    })
                },
                &mut |n| {
                    (0..n).for_each(|_| {
                        black_box(floor(&value));
                    })
                },
            ],
        );
        let ratios = alternate::ratios(&times[0], &times[1]);
        let q = alternate::quantile;
        println!(
            "{{\"args\":\"{name}\",\"bytes\":{bytes},\"derive_ns\":{:.1},\"floor_ns\":{:.1},\"ratio\":{:.3},\"ratio_p10\":{:.3},\"ratio_p90\":{:.3},\"rounds\":{rounds}}}",
            q(&times[0], 0.5),
            q(&times[1], 0.5),
            q(&ratios, 0.5),
            q(&ratios, 0.1),
            q(&ratios, 0.9),
        );
    }
}
