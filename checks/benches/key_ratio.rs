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
use std::time::{Duration, Instant};

use clap::Parser;
use idem::{IdemKey, Scope};
use serde_json::Value;
use sha2::{Digest, Sha256};

#[path = "support/arguments.rs"]
mod arguments;

/// One slice's target length.
const SLICE: Duration = Duration::from_millis(20);

fn derive(value: &Value) -> IdemKey {
    IdemKey::derive(Scope::Run("run-1"), "charge_card", 1, black_box(value))
}

fn floor(value: &Value) -> [u8; 32] {
    let bytes = serde_json::to_vec(black_box(value)).unwrap_or_default();
    Sha256::digest(&bytes).into()
}

/// Nanoseconds per call of `f` over `iterations` calls.
fn time_per_call<R>(iterations: u32, mut f: impl FnMut() -> R) -> f64 {
    let start = Instant::now();
    for _ in 0..iterations {
        black_box(f());
    }
    start.elapsed().as_nanos() as f64 / f64::from(iterations)
}

/// How many calls of `f` fill about one slice.
fn calibrate<R>(mut f: impl FnMut() -> R) -> u32 {
    let mut iterations = 1_u32;
    loop {
        let start = Instant::now();
        for _ in 0..iterations {
            black_box(f());
        }
        let took = start.elapsed();
        if took >= SLICE / 4 || iterations >= 1 << 30 {
            let per_call = took.as_secs_f64() / f64::from(iterations);
            return ((SLICE.as_secs_f64() / per_call) as u32).max(1);
        }
        iterations *= 2;
    }
}

/// The value at quantile `q` of sorted `xs`.
fn quantile(xs: &[f64], q: f64) -> f64 {
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

/// Key derivation against its floor, interleaved.
#[derive(Parser)]
struct Cli {
    /// How many rounds (each gives one ratio per argument set).
    #[arg(default_value_t = 41, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// What `cargo bench` passes; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let rounds = Cli::parse().rounds as usize;
    for (name, value) in [
        ("small", arguments::small()),
        ("medium", arguments::medium()),
        ("nested", arguments::nested()),
    ] {
        let bytes = serde_json::to_vec(&value).map_or(0, |v| v.len());
        // Warm both up (caches, the thread's buffer, the CPU's clock).
        let derive_n = calibrate(|| derive(&value));
        let floor_n = calibrate(|| floor(&value));
        let (mut derive_ns, mut floor_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let (d, f) = if round % 2 == 0 {
                let d = time_per_call(derive_n, || derive(&value));
                (d, time_per_call(floor_n, || floor(&value)))
            } else {
                let f = time_per_call(floor_n, || floor(&value));
                (time_per_call(derive_n, || derive(&value)), f)
            };
            derive_ns.push(d);
            floor_ns.push(f);
            ratios.push(d / f);
        }
        for xs in [&mut derive_ns, &mut floor_ns, &mut ratios] {
            xs.sort_by(f64::total_cmp);
        }
        println!(
            "{{\"args\":\"{name}\",\"bytes\":{bytes},\"derive_ns\":{:.1},\"floor_ns\":{:.1},\"ratio\":{:.3},\"ratio_p10\":{:.3},\"ratio_p90\":{:.3},\"rounds\":{rounds}}}",
            quantile(&derive_ns, 0.5),
            quantile(&floor_ns, 0.5),
            quantile(&ratios, 0.5),
            quantile(&ratios, 0.1),
            quantile(&ratios, 0.9),
        );
    }
}
