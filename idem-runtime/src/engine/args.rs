//! The model's arguments, from what a provider sent to the tool's typed
//! arguments: unwrapping a JSON string, numbers made exact, and errors that
//! name what is wrong.

use std::fmt::Write as _;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::ToolError;

/// 2^53: below it every integer is exact as an `f64`; from it on, an `f64`
/// may be a rounded neighbour of the integer that was written.
const EXACT_F64_LIMIT: f64 = 9_007_199_254_740_992.0;

/// The default [`ArgLimits::max_bytes`]: 1 MiB.
pub(crate) const DEFAULT_MAX_ARGS_BYTES: usize = 1 << 20;

/// The default [`ArgLimits::max_depth`].
pub(crate) const DEFAULT_MAX_ARGS_DEPTH: usize = 64;

/// The deepest nesting a registry may allow: as deep as serde_json parses.
pub(crate) const MAX_ARGS_DEPTH: usize = 128;

/// How large and how deeply nested a call's arguments may be: checked
/// before anything else is done with them (no parsing of a larger string,
/// no hashing, no recursion into deeper nesting).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArgLimits {
    /// The arguments' size as JSON text, in bytes.
    pub(crate) max_bytes: usize,
    /// Objects and arrays within one another.
    pub(crate) max_depth: usize,
}

impl Default for ArgLimits {
    fn default() -> Self {
        ArgLimits {
            max_bytes: DEFAULT_MAX_ARGS_BYTES,
            max_depth: DEFAULT_MAX_ARGS_DEPTH,
        }
    }
}

/// Turns the model's arguments into `A`, naming the field that does not fit.
///
/// `null`, `""` and a string holding a JSON object (as OpenAI sends
/// arguments) are accepted. Arguments beyond `limits` are refused first.
pub(crate) fn parse_args<A: DeserializeOwned>(
    tool: &str,
    args: Value,
    limits: ArgLimits,
) -> Result<A, ToolError> {
    parse(tool, args, limits).map(|(parsed, _)| parsed)
}

/// [`parse_args`] for a write tool's arguments, which derive its key: a
/// number that may have been rounded on its way (a float at or beyond
/// 2^53) is refused where it reaches the typed arguments, never keyed; in
/// a member the arguments do not declare (and serde skips), it is ignored
/// like the member.
pub(crate) fn parse_keyed_args<A: DeserializeOwned + Serialize>(
    tool: &str,
    args: Value,
    limits: ArgLimits,
) -> Result<A, ToolError> {
    let (parsed, inexact) = parse(tool, args, limits)?;
    // Only when the walk met such a number does it cost a second look.
    if inexact {
        let typed = serde_json::to_value(&parsed).map_err(|e| invalid(tool, e.to_string()))?;
        let mut path = String::new();
        if let Some(n) = first_inexact(&typed, &mut path) {
            let at = if path.is_empty() {
                String::new()
            } else {
                format!(" at `{path}`")
            };
            return Err(invalid(
                tool,
                format!(
                    "the number {n}{at} is too large to be keyed exactly: from 2^53 on, a number \
                     with a fraction or an exponent, or an integer beyond 64 bits, may have been \
                     rounded. Send it as an integer of at most 64 bits, or as a string"
                ),
            ));
        }
    }
    Ok(parsed)
}

fn invalid(tool: &str, message: String) -> ToolError {
    ToolError::InvalidArgs {
        tool: tool.to_owned(),
        message,
    }
}

/// The arguments parsed, and whether they hold a number that may have been
/// rounded.
fn parse<A: DeserializeOwned>(
    tool: &str,
    args: Value,
    limits: ArgLimits,
) -> Result<(A, bool), ToolError> {
    let invalid = |message: String| invalid(tool, message);
    // Arguments sent as text are measured before they are parsed; the walk
    // that makes numbers exact measures the parsed ones.
    if let Value::String(text) = &args
        && text.len() > limits.max_bytes
    {
        return Err(invalid(too_large(limits)));
    }
    let mut args = arguments_object(args).map_err(invalid)?;
    let mut walk = Walk {
        limits,
        size: 0,
        inexact: false,
    };
    walk.visit(&mut args, 1).map_err(invalid)?;
    // Path tracking allocates for every field: only an error pays for it.
    if let Ok(parsed) = A::deserialize(&args) {
        return Ok((parsed, walk.inexact));
    }
    // OpenAI's strict mode makes every optional field required and
    // nullable, so a model sends `null` for a field it leaves out, which a
    // `#[serde(default)]` field refuses. Read such nulls as absent, when
    // that is what makes the arguments parse: an `Option` reads both as
    // `None`, and a field without a default is refused either way.
    let mut absent = args.clone();
    if drop_null_members(&mut absent)
        && let Ok(parsed) = A::deserialize(&absent)
    {
        return Ok((parsed, walk.inexact));
    }
    serde_path_to_error::deserialize(&args)
        .map(|parsed| (parsed, walk.inexact))
        .map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." {
                invalid(inner.to_string())
            } else {
                invalid(format!("field `{path}`: {inner}"))
            }
        })
}

/// The first number in `value` that may have been rounded (a float at or
/// beyond 2^53), with its path left in `path`.
fn first_inexact(value: &Value, path: &mut String) -> Option<serde_json::Number> {
    match value {
        Value::Number(n)
            if n.as_f64()
                .is_some_and(|f| n.is_f64() && f.abs() >= EXACT_F64_LIMIT) =>
        {
            Some(n.clone())
        }
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            let len = path.len();
            let _ = write!(path, "[{i}]");
            let found = first_inexact(item, path);
            if found.is_none() {
                path.truncate(len);
            }
            found
        }),
        Value::Object(map) => map.iter().find_map(|(name, member)| {
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(name);
            let found = first_inexact(member, path);
            if found.is_none() {
                path.truncate(len);
            }
            found
        }),
        _ => None,
    }
}

/// Removes every object member whose value is `null`, at any depth;
/// whether there was one.
fn drop_null_members(value: &mut Value) -> bool {
    match value {
        Value::Object(map) => {
            let before = map.len();
            map.retain(|_, v| !v.is_null());
            let mut dropped = map.len() < before;
            for v in map.values_mut() {
                dropped |= drop_null_members(v);
            }
            dropped
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |dropped, v| drop_null_members(v) | dropped),
        _ => false,
    }
}

/// `value`'s own share of its compact JSON text, in bytes: a string or
/// number whole, an array's brackets and commas, an object's braces,
/// quoted keys, colons and commas (members are measured when visited).
fn compact_size(value: &Value) -> usize {
    let separators = |n: usize| n.saturating_sub(1);
    match value {
        Value::String(s) => escaped_len(s),
        Value::Number(n) => number_len(n),
        Value::Bool(true) | Value::Null => 4,
        Value::Bool(false) => 5,
        Value::Array(items) => 2 + separators(items.len()),
        Value::Object(members) => {
            2 + separators(members.len())
                + members.keys().map(|k| escaped_len(k) + 1).sum::<usize>()
        }
    }
}

/// The length of `n` as serde_json writes it: an integer's digits (and
/// sign) counted, a float's written out (`ryu`'s shortest form, which
/// only writing tells).
fn number_len(n: &serde_json::Number) -> usize {
    let digits = |u: u64| u.checked_ilog10().map_or(1, |d| d as usize + 1);
    if let Some(u) = n.as_u64() {
        digits(u)
    } else if let Some(i) = n.as_i64() {
        1 + digits(i.unsigned_abs())
    } else {
        let mut count = Count(0);
        // Writing to a counter cannot fail.
        let _ = write!(count, "{n}");
        count.0
    }
}

/// The length of `s` as a JSON string, quotes and escapes included, as
/// serde_json writes it.
fn escaped_len(s: &str) -> usize {
    2 + s.len()
        + s.bytes()
            .map(|b| match b {
                b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 1,
                0x00..=0x1f => 5,
                _ => 0,
            })
            .sum::<usize>()
}

/// A `fmt::Write` that only counts.
struct Count(usize);

impl std::fmt::Write for Count {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

/// Why arguments larger than `limits` allow are refused.
fn too_large(limits: ArgLimits) -> String {
    format!(
        "the arguments are larger than this registry accepts ({} bytes as compact JSON, `max_args_bytes`)",
        limits.max_bytes
    )
}

/// The arguments as a JSON object, or what is wrong with them.
fn arguments_object(args: Value) -> Result<Value, String> {
    match args {
        Value::Null => Ok(Value::Object(Map::new())),
        Value::String(s) if s.trim().is_empty() => Ok(Value::Object(Map::new())),
        // serde_json's errors say what and where: "EOF while parsing an
        // object at line 1 column 12", "lone leading surrogate in hex
        // escape", "recursion limit exceeded".
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(other) => Err(format!(
                "the arguments string holds {}, not a JSON object of named arguments",
                json_kind(&other)
            )),
            Err(e) => Err(format!("the arguments string is not valid JSON: {e}")),
        },
        v @ Value::Object(_) => Ok(v),
        other => Err(format!(
            "expected a JSON object of named arguments, got {}",
            json_kind(&other)
        )),
    }
}

/// One pass over the arguments that measures them against `limits` (their
/// size as compact JSON text, exactly: what `serde_json::to_string` writes;
/// their nesting, checked before going deeper) and makes every number
/// exact, so that one number has one key.
///
/// Models write `1.0` where an integer is meant: an integral float is the
/// same number as the integer, so it becomes one (integer parameters accept
/// it, float parameters still get the same value). A float at or beyond
/// 2^53 may already have been rounded from what was written (`1e20` and
/// `100000000000000000001` parse to the same `f64`): the walk notes it, and
/// [`parse_keyed_args`] refuses it rather than risk two operations sharing
/// a key.
///
/// It recurses no deeper than `limits.max_depth`, which the registry caps at
/// [`MAX_ARGS_DEPTH`].
struct Walk {
    limits: ArgLimits,
    /// The size of what has been visited so far.
    size: usize,
    /// Whether a number that may have been rounded was met.
    inexact: bool,
}

impl Walk {
    fn visit(&mut self, value: &mut Value, depth: usize) -> Result<(), String> {
        self.measure(value, depth)?;
        match value {
            Value::Number(n) if n.is_f64() => {
                self.exact(n);
                Ok(())
            }
            Value::Number(n) => {
                // An integer a float parameter may read rounded.
                self.inexact |= n.as_i64().is_none_or(|i| i.unsigned_abs() >= 1 << 53);
                Ok(())
            }
            Value::Array(items) => items
                .iter_mut()
                .try_for_each(|item| self.visit(item, depth + 1)),
            Value::Object(map) => map
                .values_mut()
                .try_for_each(|member| self.visit(member, depth + 1)),
            _ => Ok(()),
        }
    }

    /// Adds `value`'s own size (its members come when they are visited);
    /// refuses it past either limit.
    fn measure(&mut self, value: &Value, depth: usize) -> Result<(), String> {
        let nested = matches!(value, Value::Array(_) | Value::Object(_));
        if nested && depth > self.limits.max_depth {
            return Err(format!(
                "the arguments nest deeper than this registry accepts ({} levels of objects and arrays, `max_args_depth`)",
                self.limits.max_depth
            ));
        }
        self.size += compact_size(value);
        if self.size > self.limits.max_bytes {
            return Err(too_large(self.limits));
        }
        Ok(())
    }

    /// An integral float below 2^53 becomes the integer it is; one at or
    /// beyond it is noted.
    fn exact(&mut self, n: &mut serde_json::Number) {
        let Some(f) = n.as_f64() else { return };
        if f.abs() < EXACT_F64_LIMIT {
            if f.fract() == 0.0 {
                // |f| < 2^53: exact as an i64.
                *n = serde_json::Number::from(f as i64);
            }
        } else {
            self.inexact = true;
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(args: Value, keyed: bool) -> Result<Value, String> {
        let limits = ArgLimits::default();
        let parsed = if keyed {
            parse_keyed_args::<Value>("t", args, limits)
        } else {
            parse_args::<Value>("t", args, limits)
        };
        parsed.map_err(|e| e.to_string())
    }

    #[test]
    fn arguments_beyond_the_limits_are_refused_before_parsing() {
        let limits = ArgLimits {
            max_bytes: 1024,
            max_depth: 4,
        };
        let parse =
            |args: Value| parse_keyed_args::<Value>("t", args, limits).map_err(|e| e.to_string());
        let big = "x".repeat(2000);
        for args in [
            json!({ "s": big }),
            Value::String(format!("{{\"s\": \"{big}\"}}")),
        ] {
            let err = parse(args).expect_err("too large");
            assert!(err.contains("max_args_bytes"), "{err}");
        }
        let deep = json!({"a": {"b": {"c": {"d": {"e": 1}}}}});
        let err = parse(deep).expect_err("too deep");
        assert!(err.contains("max_args_depth"), "{err}");
        let deep_text = Value::String(r#"{"a": [[[[1]]]]}"#.into());
        let err = parse(deep_text).expect_err("too deep, as text");
        assert!(err.contains("max_args_depth"), "{err}");
        assert!(parse(json!({"a": {"b": {"c": 1}}, "s": "x".repeat(900)})).is_ok());
    }

    #[test]
    fn integral_floats_become_integers_below_2_pow_53() {
        assert_eq!(parse(json!({"n": 1.0}), true), Ok(json!({"n": 1})));
        assert_eq!(
            parse(json!({"n": -9007199254740991.0}), true),
            Ok(json!({"n": -9007199254740991_i64}))
        );
        assert_eq!(parse(json!({"x": 1.5}), true), Ok(json!({"x": 1.5})));
    }

    #[test]
    fn numbers_that_may_be_rounded_are_refused_when_keyed() {
        // 10^20 and 10^20 + 1 are the same f64: neither can be keyed.
        for text in [
            r#"{"n": 100000000000000000000}"#,
            r#"{"n": 100000000000000000001}"#,
            r#"{"a": {"b": [1, 9007199254740993.0]}}"#,
            r#"{"n": 1e300}"#,
        ] {
            let err = parse(Value::String(text.into()), true).expect_err(text);
            assert!(err.contains("too large to be keyed exactly"), "{err}");
        }
        let err = parse(json!({"a": {"b": [1, 1e20]}}), true).unwrap_err();
        assert!(err.contains("at `a.b[1]`"), "{err}");
        // Integers up to 64 bits are exact, whatever their size.
        assert_eq!(
            parse(Value::String(r#"{"n": 18446744073709551615}"#.into()), true),
            Ok(json!({"n": u64::MAX}))
        );
        // A read tool's arguments are not keyed: they pass.
        assert_eq!(parse(json!({"n": 1e20}), false), Ok(json!({"n": 1e20})));
        // Nor is a member the typed arguments do not declare (serde skips
        // it); a declared float field is.
        #[derive(Debug, PartialEq, serde::Deserialize, Serialize)]
        struct Typed {
            n: u32,
            #[serde(default)]
            x: f64,
        }
        let typed = |args: Value| {
            parse_keyed_args::<Typed>("t", args, ArgLimits::default()).map_err(|e| e.to_string())
        };
        assert_eq!(
            typed(json!({"n": 1, "extra": {"m": 1e20}})),
            Ok(Typed { n: 1, x: 0.0 })
        );
        let err = typed(json!({"n": 1, "x": 1e20})).unwrap_err();
        assert!(err.contains("at `x`"), "{err}");
        // An integer from 2^53 on that a float field reads is rounded
        // there: 2^53 + 1 would run as 2^53, and 2^53 replay it.
        for n in [9007199254740992_u64, 9007199254740993] {
            let err = typed(json!({"n": 1, "x": n})).unwrap_err();
            assert!(err.contains("too large to be keyed exactly"), "{err}");
        }
        // Below 2^53 it is exact, and an integer field reads any.
        assert_eq!(
            typed(json!({"n": 1, "x": 9007199254740991_u64})),
            Ok(Typed {
                n: 1,
                x: 9007199254740991.0
            })
        );
    }

    /// `max_args_bytes` is the arguments' size as compact JSON, exactly:
    /// escapes and long numbers counted as written.
    #[test]
    fn the_size_measured_is_the_compact_json_text() {
        for args in [
            json!({"s": "plain", "n": [1, -2.5, 1.2345678901234567e-300, true, null, false]}),
            json!({"c": "\u{0}\u{1f}\"\\\n\t é", "nested": {"a": [], "b": {}}}),
            json!({"floats": vec![-1.2345678901234567e-300; 40]}),
            json!({"ints": [0, 9, 10, 99, 100, -1, -9, -10, u64::MAX, i64::MAX, i64::MIN]}),
            json!({}),
        ] {
            let text = serde_json::to_string(&args).expect("JSON");
            let exact = ArgLimits {
                max_bytes: text.len(),
                max_depth: DEFAULT_MAX_ARGS_DEPTH,
            };
            let short = ArgLimits {
                max_bytes: text.len() - 1,
                ..exact
            };
            assert!(
                parse_args::<Value>("t", args.clone(), exact).is_ok(),
                "{text}"
            );
            let refused = parse_args::<Value>("t", args, short).expect_err(&text);
            assert!(refused.to_string().contains("max_args_bytes"), "{refused}");
        }
    }

    #[test]
    fn malformed_argument_strings_say_what_is_wrong() {
        let cases = [
            (r#"{"amount": 12"#, "not valid JSON: EOF while parsing"),
            (
                r#"{"s": "\ud800"}"#,
                "not valid JSON: unexpected end of hex escape",
            ),
            ("[1, 2]", "holds an array, not a JSON object"),
            ("\"hi\"", "holds a string, not a JSON object"),
        ];
        for (text, expected) in cases {
            let err = parse(Value::String(text.into()), true).expect_err(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let err = parse(Value::String(format!("{{\"a\": {deep}}}")), true).unwrap_err();
        assert!(err.contains("recursion limit exceeded"), "{err}");
    }
}
