//! The four tool formats, rendered from one registry and compared with the
//! golden files in `tests/golden/`. After a deliberate change, rewrite them
//! with `IDEM_BLESS=1 cargo test --test render` and read the diff.

mod support;

use std::collections::BTreeMap;

use idem::prelude::*;
use serde_json::{Value, json};

/// Search the catalogue.
#[read_tool]
async fn search(
    /// Words to look for.
    query: String,
    /// At most this many hits.
    limit: Option<u32>,
) -> Result<Vec<String>, String> {
    Ok(vec![query; limit.unwrap_or(1) as usize])
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ShipArgs {
    /// The order to ship.
    order_id: String,
    /// Where to.
    to: Address,
    /// What, in which quantities.
    lines: Vec<Line>,
    /// How fast.
    speed: Speed,
    /// Who pays for it.
    payer: Payer,
    /// A note for the courier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    /// Where to send the invoice, if not `to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    billing: Option<Address>,
}

/// A postal address.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Address {
    city: String,
    zip: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Line {
    sku: String,
    qty: u32,
}

/// Delivery speed.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Speed {
    Standard,
    Express,
}

/// Who pays.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Payer {
    /// The customer.
    Customer { customer_id: String },
    /// The shop, under a budget code.
    Shop { budget: String },
}

/// A shipment booked (its schema is MCP's `outputSchema`).
#[derive(Serialize, Deserialize, JsonSchema)]
struct Shipment {
    /// The courier's tracking number.
    tracking: String,
    /// Days until delivery.
    eta_days: u32,
}

/// Ship an order.
#[write_tool(destructive = false, open_world = true)]
async fn ship(#[args] a: ShipArgs, ctx: &WriteCtx) -> Result<Shipment, String> {
    Ok(Shipment {
        tracking: format!("{} {}", a.order_id, ctx.idem_key()),
        eta_days: 2,
    })
}

/// Tag a customer.
#[write_tool(open_world = false)]
async fn tag(
    /// The customer.
    customer_id: String,
    /// Free-form labels.
    labels: BTreeMap<String, String>,
    ctx: &WriteCtx,
) -> Result<usize, String> {
    let _ = (customer_id, ctx);
    Ok(labels.len())
}

fn registry(with_map: bool) -> Registry<()> {
    let builder = Registry::builder(()).tool(search).tool(ship);
    let builder = if with_map { builder.tool(tag) } else { builder };
    builder.build().expect("registry")
}

#[test]
fn openai() {
    support::golden(
        "openai",
        &registry(true).tools(Provider::OpenAiChat).expect("renders"),
    );
}

#[test]
fn openai_strict() {
    support::golden(
        "openai_strict",
        &registry(false)
            .tools(Provider::OpenAiChatStrict)
            .expect("strict"),
    );
}

#[test]
fn anthropic() {
    support::golden(
        "anthropic",
        &registry(true).tools(Provider::Anthropic).expect("renders"),
    );
}

#[test]
fn gemini() {
    support::golden(
        "gemini",
        &registry(false).tools(Provider::Gemini).expect("gemini"),
    );
}

#[test]
fn mcp() {
    support::golden(
        "mcp",
        &registry(true).tools(Provider::Mcp).expect("renders"),
    );
}

#[test]
fn strict_mode_refuses_free_form_maps_naming_the_field() {
    let err = registry(true)
        .tools(Provider::OpenAiChatStrict)
        .expect_err("a map cannot be strict");
    assert_eq!(err.tool, "tag");
    assert_eq!(err.field, "labels");
    assert!(err.to_string().contains("free-form keys"), "{err}");
}

/// Structural checks the golden files could hide.
#[test]
fn strict_schemas_are_closed_and_fully_required() {
    fn walk(schema: &Value, at: &str) {
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            assert_eq!(schema["additionalProperties"], json!(false), "{at}");
            let required: Vec<&str> = schema["required"]
                .as_array()
                .expect("required")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            for (name, prop) in props {
                assert!(
                    required.contains(&name.as_str()),
                    "{at}.{name} not required"
                );
                walk(prop, &format!("{at}.{name}"));
            }
        }
        for key in ["items", "anyOf", "$defs"] {
            match schema.get(key) {
                Some(Value::Array(vs)) => vs.iter().for_each(|v| walk(v, at)),
                Some(Value::Object(m)) if key == "$defs" => m.values().for_each(|v| walk(v, at)),
                Some(v @ Value::Object(_)) => walk(v, at),
                _ => {}
            }
        }
        assert!(schema.get("oneOf").is_none(), "{at}: oneOf left");
        // OpenAI: `$ref` takes no sibling keywords.
        if schema.get("$ref").is_some() {
            assert_eq!(
                schema.as_object().map(|m| m.len()),
                Some(1),
                "{at}: {schema}"
            );
        }
        for outside in [
            "uniqueItems",
            "minLength",
            "maxLength",
            "default",
            "prefixItems",
        ] {
            assert!(schema.get(outside).is_none(), "{at}: {outside} left");
        }
    }
    let tools = registry(false)
        .tools(Provider::OpenAiChatStrict)
        .expect("strict");
    for tool in tools.as_array().expect("array") {
        walk(
            &tool["function"]["parameters"],
            tool["function"]["name"].as_str().expect("name"),
        );
    }
    // An optional field is required but nullable.
    let ship = &tools[1]["function"]["parameters"]["properties"];
    assert_eq!(ship["note"]["type"], json!(["string", "null"]));
}

#[test]
fn gemini_has_no_refs_or_json_schema_only_keywords() {
    fn walk(v: &Value) {
        match v {
            Value::Object(m) => {
                for banned in [
                    "$ref",
                    "$defs",
                    "additionalProperties",
                    "oneOf",
                    "$schema",
                    "const",
                ] {
                    assert!(!m.contains_key(banned), "{banned} in {v}");
                }
                if let Some(t) = m.get("type") {
                    assert!(t.is_string(), "type arrays are not Gemini: {v}");
                }
                m.values().for_each(walk);
            }
            Value::Array(a) => a.iter().for_each(walk),
            _ => {}
        }
    }
    walk(&registry(false).tools(Provider::Gemini).expect("gemini"));
}

#[test]
fn gemini_refuses_what_its_subset_cannot_express_and_takes_it_as_json_schema() {
    let err = registry(true)
        .tools(Provider::Gemini)
        .expect_err("a free-form map");
    assert_eq!((err.tool.as_str(), err.field.as_str()), ("tag", "labels"));
    assert!(err.reason.contains("map"), "{err}");
    assert!(
        err.to_string().contains("in Gemini's schema subset"),
        "{err}"
    );
    // A tuple of one element type is a sized array; of several, refused.
    let pins = Registry::builder(()).tool(pin).build().expect("registry");
    let tools = pins.tools(Provider::Gemini).expect("a pair of floats");
    assert_eq!(
        tools[0]["functionDeclarations"][0]["parameters"]["properties"]["at"],
        json!({"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2})
    );
    let marks = Registry::builder(()).tool(mark).build().expect("registry");
    let err = marks
        .tools(Provider::Gemini)
        .expect_err("a name and a number");
    assert_eq!((err.tool.as_str(), err.field.as_str()), ("mark", "at"));
    assert!(err.reason.contains("tuple"), "{err}");
    // A tool without arguments declares no parameters.
    let pings = Registry::builder(()).tool(ping).build().expect("registry");
    let tools = pings.tools(Provider::Gemini).expect("no arguments");
    assert_eq!(
        tools[0]["functionDeclarations"][0],
        json!({"name": "ping", "description": "Check the service."})
    );
    // Everything fits as JSON Schema.
    let all = registry(true);
    let tools = all.tools(Provider::GeminiJsonSchema).expect("renders");
    let declarations = tools[0]["functionDeclarations"].as_array().expect("array");
    for (declaration, def) in declarations.iter().zip(all.definitions()) {
        assert_eq!(declaration["parametersJsonSchema"], def.input_schema);
        assert!(declaration.get("parameters").is_none());
    }
}

/// Numbers of every width.
#[read_tool]
async fn measure(
    small: u8,
    signed: i16,
    count: u32,
    big: u64,
    delta: i64,
    ratio: f64,
    share: f32,
) -> Result<f64, String> {
    Ok(f64::from(small)
        + f64::from(signed)
        + f64::from(count)
        + big as f64
        + delta as f64
        + ratio
        + f64::from(share))
}

/// Every `format` keyword in `schema`, anywhere.
fn formats(schema: &Value, found: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(format)) = map.get("format") {
                found.push(format.clone());
            }
            map.values().for_each(|v| formats(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| formats(v, found)),
        _ => {}
    }
}

#[test]
fn rust_number_formats_never_reach_a_schema_and_ranges_stay() {
    let registry = Registry::builder(())
        .tool(measure)
        .build()
        .expect("registry");
    let rendered = [
        registry.tools(Provider::OpenAiChat).expect("renders"),
        registry.tools(Provider::OpenAiChatStrict).expect("strict"),
        registry.tools(Provider::Anthropic).expect("renders"),
        registry.tools(Provider::Gemini).expect("gemini"),
        registry.tools(Provider::Mcp).expect("renders"),
    ];
    for schema in &rendered {
        let mut found = Vec::new();
        formats(schema, &mut found);
        assert!(found.is_empty(), "formats {found:?} in {schema:#}");
    }
    let mcp = registry.tools(Provider::Mcp).expect("renders");
    let properties = &mcp[0]["inputSchema"]["properties"];
    assert_eq!(
        (
            &properties["small"]["minimum"],
            &properties["small"]["maximum"]
        ),
        (&json!(0), &json!(255))
    );
    assert_eq!(
        (
            &properties["signed"]["minimum"],
            &properties["signed"]["maximum"]
        ),
        (&json!(-32768), &json!(32767))
    );
    assert_eq!(properties["big"]["minimum"], json!(0));
    assert!(properties["ratio"].get("maximum").is_none());
}

#[test]
fn openai_responses_tools_are_the_chat_tools_flattened() {
    let registry = registry(false);
    let pairs = [
        (
            registry.tools(Provider::OpenAiChat).expect("renders"),
            registry.tools(Provider::OpenAiResponses).expect("renders"),
            false,
        ),
        (
            registry.tools(Provider::OpenAiChatStrict).expect("strict"),
            registry
                .tools(Provider::OpenAiResponsesStrict)
                .expect("strict"),
            true,
        ),
    ];
    for (chat, responses, strict) in pairs {
        let chat = chat.as_array().expect("array").clone();
        let responses = responses.as_array().expect("array").clone();
        assert_eq!(chat.len(), responses.len());
        for (chat, responses) in chat.iter().zip(&responses) {
            let function = &chat["function"];
            assert_eq!(
                responses,
                &json!({
                    "type": "function",
                    "name": function["name"],
                    "description": function["description"],
                    "parameters": function["parameters"],
                    "strict": strict,
                })
            );
        }
    }
    // What strict mode cannot express is refused here too.
    let err = self::registry(true)
        .tools(Provider::OpenAiResponsesStrict)
        .expect_err("a free-form map");
    assert_eq!(err.tool, "tag");
}

/// Tags, a tuple and a bounded string: what strict mode drops or refuses.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Labels {
    /// Distinct tags.
    tags: std::collections::BTreeSet<String>,
    /// A short code.
    #[schemars(length(min = 2, max = 8))]
    code: String,
}

/// Label an item.
#[read_tool]
async fn label(#[args] a: Labels) -> Result<usize, String> {
    Ok(a.tags.len() + a.code.len())
}

/// Place a pin.
#[read_tool]
async fn pin(at: (f64, f64)) -> Result<f64, String> {
    Ok(at.0 + at.1)
}

#[test]
fn strict_mode_drops_keywords_outside_its_subset_and_refuses_tuples() {
    let labels = Registry::builder(()).tool(label).build().expect("registry");
    let strict = labels.tools(Provider::OpenAiChatStrict).expect("strict");
    let props = &strict[0]["function"]["parameters"]["properties"];
    assert_eq!(
        props["tags"],
        json!({"type": "array", "items": {"type": "string"}, "description": "Distinct tags."})
    );
    assert_eq!(
        props["code"],
        json!({"type": "string", "description": "A short code."})
    );
    let pins = Registry::builder(()).tool(pin).build().expect("registry");
    let err = pins.tools(Provider::OpenAiChatStrict).expect_err("a tuple");
    assert_eq!((err.tool.as_str(), err.field.as_str()), ("pin", "at"));
    assert!(err.reason.contains("tuple"), "{err}");
    assert!(err.to_string().contains("in OpenAI strict mode"), "{err}");
}

/// Mark a spot.
#[read_tool]
async fn mark(at: (String, u32)) -> Result<String, String> {
    Ok(format!("{} {}", at.0, at.1))
}

/// Check the service.
#[read_tool]
async fn ping() -> Result<String, String> {
    Ok("pong".to_owned())
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Page {
    /// Words to look for.
    query: String,
    /// Hits per page.
    #[serde(default = "twenty")]
    per_page: u32,
    /// Sort order, if any.
    #[serde(default)]
    sort: Option<String>,
}

fn twenty() -> u32 {
    20
}

/// Search, a page at a time.
#[write_tool]
async fn page(#[args] a: Page, _ctx: &WriteCtx) -> Result<String, String> {
    Ok(format!("{} {} {:?}", a.query, a.per_page, a.sort))
}

#[tokio::test]
async fn strict_nulls_for_defaulted_fields_are_read_as_absent() {
    let registry = Registry::builder(()).tool(page).build().expect("registry");
    // Strict mode invites `null` for the defaulted field...
    let strict = registry.tools(Provider::OpenAiChatStrict).expect("strict");
    let per_page = &strict[0]["function"]["parameters"]["properties"]["per_page"];
    assert_eq!(per_page["type"], json!(["integer", "null"]));
    // ...and a null is read as the field left out: the default, and the
    // same operation.
    let with_nulls = json!({"query": "socks", "per_page": null, "sort": null});
    let without = json!({"query": "socks"});
    let out = registry
        .call("r", "page", with_nulls.clone())
        .await
        .expect("null read as absent");
    assert_eq!(out, json!("socks 20 None"));
    assert_eq!(
        registry
            .identify("r", "page", with_nulls)
            .expect("identify"),
        registry.identify("r", "page", without).expect("identify")
    );
    // A required field sent as null is still refused.
    let err = registry
        .call("r", "page", json!({"query": null}))
        .await
        .expect_err("query is required");
    assert!(err.to_string().contains("query"), "{err}");
}
