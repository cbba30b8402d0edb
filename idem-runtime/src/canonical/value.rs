//! Canonical JSON of a `serde_json::Value`: the reference writer, which
//! defines the canonical form the typed writer (`ser.rs`) must match.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

use super::primitives::{cmp_utf16, write_f64, write_string};

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

#[cfg(test)]
mod tests {
    use super::super::primitives::cmp_utf16;
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
