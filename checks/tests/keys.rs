//! Key derivation (docs/spec.md, "Keys"): the published vectors byte for byte, and
//! the properties that make a key an operation's identity.

use idem::{IdemKey, Scope, canonical_json};
use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

#[derive(serde::Deserialize)]
struct Vector {
    name: String,
    /// Only in `tenant-key-vectors.json`.
    #[serde(default)]
    tenant: Option<String>,
    scope: String,
    tool: String,
    version: u32,
    args: Value,
    canonical: String,
    key: String,
}

fn scope(s: &str) -> Scope<'_> {
    match s.strip_prefix("run:") {
        Some(run) => Scope::Run(run),
        None if s == "global" => Scope::Global,
        None => panic!("unknown scope {s:?} in the vectors"),
    }
}

#[test]
fn published_vectors_are_reproduced_byte_for_byte() {
    let text = include_str!("../../tests/data/key-vectors.json");
    let vectors: Vec<Vector> = serde_json::from_str(text).expect("key-vectors.json parses");
    assert!(vectors.len() >= 10, "the vector file lost entries");
    for v in &vectors {
        assert_eq!(
            canonical_json(&v.args),
            v.canonical,
            "canonical form of {:?}",
            v.name
        );
        let key = IdemKey::derive(scope(&v.scope), &v.tool, v.version, &v.args);
        assert_eq!(key.as_str(), v.key, "key of {:?}", v.name);
    }
}

/// Any JSON value: every kind of number, strings with escapes and astral
/// characters, nested arrays and objects.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::String),
        "[a-c\u{1}\n\"\\\\\u{e000}\u{1f600}]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-d\u{e000}\u{1f600}]{0,3}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Writes `v` as JSON text with object members in an order picked by `seed`
/// and whitespace sprinkled between tokens.
fn next(seed: &mut u64, n: usize) -> usize {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 33) as usize) % n.max(1)
}

fn shuffled_text(v: &Value, seed: &mut u64, out: &mut String) {
    let ws = [" ", "\n", "\t ", ""];
    out.push_str(ws[next(seed, 4)]);
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(ws[next(seed, 4)]);
                    out.push(',');
                }
                shuffled_text(item, seed, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            for i in (1..members.len()).rev() {
                let j = next(seed, i + 1);
                members.swap(i, j);
            }
            out.push('{');
            for (i, (k, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).expect("a string serializes"));
                out.push_str(" : ");
                shuffled_text(item, seed, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
    out.push_str(ws[next(seed, 4)]);
}

/// Every path to a leaf or container inside `v`.
fn paths(v: &Value, here: &mut Vec<PathStep>, all: &mut Vec<Vec<PathStep>>) {
    all.push(here.clone());
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                here.push(PathStep::Index(i));
                paths(item, here, all);
                here.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                here.push(PathStep::Key(k.clone()));
                paths(item, here, all);
                here.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum PathStep {
    Index(usize),
    Key(String),
}

fn at_mut<'a>(v: &'a mut Value, path: &[PathStep]) -> &'a mut Value {
    path.iter().fold(v, |v, step| match step {
        PathStep::Index(i) => &mut v[*i],
        PathStep::Key(k) => &mut v[k.as_str()],
    })
}

fn key(args: &Value) -> IdemKey {
    IdemKey::derive(Scope::Run("run-1"), "tool", 1, args)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn member_order_and_whitespace_never_change_the_key(v in any_json(), seed in any::<u64>()) {
        let mut seed = seed;
        let mut text = String::new();
        shuffled_text(&v, &mut seed, &mut text);
        let reparsed: Value = serde_json::from_str(&text).expect("shuffled text parses");
        prop_assert_eq!(canonical_json(&reparsed), canonical_json(&v));
        prop_assert_eq!(key(&reparsed), key(&v));
    }

    #[test]
    fn canonical_json_is_valid_json_and_a_fixed_point(v in any_json()) {
        let c = canonical_json(&v);
        let back: Value = serde_json::from_str(&c).expect("canonical JSON parses");
        prop_assert_eq!(canonical_json(&back), c);
    }

    #[test]
    fn any_change_anywhere_changes_the_key(v in any_json(), pick in any::<prop::sample::Index>(), replacement in any_json()) {
        let mut all = Vec::new();
        paths(&v, &mut Vec::new(), &mut all);
        let path = &all[pick.index(all.len())];
        let mut changed = v.clone();
        *at_mut(&mut changed, path) = replacement;
        // Only a change the canonical form can see counts (1 vs 1.0 is none).
        prop_assume!(canonical_json(&changed) != canonical_json(&v));
        prop_assert_ne!(key(&changed), key(&v));
    }

    #[test]
    fn run_tool_scope_and_version_are_part_of_the_key(
        args in any_json(), run in "[a-z0-9:-]{1,12}", other in "[a-z0-9:-]{1,12}",
        tool in "[a-z_]{1,8}", version in 1u32..1000,
    ) {
        let base = IdemKey::derive(Scope::Run(&run), &tool, version, &args);
        prop_assert_ne!(&base, &IdemKey::derive(Scope::Global, &tool, version, &args));
        prop_assert_ne!(&base, &IdemKey::derive(Scope::Run(&run), &format!("{tool}x"), version, &args));
        prop_assert_ne!(&base, &IdemKey::derive(Scope::Run(&run), &tool, version + 1, &args));
        if run != other {
            prop_assert_ne!(&base, &IdemKey::derive(Scope::Run(&other), &tool, version, &args));
        }
    }

    /// Inputs drawn from a tiny alphabet, so that a separator-based encoding
    /// would collide constantly (`run:a` + `b` vs `run:a:b` + ``, ...).
    #[test]
    fn distinct_inputs_never_share_an_encoding(
        a in ("[a:]{0,3}", "[a:]{0,3}", 0u32..3, "[a:]{0,2}"),
        b in ("[a:]{0,3}", "[a:]{0,3}", 0u32..3, "[a:]{0,2}"),
    ) {
        prop_assume!(a != b);
        let ka = IdemKey::derive(Scope::Run(&a.0), &a.1, a.2, &Value::String(a.3.clone()));
        let kb = IdemKey::derive(Scope::Run(&b.0), &b.1, b.2, &Value::String(b.3.clone()));
        prop_assert_ne!(ka, kb);
    }

    #[test]
    fn integers_are_kept_exact(u in any::<u64>(), i in any::<i64>()) {
        prop_assert_eq!(canonical_json(&json!(u)), u.to_string());
        prop_assert_eq!(canonical_json(&json!(i)), i.to_string());
        if u > 0 {
            prop_assert_ne!(key(&json!({ "amount": u })), key(&json!({ "amount": u - 1 })));
        }
    }
}

#[test]
fn extreme_integers_and_float_forms() {
    let max = json!({ "a": u64::MAX, "b": i64::MIN });
    assert_eq!(
        canonical_json(&max),
        r#"{"a":18446744073709551615,"b":-9223372036854775808}"#
    );
    // Above 2^53 JCS would round both to one double; we do not.
    assert_ne!(
        key(&json!(9_007_199_254_740_993u64)),
        key(&json!(9_007_199_254_740_992u64))
    );
    // A float that is an integer is that integer.
    assert_eq!(key(&json!({ "qty": 2.0 })), key(&json!({ "qty": 2 })));
    assert_eq!(canonical_json(&json!(-0.0)), "0");
    let mut m = Map::new();
    m.insert("\u{e000}".into(), json!(1));
    m.insert("\u{1f600}".into(), json!(2));
    assert_eq!(
        canonical_json(&Value::Object(m)),
        "{\"\u{1f600}\":2,\"\u{e000}\":1}"
    );
}

// --- Sets -----------------------------------------------------------------

mod sets {
    //! Arguments whose members have no order (docs/spec.md, "Keys"): the
    //! vectors of `tests/data/set-key-vectors.json`, and duplicates that
    //! send a set in another order replaying instead of running.

    use std::collections::{BTreeSet, HashSet};
    use std::sync::atomic::{AtomicU32, Ordering};

    use idem::prelude::*;
    use serde_json::json;

    use super::{Scope, Vector, scope};

    /// Tag an order.
    #[write_tool]
    async fn tag_order(
        order_id: u64,
        tags: HashSet<String>,
        ctx: &WriteCtx<AtomicU32>,
    ) -> Result<String, String> {
        ctx.state().fetch_add(1, Ordering::SeqCst);
        Ok(format!("order {order_id}: {} tags", tags.len()))
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Line {
        sku: String,
        labels: HashSet<u32>,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Pack {
        lines: Vec<Line>,
    }

    /// Pack an order's lines.
    #[write_tool]
    async fn pack_order(#[args] pack: Pack, ctx: &WriteCtx<AtomicU32>) -> Result<usize, String> {
        ctx.state().fetch_add(1, Ordering::SeqCst);
        Ok(pack.lines.len())
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Audience {
        /// Who gets the mail.
        to: BTreeSet<String>,
        /// The subject.
        subject: String,
    }

    /// Mail an audience, keyed on the subject only.
    #[write_tool(key = [subject])]
    async fn mail(#[args] a: Audience, ctx: &WriteCtx<AtomicU32>) -> Result<usize, String> {
        ctx.state().fetch_add(1, Ordering::SeqCst);
        Ok(a.to.len())
    }

    /// Count what three ordered sets hold.
    #[write_tool]
    async fn count_sets(
        ids: BTreeSet<i64>,
        names: BTreeSet<String>,
        pairs: BTreeSet<(u8, String)>,
        ctx: &WriteCtx<AtomicU32>,
    ) -> Result<usize, String> {
        let _ = ctx;
        Ok(ids.len() + names.len() + pairs.len())
    }

    /// A plan: a set of tags, or steps in order. The four ways serde tags
    /// an enum, each with a set and a sequence under one name: the set's
    /// rule stays in its variant.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    enum Internal {
        Tags { items: BTreeSet<String> },
        Steps { items: Vec<String> },
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    enum External {
        Tags { items: BTreeSet<String> },
        Steps { items: Vec<String> },
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(tag = "t", content = "c")]
    enum Adjacent {
        Tags { items: BTreeSet<String> },
        Steps { items: Vec<String> },
    }

    /// Untagged, serde reads the first variant that fits: steps when
    /// `ordered` is given, else tags.
    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(untagged)]
    enum Untagged {
        Steps { items: Vec<String>, ordered: bool },
        Tags { items: BTreeSet<String> },
    }

    /// Run a plan (internally tagged).
    #[write_tool]
    async fn plan_internal(plan: Internal, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = plan;
        Ok(ctx.state().fetch_add(1, Ordering::SeqCst))
    }

    /// Run a plan (externally tagged).
    #[write_tool]
    async fn plan_external(plan: External, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = plan;
        Ok(ctx.state().fetch_add(1, Ordering::SeqCst))
    }

    /// Run a plan (adjacently tagged).
    #[write_tool]
    async fn plan_adjacent(plan: Adjacent, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = plan;
        Ok(ctx.state().fetch_add(1, Ordering::SeqCst))
    }

    /// Run a plan (untagged).
    #[write_tool]
    async fn plan_untagged(plan: Untagged, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = plan;
        Ok(ctx.state().fetch_add(1, Ordering::SeqCst))
    }

    fn registry() -> Registry<AtomicU32> {
        Registry::builder(AtomicU32::new(0))
            .tool(tag_order)
            .tool(pack_order)
            .tool(mail)
            .tool(count_sets)
            .tool(plan_internal)
            .tool(plan_external)
            .tool(plan_adjacent)
            .tool(plan_untagged)
            .build()
            .expect("a registry")
    }

    #[test]
    fn a_btree_set_keys_as_it_always_did() {
        // The set order is the order a `BTreeSet` serializes in, so a tool
        // that took one before sets were ordered keeps its keys.
        let ids: BTreeSet<i64> = [100, -5, 2, 10, 9, i64::MIN].into();
        let names: BTreeSet<String> = ["b", "a", "B", "é", "ab", ""].map(String::from).into();
        let pairs: BTreeSet<(u8, String)> =
            [(2, "a".into()), (10, "b".into()), (2, "B".into())].into();
        let args = json!({"ids": ids, "names": names, "pairs": pairs});
        let (key, _) = registry()
            .identify("r", "count_sets", args.clone())
            .expect("identify")
            .expect("a write tool");
        let unordered = IdemKey::derive(Scope::Run("r"), "count_sets", 1, &args);
        assert_eq!(key, unordered);
    }

    #[test]
    fn set_vectors_are_reproduced_byte_for_byte() {
        let text = include_str!("../../tests/data/set-key-vectors.json");
        let vectors: Vec<Vector> = serde_json::from_str(text).expect("set-key-vectors.json parses");
        assert_eq!(vectors.len(), 15);
        let registry = registry();
        for v in vectors {
            let run = v.scope.strip_prefix("run:").expect("a run scope");
            let (key, _) = registry
                .identify(run, &v.tool, v.args.clone())
                .expect("identify")
                .expect("a write tool");
            assert_eq!(key.as_str(), v.key, "{}", v.name);
            let canonical: serde_json::Value =
                serde_json::from_str(&v.canonical).expect("canonical JSON");
            assert_eq!(
                IdemKey::derive(scope(&v.scope), &v.tool, v.version, &canonical).as_str(),
                v.key,
                "{}: the key is the canonical form's",
                v.name
            );
        }
    }

    /// Steps in two orders are two operations, in every enum
    /// representation; tags in two orders are one.
    #[tokio::test]
    async fn a_sequence_beside_a_set_keeps_its_order() {
        let registry = registry();
        let plans = [
            (
                "plan_internal",
                json!({"kind": "Steps", "items": ["deploy", "build"]}),
            ),
            (
                "plan_external",
                json!({"Steps": {"items": ["deploy", "build"]}}),
            ),
            (
                "plan_adjacent",
                json!({"t": "Steps", "c": {"items": ["deploy", "build"]}}),
            ),
            (
                "plan_untagged",
                json!({"items": ["deploy", "build"], "ordered": true}),
            ),
        ];
        for (tool, steps) in plans {
            let reversed = serde_json::to_string(&steps)
                .expect("JSON")
                .replace("\"deploy\",\"build\"", "\"build\",\"deploy\"");
            let reversed: serde_json::Value = serde_json::from_str(&reversed).expect("JSON");
            let first = registry
                .call("r", tool, json!({ "plan": steps }))
                .await
                .expect("call");
            let second = registry
                .call("r", tool, json!({ "plan": reversed }))
                .await
                .expect("call");
            assert_ne!(
                first, second,
                "{tool}: the other order ran, as its own operation"
            );
        }
        assert_eq!(registry.state().load(Ordering::SeqCst), 8);
    }

    #[tokio::test]
    async fn a_set_sent_in_any_order_runs_once() {
        let registry = registry();
        let orders = [
            json!({"order_id": 1, "tags": ["a", "b", "c", "d", "e"]}),
            json!({"order_id": 1, "tags": ["e", "d", "c", "b", "a"]}),
            json!({"tags": ["c", "a", "e", "b", "d"], "order_id": 1}),
        ];
        let mut answers = Vec::new();
        for _ in 0..4 {
            for args in &orders {
                answers.push(
                    registry
                        .call("r", "tag_order", args.clone())
                        .await
                        .expect("call"),
                );
            }
        }
        assert_eq!(registry.state().load(Ordering::SeqCst), 1, "ran once");
        assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");

        // Keyed on a subset, the fingerprint covers the set in one order too:
        // a reordered audience is the same payload, not a key conflict.
        let first = json!({"to": ["x@a", "y@b"], "subject": "hi"});
        let reordered = json!({"subject": "hi", "to": ["y@b", "x@a"]});
        registry.call("r", "mail", first).await.expect("mail");
        registry
            .call("r", "mail", reordered)
            .await
            .expect("replayed, not a conflict");
        let other = json!({"subject": "hi", "to": ["z@c"]});
        assert!(matches!(
            registry.call("r", "mail", other).await,
            Err(ToolError::KeyConflict { .. })
        ));
        assert_eq!(registry.state().load(Ordering::SeqCst), 2);
    }
}

// --- Tenants ----------------------------------------------------------------

#[test]
fn tenant_vectors_are_reproduced_byte_for_byte() {
    let text = include_str!("../../tests/data/tenant-key-vectors.json");
    let vectors: Vec<Vector> = serde_json::from_str(text).expect("tenant-key-vectors.json parses");
    assert_eq!(vectors.len(), 4);
    let mut keys = std::collections::HashSet::new();
    for v in &vectors {
        assert_eq!(canonical_json(&v.args), v.canonical, "{}", v.name);
        let tenant = v
            .tenant
            .as_deref()
            .expect("a tenant vector names its tenant");
        let key = IdemKey::derive_for_tenant(tenant, scope(&v.scope), &v.tool, v.version, &v.args);
        assert_eq!(key.as_str(), v.key, "{}", v.name);
        let tenantless = IdemKey::derive(scope(&v.scope), &v.tool, v.version, &v.args);
        assert_ne!(
            key, tenantless,
            "{}: a tenant's key is never a tenantless one",
            v.name
        );
        assert!(keys.insert(key), "{}: no two vectors share a key", v.name);
    }
}

// --- Field roles and explicit keys -----------------------------------------

mod roles {
    //! What counts as the same operation (docs/spec.md, "Field roles" and
    //! "Explicit keys"): the vectors of `tests/data/role-key-vectors.json`
    //! for every combination of roles and an operation key, each checked
    //! against the registry and derived again from what it says is keyed
    //! and checked; and duplicates that differ in an ignored, a checked or
    //! a keyed field replayed, refused or run.

    use std::sync::atomic::{AtomicU32, Ordering};

    use idem::prelude::*;
    use idem::{Fingerprint, RegistryError};
    use serde_json::{Value, json};

    use super::scope;

    /// A charge tool with the roles given, counting its runs.
    macro_rules! charge_tool {
        ($(#[doc = $doc:literal])* $name:ident $(, $($role:tt)*)?) => {
            $(#[doc = $doc])*
            #[write_tool($($($role)*)?)]
            async fn $name(
                customer: String,
                amount: u64,
                reason: String,
                ctx: &WriteCtx<AtomicU32>,
            ) -> Result<u32, String> {
                let _ = (customer, amount, reason);
                Ok(ctx.state().fetch_add(1, Ordering::SeqCst) + 1)
            }
        };
    }

    charge_tool!(
        /// Charge a customer, every field keyed.
        charge_all
    );
    charge_tool!(
        /// Charge a customer; the reason, reworded, is the same charge.
        charge_ignore, ignore = [reason]
    );
    charge_tool!(
        /// Charge a customer; another amount under the same key is a mistake.
        charge_check, check = [amount]
    );
    charge_tool!(
        /// Charge a customer: the amount checked, the reason ignored.
        charge_check_ignore, check = [amount], ignore = [reason]
    );
    charge_tool!(
        /// Charge a customer, once per customer.
        charge_key, key = [customer]
    );

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Order {
        /// The order.
        id: String,
        /// A note for the courier.
        note: String,
    }

    /// Ship an order, keyed on it but for its note; the reason ignored.
    #[write_tool(key = [order], ignore = [order.note, reason])]
    async fn ship(order: Order, reason: String, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = (order, reason);
        Ok(ctx.state().fetch_add(1, Ordering::SeqCst) + 1)
    }

    fn registry() -> Registry<AtomicU32> {
        Registry::builder(AtomicU32::new(0))
            .tool(charge_all)
            .tool(charge_ignore)
            .tool(charge_check)
            .tool(charge_check_ignore)
            .tool(charge_key)
            .tool(ship)
            .build()
            .expect("a registry")
    }

    #[derive(serde::Deserialize, serde::Serialize)]
    struct RoleVector {
        name: String,
        tool: String,
        scope: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tenant: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        operation_key: Option<String>,
        args: Value,
        /// What the key is derived from (`null` for an operation key).
        keyed: Value,
        /// What the fingerprint is derived from (`null` where the key's
        /// digest is the fingerprint: everything left is keyed).
        checked: Value,
        key: String,
        fingerprint: String,
    }

    /// A vector's name, tool, tenant, operation key and arguments.
    type Case = (
        &'static str,
        &'static str,
        Option<&'static str>,
        Option<&'static str>,
        Value,
    );

    /// The cases of the vector file: each role combination, and an
    /// operation key without and with roles and a tenant.
    fn cases() -> Vec<Case> {
        let charge = json!({"customer": "cus_1", "amount": 100, "reason": "order 42"});
        let ship =
            json!({"order": {"id": "o-42", "note": "leave at the door"}, "reason": "restock"});
        vec![
            (
                "every field keyed",
                "charge_all",
                None,
                None,
                charge.clone(),
            ),
            (
                "a field ignored",
                "charge_ignore",
                None,
                None,
                charge.clone(),
            ),
            (
                "a field checked",
                "charge_check",
                None,
                None,
                charge.clone(),
            ),
            (
                "a field checked, one ignored",
                "charge_check_ignore",
                None,
                None,
                charge.clone(),
            ),
            (
                "keyed on one field",
                "charge_key",
                None,
                None,
                charge.clone(),
            ),
            (
                "keyed on an object but a field of it, one field ignored",
                "ship",
                None,
                None,
                ship.clone(),
            ),
            (
                "an operation key",
                "charge_all",
                None,
                Some("msg-7f3a"),
                charge.clone(),
            ),
            (
                "an operation key, a field ignored",
                "charge_ignore",
                None,
                Some("msg-7f3a"),
                charge.clone(),
            ),
            (
                "an operation key for a tenant",
                "charge_all",
                Some("acme"),
                Some("msg-7f3a"),
                charge,
            ),
        ]
    }

    fn context<'a>(tenant: Option<&'a str>, key: Option<&'a str>) -> CallContext<'a> {
        let mut context = CallContext::run("run-42");
        if let Some(tenant) = tenant {
            context = context.tenant(tenant);
        }
        if let Some(key) = key {
            context = context.operation_key(key);
        }
        context
    }

    /// What each case's key and fingerprint are derived from, written out
    /// by hand from the roles (not by the code under test).
    fn derived_from(name: &str, args: &Value) -> (Value, Value) {
        let without = |v: &Value, field: &str| {
            let mut v = v.clone();
            v.as_object_mut().expect("an object").remove(field);
            v
        };
        match name {
            "every field keyed" => (args.clone(), Value::Null),
            "a field ignored" => (without(args, "reason"), Value::Null),
            "a field checked" => (without(args, "amount"), args.clone()),
            "a field checked, one ignored" => {
                let left = without(args, "reason");
                (without(&left, "amount"), left)
            }
            "keyed on one field" => (json!({"customer": args["customer"]}), args.clone()),
            "keyed on an object but a field of it, one field ignored" => (
                json!({"order": {"id": args["order"]["id"]}}),
                json!({"order": {"id": args["order"]["id"]}}),
            ),
            "an operation key" => (Value::Null, args.clone()),
            "an operation key, a field ignored" => (Value::Null, without(args, "reason")),
            "an operation key for a tenant" => (Value::Null, args.clone()),
            other => panic!("no case {other}"),
        }
    }

    #[test]
    fn role_vectors_are_reproduced_byte_for_byte() {
        let registry = registry();
        let mut made = Vec::new();
        for (name, tool, tenant, operation_key, args) in cases() {
            let (key, fingerprint) = registry
                .identify(context(tenant, operation_key), tool, args.clone())
                .expect("identify")
                .expect("a write tool");
            let (keyed, checked) = derived_from(name, &args);
            // Derived again from what is keyed and checked.
            let again = match (operation_key, tenant) {
                (Some(k), _) => IdemKey::derive_explicit(tenant, Scope::Run("run-42"), tool, 1, k),
                (None, Some(t)) => {
                    IdemKey::derive_for_tenant(t, Scope::Run("run-42"), tool, 1, &keyed)
                }
                (None, None) => IdemKey::derive(Scope::Run("run-42"), tool, 1, &keyed),
            };
            assert_eq!(key, again, "{name}: the key of what is keyed");
            let expected = match &checked {
                Value::Null => Fingerprint::from_hex(&key.as_str()[5..]).expect("a digest"),
                checked => Fingerprint::of(checked),
            };
            // The digest; the field tags after it are pinned by the file.
            assert_eq!(
                fingerprint.digest(),
                expected.digest(),
                "{name}: the fingerprint of what is checked"
            );
            made.push(RoleVector {
                name: name.to_owned(),
                tool: tool.to_owned(),
                scope: "run:run-42".to_owned(),
                tenant: tenant.map(str::to_owned),
                operation_key: operation_key.map(str::to_owned),
                args,
                keyed,
                checked,
                key: key.as_str().to_owned(),
                fingerprint: fingerprint.to_hex(),
            });
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/role-key-vectors.json"
        );
        if std::env::var_os("IDEM_BLESS").is_some() {
            let text = serde_json::to_string_pretty(&made).expect("JSON") + "\n";
            std::fs::write(path, text).expect("write the vectors");
        }
        let text = std::fs::read_to_string(path).expect("role-key-vectors.json");
        let published: Vec<RoleVector> = serde_json::from_str(&text).expect("it parses");
        assert_eq!(published.len(), made.len(), "the vector file lost entries");
        for (p, m) in published.iter().zip(&made) {
            assert_eq!(
                (&p.name, &p.key, &p.fingerprint),
                (&m.name, &m.key, &m.fingerprint)
            );
            assert_eq!(scope(&p.scope), Scope::Run("run-42"));
        }
        let keys: std::collections::HashSet<&String> = published.iter().map(|p| &p.key).collect();
        assert_eq!(keys.len(), published.len(), "no two vectors share a key");
    }

    #[tokio::test]
    async fn duplicates_differing_in_an_ignored_field_replay_in_a_checked_one_conflict() {
        let registry = registry();
        let first = json!({"customer": "cus_1", "amount": 100, "reason": "order 42"});
        let reworded =
            json!({"customer": "cus_1", "amount": 100, "reason": "payment for order 42"});
        let other_amount = json!({"customer": "cus_1", "amount": 250, "reason": "order 42"});
        let other_customer = json!({"customer": "cus_2", "amount": 100, "reason": "order 42"});
        let call = |tool: &'static str, args: &Value| registry.call("r", tool, args.clone());

        // Ignored: the rewording is the same charge, replayed.
        assert_eq!(
            call("charge_check_ignore", &first).await.expect("a result"),
            json!(1)
        );
        assert_eq!(
            call("charge_check_ignore", &reworded)
                .await
                .expect("a result"),
            json!(1)
        );
        // Checked: another amount under the same key is refused.
        let conflict = call("charge_check_ignore", &other_amount).await;
        assert!(
            matches!(conflict, Err(ToolError::KeyConflict { .. })),
            "{conflict:?}"
        );
        // Keyed: another customer is another charge.
        assert_eq!(
            call("charge_check_ignore", &other_customer)
                .await
                .expect("a result"),
            json!(2)
        );
        // Without roles, the rewording is a second charge.
        assert_eq!(
            call("charge_all", &first).await.expect("a result"),
            json!(3)
        );
        assert_eq!(
            call("charge_all", &reworded).await.expect("a result"),
            json!(4)
        );
        assert_eq!(registry.state().load(Ordering::SeqCst), 4);

        // A field of a keyed object ignored: a new note is the same shipment.
        let ship = json!({"order": {"id": "o-1", "note": "door"}, "reason": "a"});
        let renoted = json!({"order": {"id": "o-1", "note": "back door"}, "reason": "b"});
        assert_eq!(call("ship", &ship).await.expect("a result"), json!(5));
        assert_eq!(call("ship", &renoted).await.expect("a result"), json!(5));
    }

    #[tokio::test]
    async fn an_operation_key_stands_for_the_arguments_which_are_then_checked() {
        let registry = registry();
        let args = json!({"customer": "cus_1", "amount": 100, "reason": "order 42"});
        let keyed = CallContext::run("r").operation_key("msg-1");
        assert_eq!(
            registry
                .call(keyed, "charge_ignore", args.clone())
                .await
                .expect("a result"),
            json!(1)
        );
        // The same message again, reworded where the tool ignores: replayed.
        let reworded = json!({"customer": "cus_1", "amount": 100, "reason": "for order 42"});
        assert_eq!(
            registry
                .call(keyed, "charge_ignore", reworded)
                .await
                .expect("a result"),
            json!(1)
        );
        // The same message with another amount: refused.
        let other = json!({"customer": "cus_1", "amount": 5, "reason": "order 42"});
        let conflict = registry.call(keyed, "charge_ignore", other).await;
        assert!(
            matches!(conflict, Err(ToolError::KeyConflict { .. })),
            "{conflict:?}"
        );
        // Another message with the same arguments: another operation.
        let next = CallContext::run("r").operation_key("msg-2");
        assert_eq!(
            registry
                .call(next, "charge_ignore", args.clone())
                .await
                .expect("a result"),
            json!(2)
        );
        // The key is not the arguments': without it, the call runs anew.
        assert_eq!(
            registry
                .call("r", "charge_ignore", args.clone())
                .await
                .expect("a result"),
            json!(3)
        );
        // Through a provider helper.
        let call = json!({"id": "call_9", "type": "function",
                          "function": {"name": "charge_ignore", "arguments": args.to_string()}});
        let reply = registry
            .reply(Provider::OpenAiChat, keyed, &call)
            .await
            .expect("a tool call");
        assert_eq!(reply.outcome.expect("a result"), json!(1));
        // An empty operation key is refused, nothing run.
        let empty = CallContext::run("r").operation_key("");
        let refused = registry.call(empty, "charge_ignore", args).await;
        assert!(
            matches!(refused, Err(ToolError::InvalidOperationKey)),
            "{refused:?}"
        );
        assert_eq!(registry.state().load(Ordering::SeqCst), 3);
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Note {
        text: String,
        channel: String,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    struct Refund {
        order_id: String,
        customer_note: String,
    }

    /// Refund an order, the customer's note named by its Rust name, which
    /// the arguments' JSON spells `customerNote`.
    #[write_tool(ignore = [customer_note])]
    async fn refund(#[args] refund: Refund, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = (refund.order_id, refund.customer_note);
        Ok(ctx.state().fetch_add(1, Ordering::SeqCst))
    }

    /// Post a note, its text ignored: an `#[args]` struct's roles are
    /// checked when the registry is built.
    #[write_tool(ignore = [body])]
    async fn post(#[args] note: Note, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = (note, ctx);
        Ok(0)
    }

    /// Post a note, keying on nothing.
    #[write_tool(check = [channel], ignore = [text])]
    async fn post_nothing(#[args] note: Note, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = (note, ctx);
        Ok(0)
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Shipment {
        id: u64,
        note: String,
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Item {
        sku: String,
        note: String,
    }

    /// Ship an optional order: its note ignored through the `Option`.
    #[write_tool(ignore = [order.note])]
    async fn ship_order(
        order: Option<Shipment>,
        items: Vec<Item>,
        ctx: &WriteCtx<AtomicU32>,
    ) -> Result<u32, String> {
        let _ = (order, items);
        Ok(ctx.state().fetch_add(1, Ordering::SeqCst))
    }

    /// A typo through an `Option`.
    #[write_tool(ignore = [order.nte])]
    async fn ship_typo(order: Option<Shipment>, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = (order, ctx);
        Ok(0)
    }

    /// A keyed typo through an `Option`.
    #[write_tool(key = [order.idd])]
    async fn ship_key_typo(
        order: Option<Shipment>,
        ctx: &WriteCtx<AtomicU32>,
    ) -> Result<u32, String> {
        let _ = (order, ctx);
        Ok(0)
    }

    #[derive(Serialize, Deserialize, JsonSchema)]
    struct Cart {
        items: Vec<Item>,
    }

    /// A path into a list's items, in an `#[args]` struct (on a flat
    /// parameter, a compile error: `role_into_a_list`).
    #[write_tool(ignore = [items.note])]
    async fn ship_item_notes(#[args] cart: Cart, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = (cart.items, ctx);
        Ok(0)
    }

    /// A keyed path into a list's items, in an `#[args]` struct.
    #[write_tool(key = [items.sku])]
    async fn ship_by_sku(#[args] cart: Cart, ctx: &WriteCtx<AtomicU32>) -> Result<u32, String> {
        let _ = (cart.items, ctx);
        Ok(0)
    }

    /// Every role path means what it says or is refused when the registry
    /// is built: through an `Option` it reaches the member; a typo, or a
    /// path into a list's items (which would do nothing, or key on
    /// nothing), is refused naming the path.
    #[tokio::test]
    async fn role_paths_through_options_work_and_the_rest_are_refused() {
        let registry = Registry::builder(AtomicU32::new(0))
            .tool(ship_order)
            .build()
            .expect("a path through an Option is accepted");
        let items = json!([{"sku": "a", "note": "x"}]);
        let first = json!({"order": {"id": 1, "note": "leave at door"}, "items": items});
        let renoted = json!({"order": {"id": 1, "note": "ring twice"}, "items": items});
        let a = registry.call("r", "ship_order", first).await.expect("runs");
        let b = registry
            .call("r", "ship_order", renoted)
            .await
            .expect("replays");
        assert_eq!(a, b, "the ignored note made no new operation");
        let none = registry.call("r", "ship_order", json!({"order": null, "items": items}));
        assert_ne!(
            none.await.expect("runs"),
            a,
            "no order is another operation"
        );

        let refusals = [
            (
                Registry::builder(AtomicU32::new(0)).tool(ship_typo).build(),
                "`order` has no member `nte`",
            ),
            (
                Registry::builder(AtomicU32::new(0))
                    .tool(ship_key_typo)
                    .build(),
                "`order` has no member `idd`",
            ),
            (
                Registry::builder(AtomicU32::new(0))
                    .tool(ship_item_notes)
                    .build(),
                "`items` is a list",
            ),
            (
                Registry::builder(AtomicU32::new(0))
                    .tool(ship_by_sku)
                    .build(),
                "`items` is a list",
            ),
        ];
        for (built, expected) in refusals {
            match built {
                Err(RegistryError::InvalidSetting { message, .. }) => {
                    assert!(message.contains(expected), "{message}");
                }
                other => panic!("expected {expected:?}, got {:?}", other.map(|_| ())),
            }
        }
    }

    #[test]
    fn an_args_structs_roles_are_checked_against_its_schema() {
        let unknown = Registry::builder(AtomicU32::new(0)).tool(post).build();
        match unknown {
            Err(RegistryError::InvalidSetting { tool, message }) => {
                assert_eq!(tool, "post");
                assert!(message.contains("`ignore` names `body`"), "{message}");
            }
            other => panic!("expected InvalidSetting, got {:?}", other.map(|_| ())),
        }
        let rust_name = Registry::builder(AtomicU32::new(0)).tool(refund).build();
        match rust_name {
            Err(RegistryError::InvalidSetting { message, .. }) => assert!(
                message.contains("`ignore` names `customer_note`")
                    && message.contains("did you mean `customerNote`?"),
                "{message}"
            ),
            other => panic!("expected InvalidSetting, got {:?}", other.map(|_| ())),
        }
        let nothing = Registry::builder(AtomicU32::new(0))
            .tool(post_nothing)
            .build();
        match nothing {
            Err(RegistryError::InvalidSetting { message, .. }) => {
                assert!(message.contains("keys on nothing"), "{message}");
            }
            other => panic!("expected InvalidSetting, got {:?}", other.map(|_| ())),
        }
    }
}
