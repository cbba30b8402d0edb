//! [`LeaseToken`]: the fencing token a claim hands its holder.

use crate::unique::unique_id;

/// The fencing token of one claim, and which attempt of the operation it is.
///
/// Tokens are 128-bit values unique across processes (a random per-process
/// seed plus a counter). Every state change after the claim is
/// compare-and-set on the token.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken {
    id: u128,
    attempt: u32,
}

impl LeaseToken {
    /// A fresh, unique token for attempt number `attempt` (0 for the first).
    pub fn generate(attempt: u32) -> LeaseToken {
        LeaseToken {
            id: unique_id(),
            attempt,
        }
    }

    /// Rebuilds a token from its stored parts.
    pub fn from_parts(id: u128, attempt: u32) -> LeaseToken {
        LeaseToken { id, attempt }
    }

    /// The token's unique id.
    pub fn id(&self) -> u128 {
        self.id
    }

    /// How many hex digits [`id_hex`](Self::id_hex) writes.
    pub(crate) const ID_HEX_LEN: usize = 32;

    /// The id as 32 lowercase hex digits, as backends store it.
    pub fn id_hex(&self) -> String {
        let mut hex = String::with_capacity(Self::ID_HEX_LEN);
        self.push_id_hex(&mut hex);
        hex
    }

    /// [`id_hex`](Self::id_hex)'s digits, without allocating.
    pub(crate) fn id_hex_digits(&self) -> [u8; Self::ID_HEX_LEN] {
        crate::key::hex32(self.id.to_be_bytes())
    }

    /// Appends [`id_hex`](Self::id_hex) to `out`.
    pub(crate) fn push_id_hex(&self, out: &mut String) {
        // Hex digits are ASCII: always valid UTF-8.
        out.push_str(std::str::from_utf8(&self.id_hex_digits()).unwrap_or_default());
    }

    /// How many earlier claims of this operation ended without a recorded
    /// result (released after a transient failure, or lapsed).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

impl std::fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LeaseToken({:032x}, attempt {})", self.id, self.attempt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_written_as_32_hex_digits() {
        for id in [0, 1, 0xabc, u128::MAX, u128::MAX / 3, unique_id()] {
            let token = LeaseToken::from_parts(id, 0);
            assert_eq!(token.id_hex(), format!("{id:032x}"));
        }
    }
}
