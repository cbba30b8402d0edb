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
    let mut out = String::with_capacity(64);
    write_value(&mut out, value);
    out
}

/// Appends the canonical form of `value` to `out`.
pub(crate) fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

fn write_object(out: &mut String, map: &Map<String, Value>) {
    out.push('{');
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
    out.push('}');
}

fn write_members<'a>(out: &mut String, members: impl Iterator<Item = (&'a String, &'a Value)>) {
    for (i, (key, value)) in members.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, key);
        out.push(':');
        write_value(out, value);
    }
}

/// Compares two strings by their UTF-16 code units, as JCS sorts names.
pub(crate) fn cmp_utf16(a: &str, b: &str) -> Ordering {
    let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    // Both strings share `common` bytes, so a char boundary in one is a
    // boundary in the other.
    let mut start = common;
    while !a.is_char_boundary(start) {
        start -= 1;
    }
    match (a[start..].chars().next(), b[start..].chars().next()) {
        (Some(x), Some(y)) => first_unit(x).cmp(&first_unit(y)).then(x.cmp(&y)),
        _ => a.len().cmp(&b.len()),
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

fn write_number(out: &mut String, n: &Number) {
    if let Some(u) = n.as_u64() {
        out.push_str(itoa::Buffer::new().format(u));
    } else if let Some(i) = n.as_i64() {
        out.push_str(itoa::Buffer::new().format(i));
    } else {
        match n.as_f64() {
            // serde_json never holds NaN or infinities in a `Number` unless
            // `arbitrary_precision` is on; ryu-js writes ECMAScript's
            // Number.prototype.toString form, `-0` as `0`.
            Some(f) if f.is_finite() => out.push_str(ryu_js::Buffer::new().format_finite(f)),
            // Only reachable with `arbitrary_precision` and a number no f64
            // can hold: keep its text rather than invent one.
            _ => out.push_str(&n.to_string()),
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0C => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1F => "",
            _ => continue,
        };
        // `b` is ASCII, so `i` is a char boundary.
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xF)]));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
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
