//! Timing several ways of doing one thing side by side on a noisy machine:
//! the sides run in alternating slices of about 20 ms, each round starting
//! with the next side, so that a drift of the machine's speed falls on all
//! of them alike and each round gives one ratio per side. Used by the
//! `key_ratio` and `safety_ratio` benches.

use std::time::{Duration, Instant};

use clap::Parser;

/// One slice's target length.
const SLICE: Duration = Duration::from_millis(20);

/// One side: makes the given number of calls (set up once per slice, so
/// that what a side installs around its calls is not timed per call).
pub(crate) type Side<'a> = &'a mut dyn FnMut(u32);

/// Nanoseconds per call of `side` over `iterations` calls.
fn time_per_call(iterations: u32, side: &mut dyn FnMut(u32)) -> f64 {
    let start = Instant::now();
    side(iterations);
    start.elapsed().as_nanos() as f64 / f64::from(iterations)
}

/// How many calls of `side` fill about one slice (warming it up meanwhile).
fn calibrate(side: &mut dyn FnMut(u32)) -> u32 {
    let mut iterations = 1_u32;
    loop {
        let start = Instant::now();
        side(iterations);
        let took = start.elapsed();
        if took >= SLICE / 4 || iterations >= 1 << 30 {
            let per_call = took.as_secs_f64() / f64::from(iterations);
            return ((SLICE.as_secs_f64() / per_call) as u32).max(1);
        }
        iterations *= 2;
    }
}

/// Times `sides` for `rounds` rounds: per side, its ns per call in each
/// round, in round order.
pub(crate) fn alternate(rounds: usize, sides: &mut [Side<'_>]) -> Vec<Vec<f64>> {
    let iterations: Vec<u32> = sides.iter_mut().map(|f| calibrate(*f)).collect();
    let mut times = vec![Vec::with_capacity(rounds); sides.len()];
    for round in 0..rounds {
        // Each round starts with the next side.
        for i in 0..sides.len() {
            let side = (round + i) % sides.len();
            let t = time_per_call(iterations[side], sides[side]);
            times[side].push(t);
        }
    }
    times
}

/// The value at quantile `q` of `xs` (sorted here).
pub(crate) fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

/// Per round, `a`'s time over `b`'s.
pub(crate) fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| a / b).collect()
}

/// The sides of one measurement in alternating slices.
#[derive(Parser)]
struct Cli {
    /// How many rounds (each gives one ratio per side).
    #[arg(default_value_t = 41, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// What `cargo bench` passes; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// The rounds asked for on the command line (41 by default).
pub(crate) fn rounds_from_args() -> usize {
    Cli::parse().rounds as usize
}

/// Prints one line of JSON per side, named by `names`, of the `times`
/// [`alternate`] gave over `rounds`: its median ns per call, the first
/// side's, and its ratio to the first side (median, p10, p90).
#[allow(
    dead_code,
    reason = "key_ratio, which includes this file too, reports a ratio of its own"
)]
pub(crate) fn print_ratios(names: &[&str], times: &[Vec<f64>], rounds: usize) {
    for (name, t) in names.iter().zip(times) {
        let ratios = ratios(t, &times[0]);
        println!(
            "{{\"variant\":\"{name}\",\"ns\":{:.0},\"off_ns\":{:.0},\"ratio\":{:.3},\"ratio_p10\":{:.3},\"ratio_p90\":{:.3},\"rounds\":{rounds}}}",
            quantile(t, 0.5),
            quantile(&times[0], 0.5),
            quantile(&ratios, 0.5),
            quantile(&ratios, 0.1),
            quantile(&ratios, 0.9),
        );
    }
}
