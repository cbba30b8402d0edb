//! Canonical JSON: RFC 8785 (JCS) with exact integers.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

/// Writes `value` as canonical JSON.
///
/// This is RFC 8785 (the JSON Canonicalization Scheme):
///
/// - object members sorted by their names' UTF-16 code units,
/// - no insignificant whitespace,
/// - strings escaped as JCS prescribes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
///   `\t`, other control characters as `\u00xx`, everything else verbatim),
/// - non-integral numbers in ECMAScript's shortest round-trip form
///   (`2.0` → `2`, `-0.0` → `0`, `1e21` → `1e+21`),
///
/// with one deliberate exception: integers that JSON parsing kept as
/// integers (`u64` / `i64`) are written exactly. JCS would route them
/// through an IEEE double and round anything above 2^53, so two different
/// amounts could share one key.
///
/// ```
/// use serde_json::json;
/// let v = json!({"b": [1, 2.0, -0.0], "a": "x\ny", "big": 18446744073709551615u64});
/// assert_eq!(
///     idem_runtime::canonical_json(&v),
///     r#"{"a":"x\ny","b":[1,2,0],"big":18446744073709551615}"#
/// );
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(64);
    write_value(&mut out, value);
    // Only `str` contents and ASCII were written.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends the canonical form of a typed value to `out`: written straight
/// from its `Serialize` (no `Value` in between) where the direct writer
/// covers it, else through `serde_json::to_value`.
pub(crate) fn write_typed<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    if crate::canonical_ser::write_canonical(value, out).is_err() {
        out.truncate(start);
        write_value(out, &serde_json::to_value(value)?);
    }
    Ok(())
}

/// Runs `f` on an empty byte buffer this thread reuses (the hot path
/// derives a key per call).
pub(crate) fn with_buffer<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            let out = f(&mut buffer);
            // Do not keep a huge argument's buffer alive.
            if buffer.capacity() > 1 << 16 {
                *buffer = Vec::with_capacity(256);
            }
            out
        }
        // Re-entered from `f` (a `Serialize` impl deriving a key): a buffer
        // of its own.
        Err(_) => f(&mut Vec::new()),
    })
}

/// Appends the canonical form of `value` to `out`.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>) {
    out.push(b'{');
    // serde_json's default map is ordered by UTF-8 bytes (= code points), which
    // agrees with UTF-16 order except between U+E000..=U+FFFF and astral
    // characters. With `preserve_order` the map is in insertion order. Either
    // way: check, and sort only when needed.
    let mut sorted = true;
    let mut prev: Option<&str> = None;
    for key in map.keys() {
        if let Some(p) = prev
            && cmp_utf16(p, key) != Ordering::Less
        {
            sorted = false;
            break;
        }
        prev = Some(key);
    }
    if sorted {
        write_members(out, map.iter());
    } else {
        let mut members: Vec<(&String, &Value)> = map.iter().collect();
        members.sort_unstable_by(|a, b| cmp_utf16(a.0, b.0));
        write_members(out, members.into_iter());
    }
    out.push(b'}');
}

fn write_members<'a>(out: &mut Vec<u8>, members: impl Iterator<Item = (&'a String, &'a Value)>) {
    for (i, (key, value)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, key);
        out.push(b':');
        write_value(out, value);
    }
}

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

fn write_number(out: &mut Vec<u8>, n: &Number) {
    if let Some(u) = n.as_u64() {
        out.extend_from_slice(itoa::Buffer::new().format(u).as_bytes());
    } else if let Some(i) = n.as_i64() {
        out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
    } else {
        match n.as_f64() {
            // serde_json never holds NaN or infinities in a `Number` unless
            // `arbitrary_precision` is on.
            Some(f) if f.is_finite() => write_f64(out, f),
            // Only reachable with `arbitrary_precision` and a number no f64
            // can hold: keep its text rather than invent one.
            _ => out.extend_from_slice(n.to_string().as_bytes()),
        }
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
    use serde_json::json;

    #[test]
    fn utf16_order_differs_from_code_point_order() {
        // U+FB01 (one unit, 0xFB01) sorts after U+1F600 (0xD83D 0xDE00) in UTF-16.
        assert_eq!(cmp_utf16("\u{1F600}", "\u{FB01}"), Ordering::Less);
        assert_eq!(cmp_utf16("a", "ab"), Ordering::Less);
        assert_eq!(cmp_utf16("ab", "ab"), Ordering::Equal);
        assert_eq!(cmp_utf16("é", "z"), Ordering::Greater);
        let v = json!({"\u{FB01}": 1, "\u{1F600}": 2, "a": 3});
        assert_eq!(
            canonical_json(&v),
            "{\"a\":3,\"\u{1F600}\":2,\"\u{FB01}\":1}"
        );
    }

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

    #[test]
    fn jcs_escapes() {
        let v = json!("\u{0}\u{8}\u{c}\u{1f}\u{7f}\u{2028}/");
        assert_eq!(
            canonical_json(&v),
            "\"\\u0000\\b\\f\\u001f\u{7f}\u{2028}/\""
        );
    }

    #[test]
    fn numbers() {
        let v: Value =
            serde_json::from_str("[1.0, -0.0, 1e21, 1e-7, 0.1, -9223372036854775808, 1e400]")
                .unwrap_or(Value::Null);
        // 1e400 is not a valid f64 for serde_json: the parse fails.
        assert_eq!(v, Value::Null);
        let v: Value = serde_json::from_str(
            "[1.0, -0.0, 1e21, 1e-7, 0.1, -9223372036854775808, 18446744073709551615, 100000000000000000000]",
        )
        .expect("valid JSON");
        assert_eq!(
            canonical_json(&v),
            "[1,0,1e+21,1e-7,0.1,-9223372036854775808,18446744073709551615,100000000000000000000]"
        );
    }
}
