//! The pieces of RFC 8785 (JCS) both canonical writers share: the UTF-16
//! order of member names, string escapes and ECMAScript number text.

use std::cmp::Ordering;

/// Compares two strings by their UTF-16 code units, as JCS sorts names.
pub(crate) fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    let Some(i) = x.iter().zip(y).position(|(p, q)| p != q) else {
        return x.len().cmp(&y.len());
    };
    // UTF-8 byte order is code point order, and that is UTF-16 order but
    // between U+E000..=U+FFFF (lead bytes 0xEE, 0xEF) and astral characters
    // (lead bytes 0xF0..): only when both differing bytes are that high can
    // the orders disagree.
    if x[i] < 0xEE || y[i] < 0xEE {
        return x[i].cmp(&y[i]);
    }
    // Both strings share `i` bytes, so a char boundary in one is a
    // boundary in the other.
    let mut start = i;
    while !a.is_char_boundary(start) {
        start -= 1;
    }
    match (a[start..].chars().next(), b[start..].chars().next()) {
        (Some(p), Some(q)) => first_unit(p).cmp(&first_unit(q)).then(p.cmp(&q)),
        _ => x.len().cmp(&y.len()),
    }
}

/// The first UTF-16 code unit of `c` (its high surrogate if astral).
fn first_unit(c: char) -> u32 {
    let c = u32::from(c);
    if c >= 0x1_0000 {
        0xD800 + ((c - 0x1_0000) >> 10)
    } else {
        c
    }
}

/// For each byte: 0 if it stands for itself in a JCS string, else the
/// character after the backslash (`u` for `\u00xx`).
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0A] = b'n';
    table[0x0C] = b'f';
    table[0x0D] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// A finite float in ECMAScript's Number.prototype.toString form (`-0` as
/// `0`), as ryu-js writes it.
pub(crate) fn write_f64(out: &mut Vec<u8>, f: f64) {
    out.extend_from_slice(ryu_js::Buffer::new().format_finite(f).as_bytes());
}

/// Whether any byte of `bytes` needs an escape (a control character, `"`
/// or `\\`), eight bytes at a time.
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Exact for "some byte is below n" with n <= 128 (and zero bytes).
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        if below(x, 0x20)
            | below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1)
            != 0
        {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| ESCAPE[usize::from(b)] != 0)
}

pub(crate) fn write_string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if !needs_escape(bytes) {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    out.push(b'"');
    let mut start = 0;
    while let Some(offset) = bytes[start..]
        .iter()
        .position(|&b| ESCAPE[usize::from(b)] != 0)
    {
        let i = start + offset;
        out.extend_from_slice(&bytes[start..i]);
        let b = bytes[i];
        match ESCAPE[usize::from(b)] {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xF)]);
            }
            short => {
                out.push(b'\\');
                out.push(short);
            }
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_scan_finds_exactly_the_bytes_to_escape() {
        // Every byte value at every position of a word and of the tail,
        // beside bytes that need no escape (ASCII and UTF-8 continuation).
        for filler in [b'a', 0x7f, 0xc3, 0xff, b'!', b'#', b'[', b']'] {
            for len in [1, 7, 8, 9, 16, 17] {
                for at in 0..len {
                    for b in 0..=255u8 {
                        let mut bytes = vec![filler; len];
                        bytes[at] = b;
                        let expected = bytes.iter().any(|&c| ESCAPE[usize::from(c)] != 0);
                        assert_eq!(needs_escape(&bytes), expected, "{bytes:?}");
                    }
                }
            }
        }
    }
}
