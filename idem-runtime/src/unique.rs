//! Identifiers unique across processes without coordination: lease tokens,
//! and the run ids the MCP server makes up.

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
