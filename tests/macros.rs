//! `#[read_tool]` and `#[write_tool]` as a user writes them (docs/spec.md,
//! "Tool functions").

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use idem::prelude::*;
use idem::{OnInFlight, RegistryError, ToolKind};
use serde_json::json;

#[derive(Default)]
struct Shop {
    products: Vec<Product>,
    charges: Mutex<Vec<(u64, String)>>,
    declines: AtomicU32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Product {
    sku: String,
    name: String,
}

#[derive(Debug)]
struct ShopError(String);

impl std::fmt::Display for ShopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Search the product catalogue by free text.
#[read_tool]
async fn search(
    /// Words to look for.
    query: String,
    /// At most this many hits (default 10).
    limit: Option<u32>,
    ctx: &Ctx<Shop>,
) -> Result<Vec<Product>, ShopError> {
    let hits = ctx
        .state()
        .products
        .iter()
        .filter(|p| p.name.contains(&query))
        .take(limit.unwrap_or(10) as usize)
        .cloned()
        .collect();
    Ok(hits)
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ChargeArgs {
    /// Amount in minor units (cents).
    amount: u64,
    currency: String,
    customer_id: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Receipt {
    charge: usize,
    key: String,
    attempt: u32,
}

fn declined(e: &ShopError) -> bool {
    e.0.starts_with("declined")
}

/// Charge a customer's card.
#[write_tool(lease = "5s", ttl = "1h", permanent_errors = declined, destructive = false)]
async fn charge_card(#[args] a: ChargeArgs, ctx: &WriteCtx<Shop>) -> Result<Receipt, ShopError> {
    if a.amount == 0 {
        ctx.state().declines.fetch_add(1, Ordering::SeqCst);
        return Err(ShopError("declined: zero amount".into()));
    }
    let mut charges = ctx
        .state()
        .charges
        .lock()
        .map_err(|e| ShopError(e.to_string()))?;
    charges.push((a.amount, ctx.idem_key().to_string()));
    Ok(Receipt {
        charge: charges.len(),
        key: ctx.idem_key().to_string(),
        attempt: ctx.attempt(),
    })
}

/// Send the welcome mail to a user, once ever.
#[write_tool(
    name = "send-welcome",
    scope = "global",
    version = 2,
    key = [user_id],
    on_in_flight = "wait(2s)",
    open_world = true,
    max_hold = "1m"
)]
async fn welcome(user_id: u64, locale: Option<String>, ctx: &WriteCtx) -> Result<String, String> {
    Ok(format!(
        "welcome {user_id} ({}) in run {}",
        locale.unwrap_or_else(|| "en".into()),
        ctx.run_id()
    ))
}

/// Tell the time; needs no arguments and no state.
#[read_tool(description = "Report the server's idea of the time.")]
async fn clock() -> Result<&'static str, std::convert::Infallible> {
    Ok("noon")
}

/// Find things by type.
#[read_tool]
async fn find(
    /// The kind of thing.
    r#type: String,
    /// What to look for; `q` on the wire.
    #[serde(rename = "q")]
    mut query: String,
) -> Result<String, String> {
    query.push('!');
    Ok(format!("{} {query}", r#type))
}

#[tokio::test]
async fn raw_names_serde_renames_and_mut_parameters() {
    let registry = Registry::builder(()).tool(find).build().expect("registry");
    let out = registry
        .call("r", "find", json!({"type": "fruit", "q": "apple"}))
        .await;
    assert_eq!(out.expect("find"), json!("fruit apple!"));
    let schema = &registry.definitions()[0].input_schema;
    assert_eq!(schema["required"], json!(["type", "q"]));
    assert_eq!(
        schema["properties"]["q"]["description"],
        "What to look for; `q` on the wire."
    );
}

fn shop() -> Shop {
    Shop {
        products: vec![
            Product {
                sku: "a1".into(),
                name: "red apple".into(),
            },
            Product {
                sku: "p1".into(),
                name: "green pear".into(),
            },
        ],
        ..Shop::default()
    }
}

fn registry() -> Registry<Shop> {
    Registry::builder(shop())
        .namespace("shop-test")
        .tool(search)
        .tool(charge_card)
        .tool(welcome)
        .tool(clock)
        .build()
        .expect("registry")
}

#[tokio::test]
async fn read_tool_with_flat_parameters() {
    let registry = registry();
    let hits = registry
        .call("r", "search", json!({"query": "apple"}))
        .await
        .expect("search");
    assert_eq!(hits, json!([{"sku": "a1", "name": "red apple"}]));
    let none = registry
        .call("r", "search", json!({"query": "e", "limit": 0}))
        .await
        .expect("search");
    assert_eq!(none, json!([]));
    let bad = registry.call("r", "search", json!({"limit": 3})).await;
    assert!(
        matches!(bad, Err(ToolError::InvalidArgs { message, .. }) if message == "missing field `query`")
    );
}

#[tokio::test]
async fn write_tool_runs_once_and_replays() {
    let registry = registry();
    let args = json!({"amount": 100, "currency": "usd", "customer_id": "cus_1"});
    let first = registry
        .call("run-42", "charge_card", args.clone())
        .await
        .expect("charge");
    let reordered = json!({"customer_id": "cus_1", "currency": "usd", "amount": 100});
    let again = registry
        .call("run-42", "charge_card", reordered)
        .await
        .expect("replay");
    assert_eq!(first, again);
    let charges = registry.state().charges.lock().expect("lock").clone();
    assert_eq!(charges.len(), 1);
    let (key, _) = registry
        .identify("run-42", "charge_card", args)
        .expect("id")
        .expect("write");
    assert_eq!(
        charges[0].1,
        key.as_str(),
        "ctx.idem_key() is the stored key"
    );
    assert_eq!(first["key"], key.as_str());
}

#[tokio::test]
async fn permanent_errors_are_recorded() {
    let registry = registry();
    let args = json!({"amount": 0, "currency": "usd", "customer_id": "cus_1"});
    for _ in 0..3 {
        let err = registry
            .call("r", "charge_card", args.clone())
            .await
            .expect_err("declined");
        assert!(
            matches!(
                err,
                ToolError::Failed {
                    permanent: true,
                    ..
                }
            ),
            "{err:?}"
        );
    }
    assert_eq!(registry.state().declines.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn attribute_settings_reach_the_wrapper() {
    let registry = registry();
    let a = registry
        .call(
            "run-a",
            "send-welcome",
            json!({"user_id": 7, "locale": "nb"}),
        )
        .await
        .expect("first");
    // Global scope: another run replays the same result.
    let b = registry
        .call(
            "run-b",
            "send-welcome",
            json!({"user_id": 7, "locale": "nb"}),
        )
        .await
        .expect("replay");
    assert_eq!(a, json!("welcome 7 (nb) in run run-a"));
    assert_eq!(a, b);
    // Keyed on user_id alone: another locale is a conflict, not a second mail.
    let c = registry
        .call("run-c", "send-welcome", json!({"user_id": 7}))
        .await;
    match c {
        Err(ToolError::KeyConflict { fields, .. }) => assert_eq!(fields, ["locale"]),
        other => panic!("expected a conflict naming `locale`, got {other:?}"),
    }
    let (key, _) = registry
        .identify("any", "send-welcome", json!({"user_id": 7}))
        .expect("id")
        .expect("write");
    let expected = IdemKey::derive(Scope::Global, "send-welcome", 2, &json!({"user_id": 7}))
        .with_namespace("shop-test");
    assert_eq!(key, expected);
}

#[tokio::test]
async fn tools_without_arguments_or_state() {
    let registry = registry();
    assert_eq!(
        registry
            .call("r", "clock", serde_json::Value::Null)
            .await
            .expect("clock"),
        json!("noon")
    );
    // A state-generic tool registers with any state.
    let other = Registry::builder(42u8)
        .tool(clock)
        .tool(welcome)
        .build()
        .expect("registry");
    assert_eq!(
        other.call("r", "clock", json!({})).await.expect("clock"),
        json!("noon")
    );
}

#[test]
fn definitions_describe_every_tool() {
    let registry = registry();
    let defs = registry.definitions();
    let names: Vec<_> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["search", "charge_card", "send-welcome", "clock"]);
    let search = &defs[0];
    assert_eq!(search.kind, ToolKind::Read);
    assert_eq!(
        search.description,
        "Search the product catalogue by free text."
    );
    assert_eq!(
        search.input_schema,
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": {
                    "type": ["integer", "null"],
                    "minimum": 0,
                    "description": "At most this many hits (default 10).",
                    "maximum": u32::MAX
                }
            },
            "required": ["query"]
        })
    );
    let charge = &defs[1];
    assert_eq!(charge.kind, ToolKind::Write);
    assert!(!charge.destructive);
    assert_eq!(
        charge.input_schema["required"],
        json!(["amount", "currency", "customer_id"])
    );
    assert_eq!(
        charge.input_schema["properties"]["amount"]["description"],
        "Amount in minor units (cents)."
    );
    assert_eq!(defs[3].description, "Report the server's idea of the time.");
    assert_eq!(
        defs[3].input_schema,
        json!({"type": "object", "properties": {}, "required": []})
    );
    let _ = OnInFlight::Reject;
}

/// Render a report: its result can be larger than this tool records.
#[write_tool(max_result_bytes = 1024)]
async fn report(lines: usize, ctx: &WriteCtx) -> Result<String, String> {
    let _ = ctx;
    Ok("line\n".repeat(lines))
}

#[tokio::test]
async fn max_result_bytes_on_the_attribute_reaches_the_registry() {
    let registry = Registry::builder(())
        .tool(report)
        .build()
        .expect("registry");
    let small = registry.call("r", "report", json!({"lines": 10})).await;
    assert_eq!(small.expect("small"), json!("line\n".repeat(10)));
    let big = registry
        .call("r", "report", json!({"lines": 1000}))
        .await
        .expect("the first caller gets its result");
    assert_eq!(big.as_str().map(str::len), Some(5000));
    match registry.call("r", "report", json!({"lines": 1000})).await {
        Err(ToolError::Failed { message, .. }) => {
            assert!(message.contains("max_result_bytes (1024)"), "{message}")
        }
        other => panic!("a duplicate gets the too-large error, got {other:?}"),
    }
}

/// An order, as the model sends it.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Order {
    id: u64,
    note: String,
}

/// Ship an order; keyed on its id alone.
#[write_tool(key = [order.id])]
async fn ship(order: Order, carrier: String, ctx: &WriteCtx) -> Result<String, String> {
    let _ = ctx;
    Ok(format!("{} by {carrier}: {}", order.id, order.note))
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Shipment {
    order: Order,
}

/// Ship an order given as one struct, keyed on a field that is not there.
#[write_tool(key = [order.number])]
async fn ship_typo(#[args] s: Shipment, ctx: &WriteCtx) -> Result<u64, String> {
    let _ = ctx;
    Ok(s.order.id)
}

#[tokio::test]
async fn keys_name_fields_of_nested_objects() {
    let registry = Registry::builder(()).tool(ship).build().expect("registry");
    let first = json!({"order": {"id": 1, "note": "fragile"}, "carrier": "post"});
    assert_eq!(
        registry.call("r", "ship", first).await.expect("runs"),
        json!("1 by post: fragile")
    );
    let same_id = json!({"order": {"id": 1, "note": "other"}, "carrier": "post"});
    match registry.call("r", "ship", same_id).await {
        // The order's id is keyed: what differs is named below it.
        Err(ToolError::KeyConflict { fields, .. }) => assert_eq!(fields, ["order.note"]),
        other => panic!("expected a conflict naming `order.note`, got {other:?}"),
    }
    let next = json!({"order": {"id": 2, "note": "other"}, "carrier": "post"});
    assert!(registry.call("r", "ship", next).await.is_ok());

    match Registry::builder(()).tool(ship_typo).build() {
        Err(RegistryError::InvalidSetting { message, .. }) => {
            assert!(message.contains("order.number"), "{message}")
        }
        other => panic!("a key path through a missing field is refused, got {other:?}"),
    }
}

/// Reset a user's password, once ever per user.
#[write_tool(scope = "global", key = [user_id])]
async fn reset_password(user_id: u64, ctx: &WriteCtx<AtomicU32>) -> Result<String, String> {
    ctx.state().fetch_add(1, Ordering::SeqCst);
    Ok(format!(
        "reset {user_id} for {}",
        ctx.tenant().unwrap_or("nobody")
    ))
}

#[tokio::test]
async fn tenants_never_share_a_record() {
    let registry = Registry::builder(AtomicU32::new(0))
        .tool(reset_password)
        .build()
        .expect("registry");
    let args = json!({"user_id": 7});
    let acme = registry
        .call(
            CallContext::run("run-1").tenant("acme"),
            "reset_password",
            args.clone(),
        )
        .await;
    let globex = registry
        .call(
            CallContext::run("run-2").tenant("globex"),
            "reset_password",
            args.clone(),
        )
        .await;
    assert_eq!(acme.expect("acme"), json!("reset 7 for acme"));
    assert_eq!(globex.expect("globex"), json!("reset 7 for globex"));
    // Global scope: the same tenant's duplicate from another run replays.
    let again = registry
        .call(
            CallContext::run("run-3").tenant("acme"),
            "reset_password",
            args.clone(),
        )
        .await;
    assert_eq!(again.expect("replay"), json!("reset 7 for acme"));
    // A tenantless call is a third party, with today's key.
    let none = registry.call("run-4", "reset_password", args.clone()).await;
    assert_eq!(none.expect("tenantless"), json!("reset 7 for nobody"));
    assert_eq!(
        registry.state().load(Ordering::SeqCst),
        3,
        "one run per tenant"
    );
    let (acme_key, _) = registry
        .identify(
            CallContext::run("r").tenant("acme"),
            "reset_password",
            args.clone(),
        )
        .expect("identify")
        .expect("write");
    let (plain_key, _) = registry
        .identify("r", "reset_password", args.clone())
        .expect("identify")
        .expect("write");
    assert_ne!(acme_key, plain_key);
    assert_eq!(
        plain_key,
        IdemKey::derive(Scope::Global, "reset_password", 1, &args),
        "tenantless keys are as they were"
    );

    let strict = Registry::builder(AtomicU32::new(0))
        .tool(reset_password)
        .require_tenant()
        .build()
        .expect("registry");
    let refused = strict.call("r", "reset_password", args.clone()).await;
    assert!(
        matches!(refused, Err(ToolError::TenantRequired)),
        "{refused:?}"
    );
    // An empty tenant is refused as empty, whether or not one is required.
    for registry in [&strict, &registry] {
        let empty = registry
            .call(
                CallContext::run("r").tenant(""),
                "reset_password",
                args.clone(),
            )
            .await;
        match empty {
            Err(e @ ToolError::InvalidTenant) => {
                assert_eq!(e.to_string(), "the tenant must not be empty")
            }
            other => panic!("an empty tenant must be refused as such, got {other:?}"),
        }
    }
    assert!(matches!(
        strict.identify("r", "reset_password", args.clone()),
        Err(ToolError::TenantRequired)
    ));
    assert_eq!(strict.state().load(Ordering::SeqCst), 0, "nothing ran");
    let ok = strict
        .call(CallContext::run("r").tenant("acme"), "reset_password", args)
        .await;
    assert_eq!(ok.expect("with a tenant"), json!("reset 7 for acme"));
}
