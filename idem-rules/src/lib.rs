//! The rules of [idem](https://docs.rs/idem) that both its macros and its
//! runtime check: `#[read_tool]` / `#[write_tool]` reject a bad tool name at
//! compile time, and `RegistryBuilder::build` rejects one a hand-written
//! tool gives. One rule, written once, so the two can never disagree.
//!
//! This crate has no dependencies; use it through `idem`.

#![no_std]

/// Whether `name` matches `^[A-Za-z_][A-Za-z0-9_-]{0,63}$`, the names every
/// provider (OpenAI, Anthropic, Gemini, MCP) accepts.
///
/// ```
/// assert!(idem_rules::valid_tool_name("send_email"));
/// assert!(!idem_rules::valid_tool_name("send email"));
/// assert!(!idem_rules::valid_tool_name("1st"));
/// ```
pub const fn valid_tool_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() > 64 {
        return false;
    }
    if !(bytes[0].is_ascii_alphabetic() || bytes[0] == b'_') {
        return false;
    }
    let mut i = 1;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::valid_tool_name;

    #[test]
    fn names_providers_accept() {
        for name in ["a", "_", "send_email", "get-weather", "A1", &"x".repeat(64)] {
            assert!(valid_tool_name(name), "{name}");
        }
        for name in ["", "1a", "-a", "a b", "a.b", "é", &"x".repeat(65)] {
            assert!(!valid_tool_name(name), "{name}");
        }
    }
}
