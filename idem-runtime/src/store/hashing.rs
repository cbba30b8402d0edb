//! Maps keyed by random bits already (a digest's, a random lease token
//! id): their hasher passes the bits through instead of hashing them
//! again, which SipHash would do at a measurable share of a call.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map whose keys hash to their own bits ([`PassThrough`]).
pub(crate) type PassThroughMap<K, V> = HashMap<K, V, BuildHasherDefault<PassThrough>>;

/// Hashes a `u64` or `u128` key to its own (low 64) bits. The keys it is
/// for are uniformly random, so the bits are as good as a hash.
#[derive(Default)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only reached by hashing something other than a u64 or u128.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}
