//! Identifiers unique across processes without coordination: lease tokens,
//! the run ids the MCP server makes up, and the nonces of sealed records.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A 128-bit value no other call, in this process or another, returns: a
/// random per-process seed (from the OS) plus a counter.
pub(crate) fn unique_id() -> u128 {
    static SEED: OnceLock<u128> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            // No OS randomness: fall back to time, pid and an address.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let local = 0u8;
            let addr = &local as *const u8 as usize as u128;
            return nanos ^ (u128::from(std::process::id()) << 96) ^ (addr << 32);
        }
        u128::from_le_bytes(bytes)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    seed.wrapping_add(u128::from(n))
}

/// Fills `bytes` from the OS's randomness; without any, with unique ids
/// (never repeated in this process, and seeded to differ from others').
#[cfg_attr(not(feature = "encryption"), allow(dead_code))]
pub(crate) fn fill_random(bytes: &mut [u8]) {
    if getrandom::fill(bytes).is_err() {
        for chunk in bytes.chunks_mut(16) {
            chunk.copy_from_slice(&unique_id().to_le_bytes()[..chunk.len()]);
        }
    }
}
