//! Instances made from a JSON Schema itself, to test that what a rendered
//! schema allows, the tool takes. Each choice the schema leaves open (which
//! `anyOf` / `oneOf` branch, which type of a type list, whether an optional
//! property is there, how long an array is, which number in a range) is
//! taken by a seeded chooser, so a few hundred seeds walk the branches, and
//! numbers go to the edges of what the schema allows: its `minimum` and
//! `maximum`, or, where a side is open, far beyond any Rust integer. A
//! schema that forgets a bound is found that way.
//!
//! Only the keywords the renderings use are understood; anything else
//! stops the generator with a panic naming it, so that it never guesses.

use serde_json::{Map, Value, json};

/// Keywords that carry no constraint on instances.
const ANNOTATIONS: &[&str] = &["description", "title", "default", "examples", "$defs"];

/// Strings tried, in turn, against a string schema's length and pattern.
const STRINGS: &[&str] = &["", "x", "AB 12", "Main Street 1", "ünïcode ✓", "4242"];

/// Beyond every Rust integer, on either side.
const HUGE: f64 = 1e20;

/// How deep a recursive schema is followed before choices go to the
/// smallest instance (no optional property, empty arrays, `null`).
const MAX_DEPTH: usize = 6;

/// An instance of `root` (a whole schema, whose `$ref`s point into its own
/// `$defs`), shaped by `seed`.
pub(crate) fn instance(root: &Value, seed: u64) -> Value {
    let mut generator = Generator {
        root,
        state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
    };
    generator.value(root, 0)
}

struct Generator<'a> {
    root: &'a Value,
    state: u64,
}

impl<'a> Generator<'a> {
    /// One of `0..n` (xorshift64*).
    fn choose(&mut self, n: usize) -> usize {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        (self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }

    fn value(&mut self, schema: &Value, depth: usize) -> Value {
        let map = match schema {
            Value::Bool(true) => return self.anything(depth),
            Value::Object(map) => map,
            other => panic!("no instance of schema {other}"),
        };
        if map.is_empty() {
            return self.anything(depth);
        }
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            return self.value(self.resolve(reference), depth + 1);
        }
        for key in map.keys() {
            let understood =
                ANNOTATIONS.contains(&key.as_str()) || KEYWORDS.contains(&key.as_str());
            assert!(understood, "the generator does not know `{key}`: {schema}");
        }
        if let Some(constant) = map.get("const") {
            return constant.clone();
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            return values[self.choose(values.len())].clone();
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(union) {
                let pick = if depth >= MAX_DEPTH {
                    branches
                        .iter()
                        .position(|b| b["type"] == "null")
                        .unwrap_or(0)
                } else {
                    self.choose(branches.len())
                };
                return self.value(&branches[pick], depth);
            }
        }
        let kind = match map.get("type") {
            Some(Value::String(one)) => one.as_str(),
            Some(Value::Array(many)) => {
                let pick = if depth >= MAX_DEPTH {
                    many.len() - 1
                } else {
                    self.choose(many.len())
                };
                many[pick].as_str().expect("a type name")
            }
            _ => panic!("no type to make an instance of: {schema}"),
        };
        self.of_type(kind, map, depth)
    }

    fn of_type(&mut self, kind: &str, map: &Map<String, Value>, depth: usize) -> Value {
        match kind {
            "null" => Value::Null,
            "boolean" => Value::Bool(self.choose(2) == 1),
            "integer" | "number" => self.number(map),
            "string" => self.string(map),
            "array" => self.array(map, depth),
            "object" => self.object(map, depth),
            other => panic!("unknown type `{other}`"),
        }
    }

    fn resolve(&self, reference: &str) -> &'a Value {
        let path = reference.strip_prefix('#').expect("a local $ref");
        self.root
            .pointer(path)
            .unwrap_or_else(|| panic!("`{reference}` points nowhere"))
    }

    /// A bound, or far beyond every integer where the schema sets none, or
    /// the number halfway.
    fn number(&mut self, map: &Map<String, Value>) -> Value {
        let low = map.get("minimum").cloned().unwrap_or(json!(-HUGE));
        let high = map.get("maximum").cloned().unwrap_or(json!(HUGE));
        match self.choose(3) {
            0 => low,
            1 => high,
            _ => {
                let bound = |v: &Value| v.as_i64().map_or(v.as_f64().unwrap_or(0.0), |i| i as f64);
                let (l, h) = (bound(&low), bound(&high));
                json!((l / 2.0 + h / 2.0).clamp(l, h).trunc() as i64)
            }
        }
    }

    /// One of [`STRINGS`] that the schema's length and pattern allow.
    fn string(&mut self, map: &Map<String, Value>) -> Value {
        let mut constraints = map.clone();
        constraints
            .retain(|k, _| matches!(k.as_str(), "type" | "minLength" | "maxLength" | "pattern"));
        let check =
            jsonschema::validator_for(&Value::Object(constraints)).expect("a string schema");
        let fitting: Vec<&str> = STRINGS
            .iter()
            .copied()
            .filter(|s| check.is_valid(&json!(s)))
            .collect();
        assert!(!fitting.is_empty(), "no sample string fits {map:?}");
        json!(fitting[self.choose(fitting.len())])
    }

    fn array(&mut self, map: &Map<String, Value>, depth: usize) -> Value {
        let prefix = map.get("prefixItems").and_then(Value::as_array);
        let min = map.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = map
            .get("maxItems")
            .and_then(Value::as_u64)
            .map_or(3, |m| m as usize)
            .min(min + 3);
        let len = if depth >= MAX_DEPTH {
            min
        } else {
            min + self.choose(max - min + 1)
        };
        let mut items: Vec<Value> = Vec::with_capacity(len);
        for i in 0..len {
            let schema = match prefix.and_then(|p| p.get(i)) {
                Some(item) => item,
                None => map.get("items").unwrap_or(&Value::Bool(true)),
            };
            let item = self.value(schema, depth + 1);
            let unique = map.get("uniqueItems") == Some(&Value::Bool(true));
            if !(unique && items.contains(&item)) {
                items.push(item);
            }
        }
        Value::Array(items)
    }

    /// Required properties always, optional ones by choice; where the
    /// schema lets other properties in, sometimes one the tool never
    /// declared.
    fn object(&mut self, map: &Map<String, Value>, depth: usize) -> Value {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut object = Map::new();
        let empty = Map::new();
        let properties = map
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for (name, schema) in properties {
            let wanted =
                required.contains(&name.as_str()) || (depth < MAX_DEPTH && self.choose(2) == 1);
            if wanted {
                object.insert(name.clone(), self.value(schema, depth + 1));
            }
        }
        let extra = map
            .get("additionalProperties")
            .unwrap_or(&Value::Bool(true));
        let room = map
            .get("maxProperties")
            .and_then(Value::as_u64)
            .is_none_or(|max| (object.len() as u64) < max);
        if extra != &Value::Bool(false) && room && depth < MAX_DEPTH && self.choose(2) == 1 {
            object.insert("an_undeclared_name".into(), self.value(extra, depth + 1));
        }
        Value::Object(object)
    }

    /// Any JSON value, for a schema that allows everything.
    fn anything(&mut self, depth: usize) -> Value {
        let kinds = if depth >= MAX_DEPTH { 4 } else { 6 };
        match self.choose(kinds) {
            0 => Value::Null,
            1 => json!(true),
            2 => json!(-HUGE),
            3 => json!("x"),
            4 => json!([self.anything(depth + 1)]),
            _ => json!({ "k": self.anything(depth + 1) }),
        }
    }
}

/// The keywords that constrain instances, all understood above.
const KEYWORDS: &[&str] = &[
    "$ref",
    "type",
    "const",
    "enum",
    "anyOf",
    "oneOf",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "maxProperties",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
];
