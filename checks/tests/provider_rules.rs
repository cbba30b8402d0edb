//! Every rendered schema obeys its provider's documented rules, written
//! down here as checkers, over a corpus of argument types: nested
//! documented structs, unit, data and internally tagged enums, `Option`,
//! `#[serde(default)]`, `Vec`, sets, `u64`, `f64`, constraints; and the types a
//! dialect cannot express (maps, `serde_json::Value`, mixed tuples,
//! recursion), which its renderer refuses naming the tool and the field.
//! And what a rendered schema allows, the tool takes: instances made from
//! each rendering itself (support/instances.rs) are each valid by it
//! (jsonschema) and each taken by the tool; hand-written samples, some
//! malformed, show that every rendering keeps the constraints.

use std::collections::{BTreeMap, BTreeSet};

use idem::prelude::*;
use serde_json::Value;

#[path = "support/instances.rs"]
mod instances;

/// Where to send it.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Address {
    /// Street and number.
    street: String,
    /// Postal code.
    #[schemars(length(min = 3, max = 10), regex(pattern = r"^[0-9A-Z ]+$"))]
    postcode: String,
}

/// How fast.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Speed {
    /// Within a week.
    Standard,
    /// Tomorrow.
    Express,
}

/// Who pays.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Payer {
    /// The customer, by card.
    Card {
        /// The card's last four digits.
        last4: String,
    },
    /// An account, by number.
    Account(u64),
}

/// A discount.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Discount {
    /// A share of the total.
    Percent {
        /// Percent off.
        #[schemars(range(min = 1, max = 100))]
        value: u8,
    },
    /// A fixed amount.
    Amount {
        /// Cents off.
        cents: u64,
    },
}

/// Everything every dialect can express.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Order {
    /// The order.
    order_id: String,
    /// Cents; may exceed 2^53.
    total: u64,
    /// Parcel weight, in kilograms.
    weight: f64,
    /// Where to.
    to: Address,
    /// Where the invoice goes, if elsewhere.
    billing: Option<Address>,
    /// How fast.
    speed: Speed,
    /// Who pays.
    payer: Payer,
    /// Discounts.
    discounts: Vec<Discount>,
    /// Labels, each once.
    labels: BTreeSet<String>,
    /// Copies to print.
    #[serde(default)]
    copies: u32,
}

/// Place an order.
#[write_tool]
async fn place(#[args] order: Order, _ctx: &WriteCtx) -> Result<String, String> {
    Ok(order.order_id)
}

/// A tree of categories.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Category {
    /// Its name.
    name: String,
    /// Its subcategories.
    children: Vec<Category>,
}

/// File under a category tree.
#[read_tool]
async fn file_under(category: Category) -> Result<String, String> {
    Ok(category.name)
}

/// Tag free-form.
#[read_tool]
async fn tag(labels: BTreeMap<String, String>) -> Result<usize, String> {
    Ok(labels.len())
}

/// Store anything.
#[read_tool]
async fn store(value: Value) -> Result<Value, String> {
    Ok(value)
}

/// Mark a spot.
#[read_tool]
async fn mark(at: (String, u32)) -> Result<String, String> {
    Ok(at.0)
}

/// A remark, and nothing else.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Remark {
    /// What is said.
    text: String,
    /// Who says it, if known.
    by: Option<String>,
}

/// Remark on something.
#[read_tool]
async fn remark(remark: Remark) -> Result<String, String> {
    Ok(remark.text)
}

fn registry_of(tools: &[&str]) -> Registry<()> {
    let mut builder = Registry::builder(());
    for tool in tools {
        builder = match *tool {
            "place" => builder.tool(place),
            "file_under" => builder.tool(file_under),
            "tag" => builder.tool(tag),
            "store" => builder.tool(store),
            "mark" => builder.tool(mark),
            "remark" => builder.tool(remark),
            other => panic!("no tool {other}"),
        };
    }
    builder.build().expect("registry")
}

/// Calls `check` on `schema` and every schema inside it, with its path.
fn each_schema(
    schema: &Value,
    at: &str,
    check: &mut dyn FnMut(&serde_json::Map<String, Value>, &str),
) {
    let Value::Object(map) = schema else { return };
    check(map, at);
    for (key, value) in map {
        match (key.as_str(), value) {
            ("properties" | "$defs", Value::Object(children)) => {
                for (name, child) in children {
                    each_schema(child, &format!("{at}.{name}"), check);
                }
            }
            ("items" | "additionalProperties", child @ Value::Object(_)) => {
                each_schema(child, &format!("{at}[]"), check)
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(variants)) => {
                for (i, child) in variants.iter().enumerate() {
                    each_schema(child, &format!("{at}<{i}>"), check);
                }
            }
            _ => {}
        }
    }
}

/// OpenAI structured outputs, "Supported schemas"
/// (<https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>):
/// the root is an object (not `anyOf`); every object lists all its
/// properties as required and sets `additionalProperties: false`; only the
/// supported keywords; `$ref` alone, into `$defs`; at most 10 levels of
/// nesting and 5,000 properties.
fn openai_strict_rules(parameters: &Value, tool: &str) {
    const SUPPORTED: &[&str] = &[
        "type",
        "description",
        "title",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "$ref",
        "$defs",
        "enum",
        "const",
        "pattern",
        "format",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "minItems",
        "maxItems",
    ];
    assert_eq!(
        parameters["type"], "object",
        "{tool}: the root is an object"
    );
    assert!(
        parameters.get("anyOf").is_none(),
        "{tool}: the root is not anyOf"
    );
    let mut properties = 0;
    each_schema(parameters, tool, &mut |schema, at| {
        for key in schema.keys() {
            assert!(
                SUPPORTED.contains(&key.as_str()),
                "{at}: `{key}` is not supported"
            );
        }
        if let Some(reference) = schema.get("$ref") {
            assert_eq!(schema.len(), 1, "{at}: `$ref` with siblings");
            assert!(
                reference
                    .as_str()
                    .is_some_and(|r| r == "#" || r.starts_with("#/$defs/")),
                "{at}: {reference}"
            );
        }
        if let Some(Value::Object(props)) = schema.get("properties") {
            properties += props.len();
            assert_eq!(
                schema.get("additionalProperties"),
                Some(&Value::Bool(false)),
                "{at}"
            );
            let required: BTreeSet<&str> = schema["required"]
                .as_array()
                .expect("required")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let all: BTreeSet<&str> = props.keys().map(String::as_str).collect();
            assert_eq!(required, all, "{at}: every property is required");
        }
        assert!(at.matches('.').count() <= 10, "{at}: deeper than 10 levels");
    });
    assert!(properties <= 5000, "{tool}: more than 5,000 properties");
}

/// Gemini's `parameters`, the `Schema` object
/// (<https://ai.google.dev/api/caching#Schema>): only its fields; `type` one
/// name; no references; an array has `items`; `enum` is for strings.
fn gemini_rules(parameters: &Value, tool: &str) {
    const FIELDS: &[&str] = &[
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    ];
    each_schema(parameters, tool, &mut |schema, at| {
        for key in schema.keys() {
            assert!(
                FIELDS.contains(&key.as_str()),
                "{at}: `{key}` is not a Schema field"
            );
        }
        if let Some(t) = schema.get("type") {
            assert!(t.is_string(), "{at}: type {t} is not one name");
        }
        if schema.get("type") == Some(&Value::from("array")) {
            assert!(schema.contains_key("items"), "{at}: an array without items");
        }
        if schema.contains_key("enum") {
            assert_eq!(
                schema.get("type"),
                Some(&Value::from("string")),
                "{at}: enum of non-strings"
            );
        }
        let declared: BTreeSet<&String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        for name in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = name.as_str().expect("a name");
            assert!(
                declared.iter().any(|d| *d == name),
                "{at}: requires undeclared `{name}`"
            );
        }
    });
}

/// Anthropic's `input_schema` and MCP's `inputSchema` / `outputSchema`: a
/// JSON Schema whose root is `"type": "object"`, `required` naming
/// declared properties.
fn object_root_rules(schema: &Value, at: &str) {
    assert_eq!(schema["type"], "object", "{at}: the root is an object");
    let declared = schema["properties"].as_object().expect("properties");
    for name in schema["required"].as_array().expect("required") {
        let name = name.as_str().expect("a name");
        assert!(
            declared.contains_key(name),
            "{at}: requires undeclared `{name}`"
        );
    }
}

#[test]
fn every_dialect_renders_what_it_can_express_by_its_rules() {
    let registry = registry_of(&["place"]);
    let strict = registry.tools(Provider::OpenAiChatStrict).expect("strict");
    openai_strict_rules(&strict[0]["function"]["parameters"], "place");
    let responses = registry
        .tools(Provider::OpenAiResponsesStrict)
        .expect("strict");
    openai_strict_rules(&responses[0]["parameters"], "place");
    let gemini = registry.tools(Provider::Gemini).expect("gemini");
    gemini_rules(&gemini[0]["functionDeclarations"][0]["parameters"], "place");
    object_root_rules(
        &registry.tools(Provider::Anthropic).expect("renders")[0]["input_schema"],
        "place",
    );
    object_root_rules(
        &registry.tools(Provider::Mcp).expect("renders")[0]["inputSchema"],
        "place",
    );
    object_root_rules(
        &registry.tools(Provider::OpenAiChat).expect("renders")[0]["function"]["parameters"],
        "place",
    );
}

#[test]
fn what_a_dialect_cannot_express_is_refused_naming_tool_and_field() {
    // (tool, field, refused by OpenAI strict, refused by Gemini)
    let cases = [
        ("tag", "labels", true, true),
        ("store", "value", true, true),
        ("mark", "at", true, true),
        // OpenAI strict takes recursion through `$defs`; Gemini inlines.
        ("file_under", "category", false, true),
        // Gemini cannot refuse undeclared members beside optional ones.
        ("remark", "remark", false, true),
    ];
    for (tool, field, strict_refuses, gemini_refuses) in cases {
        let registry = registry_of(&[tool]);
        match registry.tools(Provider::OpenAiChatStrict) {
            Err(e) => {
                assert!(strict_refuses, "{tool}: strict refused: {e}");
                assert_eq!((e.tool.as_str(), e.field.as_str()), (tool, field));
            }
            Ok(strict) => {
                assert!(!strict_refuses, "{tool}: strict took it");
                openai_strict_rules(&strict[0]["function"]["parameters"], tool);
            }
        }
        match registry.tools(Provider::Gemini) {
            Err(e) => {
                assert!(gemini_refuses, "{tool}: Gemini refused: {e}");
                assert_eq!(e.tool, tool);
                assert!(e.field.starts_with(field), "{tool}: {e}");
            }
            Ok(gemini) => {
                assert!(!gemini_refuses, "{tool}: Gemini took it");
                gemini_rules(&gemini[0]["functionDeclarations"][0]["parameters"], tool);
            }
        }
        // The JSON Schema dialects take every type.
        object_root_rules(
            &registry.tools(Provider::Anthropic).expect("renders")[0]["input_schema"],
            tool,
        );
        object_root_rules(
            &registry.tools(Provider::Mcp).expect("renders")[0]["inputSchema"],
            tool,
        );
        let json_schema = registry.tools(Provider::GeminiJsonSchema).expect("renders");
        object_root_rules(
            &json_schema[0]["functionDeclarations"][0]["parametersJsonSchema"],
            tool,
        );
    }
}

/// Gemini's `parameters` as the JSON Schema they mean, to validate against:
/// `nullable` becomes a `null` type or variant; its own keywords go.
fn gemini_as_json_schema(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for key in ["propertyOrdering", "example", "format"] {
                map.remove(key);
            }
            if map.remove("nullable") == Some(Value::Bool(true)) {
                if let Some(Value::Array(variants)) = map.get_mut("anyOf") {
                    variants.push(serde_json::json!({"type": "null"}));
                } else if let Some(t) = map.get_mut("type") {
                    *t = serde_json::json!([t.clone(), "null"]);
                    if let Some(Value::Array(values)) = map.get_mut("enum") {
                        values.push(Value::Null);
                    }
                }
            }
            map.values_mut().for_each(gemini_as_json_schema);
        }
        Value::Array(items) => items.iter_mut().for_each(gemini_as_json_schema),
        _ => {}
    }
}

/// Orders as models send them: every field given (optional ones `null`,
/// as strict mode has them), the optional ones left out, and a few a
/// schema should refuse.
fn sample_orders() -> Vec<Value> {
    use serde_json::json;
    let to = json!({"street": "Main 1", "postcode": "AB 12"});
    vec![
        json!({"order_id": "o-1", "total": 9_007_199_254_740_993_u64, "weight": 1.5, "to": to, "billing": null,
               "speed": "express", "payer": {"card": {"last4": "4242"}},
               "discounts": [{"kind": "percent", "value": 10}, {"kind": "amount", "cents": 500}],
               "labels": ["a", "b"], "copies": null}),
        json!({"order_id": "o-2", "total": 1, "weight": 0, "to": to, "speed": "standard",
               "payer": {"account": 77}, "discounts": [], "labels": []}),
        json!({"order_id": "o-3", "total": 5, "weight": 2.25, "to": to, "billing": to, "speed": "standard",
               "payer": {"account": 1}, "discounts": [], "labels": ["x"], "copies": 3}),
        // Refused by every rendering: a negative total, an unknown speed,
        // a percent above 100, a postcode too short.
        json!({"order_id": "o-4", "weight": 1, "total": -1, "to": to, "speed": "standard",
               "payer": {"account": 1}, "discounts": [], "labels": []}),
        json!({"order_id": "o-5", "weight": 1, "total": 1, "to": to, "speed": "warp",
               "payer": {"account": 1}, "discounts": [], "labels": []}),
        json!({"order_id": "o-6", "weight": 1, "total": 1, "to": to, "speed": "standard",
               "payer": {"account": 1}, "discounts": [{"kind": "percent", "value": 101}], "labels": []}),
        json!({"order_id": "o-7", "weight": 1, "total": 1, "to": {"street": "x", "postcode": "A"},
               "speed": "standard", "payer": {"account": 1}, "discounts": [], "labels": []}),
    ]
}

/// Each rendering of the registry's one tool's parameters as a JSON
/// Schema, by name; `None` where the dialect refuses the tool.
fn renderings(registry: &Registry<()>) -> Vec<(&'static str, Option<Value>)> {
    let gemini = registry.tools(Provider::Gemini).ok().map(|tools| {
        let mut parameters = tools[0]["functionDeclarations"][0]["parameters"].clone();
        gemini_as_json_schema(&mut parameters);
        parameters
    });
    vec![
        ("openai", Some(registry.tools(Provider::OpenAiChat).expect("renders")[0]["function"]["parameters"].clone())),
        (
            "openai strict",
            registry
                .tools(Provider::OpenAiChatStrict)
                .ok()
                .map(|tools| tools[0]["function"]["parameters"].clone()),
        ),
        (
            "openai responses strict",
            registry
                .tools(Provider::OpenAiResponsesStrict)
                .ok()
                .map(|tools| tools[0]["parameters"].clone()),
        ),
        ("anthropic", Some(registry.tools(Provider::Anthropic).expect("renders")[0]["input_schema"].clone())),
        ("mcp", Some(registry.tools(Provider::Mcp).expect("renders")[0]["inputSchema"].clone())),
        ("gemini", gemini),
        (
            "gemini json schema",
            Some(
                registry.tools(Provider::GeminiJsonSchema).expect("renders")[0]["functionDeclarations"][0]
                    ["parametersJsonSchema"]
                    .clone(),
            ),
        ),
    ]
}

#[test]
fn every_instance_a_rendered_schema_allows_is_taken_by_the_tool() {
    let registry = registry_of(&["place"]);
    for (name, schema) in renderings(&registry) {
        let schema = schema.unwrap_or_else(|| panic!("{name} refuses `place`"));
        let validator = jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("{name}: not a valid JSON Schema: {e}"));
        let mut allowed = Vec::new();
        for order in sample_orders() {
            if validator.is_valid(&order) {
                let taken = registry.identify("r", "place", order.clone());
                assert!(
                    taken.is_ok(),
                    "{name} allows {order}, the tool refuses it: {taken:?}"
                );
                allowed.push(order["order_id"].clone());
            }
        }
        // Not vacuous: the well-formed orders pass, the malformed do not.
        // Strict mode requires every field (o-2 leaves some out) and lets
        // a defaulted one be `null` (o-1); the others let fields be left
        // out, but `copies` (a defaulted `u32`) is no `Option`, so not
        // `null`.
        let expected: &[&str] = match name {
            "openai strict" | "openai responses strict" => &["o-1", "o-3"],
            _ => &["o-2", "o-3"],
        };
        assert_eq!(allowed, expected, "{name}");
    }
}

/// Instances made from each rendered schema itself (support/instances.rs:
/// every branch, optional properties there and not, `null` where allowed,
/// numbers at the edges of what the schema allows), over the whole corpus:
/// each is valid by its schema, and each is taken by the tool.
#[tokio::test]
async fn instances_made_from_every_rendered_schema_are_taken_by_the_tool() {
    const SEEDS: u64 = 300;
    for tool in ["place", "file_under", "tag", "store", "mark", "remark"] {
        let registry = registry_of(&[tool]);
        for (name, schema) in renderings(&registry) {
            let Some(schema) = schema else { continue };
            let validator = jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("{name}/{tool}: not a valid JSON Schema: {e}"));
            let mut distinct = BTreeSet::new();
            for seed in 0..SEEDS {
                let args = instances::instance(&schema, seed);
                assert!(
                    validator.is_valid(&args),
                    "{name}/{tool}: the generator made {args}, which its schema refuses"
                );
                let taken = registry.call(&format!("r{seed}"), tool, args.clone()).await;
                assert!(
                    taken.is_ok(),
                    "{name}/{tool} allows {args}, the tool refuses it: {taken:?}"
                );
                distinct.insert(args.to_string());
            }
            // Not vacuous: the seeds walk many shapes.
            assert!(
                distinct.len() > 20,
                "{name}/{tool}: {} shapes",
                distinct.len()
            );
        }
    }
}
