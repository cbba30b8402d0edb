//! What the gateway serves, made from the upstream's tools and the
//! configuration: which tools are reads (passed through) and which are
//! writes (a registry of [`ProxiedWrite`]s over the store), and the tool
//! list its clients see, each write carrying the contract the gateway
//! enforces for it (docs/gateway.md, "What clients see").

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use idem::{IdemStore, Registry, ScopeKind, ToolInfo};
use rmcp::model::Tool;
use serde_json::{Map, Value, json};

use super::config::{Config, ErrorResults, Kind, ToolConfig};
use super::proxy::ProxiedWrite;
use super::upstream::Upstream;

/// How long a write's result is replayed unless its `ttl` says otherwise
/// (the registry's default, set on it explicitly so that the contract
/// states it).
const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// The `_meta` member of a listed write tool that states its contract.
pub(crate) const CONTRACT_META: &str = "idem/contract";

/// The gateway's view of the upstream.
pub(crate) struct Catalog {
    /// The write tools, over the store.
    pub(crate) registry: Registry<Arc<Upstream>>,
    /// The tools as clients see them.
    pub(crate) tools: Vec<Tool>,
    /// The tools as the upstream listed them.
    pub(crate) upstream_tools: Vec<Tool>,
    /// The names of the write tools.
    pub(crate) writes: HashSet<String>,
    /// The names of the write tools whose key holds the run.
    pub(crate) run_scoped: HashSet<String>,
    /// The names of the read tools.
    pub(crate) reads: HashSet<String>,
}

/// What [`Catalog::build`] is given beside the tools.
pub(crate) struct Settings {
    pub(crate) config: Config,
    pub(crate) store: Arc<dyn IdemStore>,
    pub(crate) namespace: Option<String>,
    /// How long the upstream has to answer a call, unless a tool says.
    pub(crate) timeout: Duration,
}

impl Catalog {
    /// The catalog of `tools`, or why one of them cannot be served (a
    /// write tool whose name or settings the registry refuses).
    pub(crate) fn build(
        tools: &[Tool],
        settings: &Settings,
        upstream: Arc<Upstream>,
    ) -> Result<Catalog, String> {
        let mut builder = Registry::builder(upstream)
            .store(settings.store.clone())
            .default_ttl(DEFAULT_TTL);
        if let Some(namespace) = &settings.namespace {
            builder = builder.namespace(namespace.clone());
        }
        let (mut served, mut writes, mut reads) = (Vec::new(), HashSet::new(), HashSet::new());
        let mut run_scoped = HashSet::new();
        for tool in tools {
            let name = tool.name.to_string();
            let config = settings.config.tool(&name);
            let hints = Hints::of(tool);
            if config.kind.unwrap_or(hints.kind) == Kind::Read {
                reads.insert(name);
                served.push(tool.clone());
                continue;
            }
            builder = builder.tool(proxied(tool, &config, &hints, settings.timeout));
            served.push(listed(tool, &config)?);
            if config.scope.unwrap_or(ScopeKind::Run) == ScopeKind::Run {
                run_scoped.insert(name.clone());
            }
            writes.insert(name);
        }
        for name in settings.config.tools.keys() {
            if !writes.contains(name) && !reads.contains(name) {
                tracing::warn!(tool = %name, "the configuration names a tool the upstream does not list");
            }
        }
        let registry = builder
            .build()
            .map_err(|e| format!("cannot serve the upstream's tools: {e}"))?;
        Ok(Catalog {
            registry,
            tools: served,
            upstream_tools: tools.to_vec(),
            writes,
            run_scoped,
            reads,
        })
    }
}

/// What the upstream's annotations say of a tool.
struct Hints {
    kind: Kind,
    destructive: bool,
    open_world: bool,
}

impl Hints {
    /// A tool is a read only if the upstream says it is read-only;
    /// anything else is a write, the safe default. MCP's defaults for the
    /// other hints: destructive and open-world.
    fn of(tool: &Tool) -> Hints {
        let annotations = tool.annotations.as_ref();
        let hint = |get: fn(&rmcp::model::ToolAnnotations) -> Option<bool>, default| {
            annotations.and_then(get).unwrap_or(default)
        };
        Hints {
            kind: match hint(|a| a.read_only_hint, false) {
                true => Kind::Read,
                false => Kind::Write,
            },
            destructive: hint(|a| a.destructive_hint, true),
            open_world: hint(|a| a.open_world_hint, true),
        }
    }
}

/// The write tool that proxies `tool`.
fn proxied(tool: &Tool, config: &ToolConfig, hints: &Hints, timeout: Duration) -> ProxiedWrite {
    let description = tool.description.as_deref().unwrap_or(&tool.name);
    let mut info = ToolInfo::new(tool.name.to_string(), description.to_owned())
        .with_input_schema(Value::Object((*tool.input_schema).clone()));
    if let Some(output) = &tool.output_schema {
        info = info.with_output_schema(Some(Value::Object((**output).clone())));
    }
    ProxiedWrite {
        info,
        options: config.write_options(hints.destructive, hints.open_world),
        timeout: config.timeout.unwrap_or(timeout),
        error_results: config.error_results.unwrap_or_default(),
    }
}

/// `tool` as the gateway lists it: `idempotentHint` as the gateway
/// enforces it (a repeat is replayed whatever run it comes in only for a
/// `global` tool; a run-scoped tool's only within its run), and its
/// contract under [`CONTRACT_META`] in `_meta`.
fn listed(tool: &Tool, config: &ToolConfig) -> Result<Tool, String> {
    let scope = config.scope.unwrap_or(ScopeKind::Run);
    let mut value = serde_json::to_value(tool).map_err(|e| e.to_string())?;
    let annotations = value
        .as_object_mut()
        .map(|t| t.entry("annotations").or_insert_with(|| json!({})));
    if let Some(Value::Object(annotations)) = annotations {
        annotations.insert("readOnlyHint".into(), false.into());
        annotations.insert("idempotentHint".into(), (scope == ScopeKind::Global).into());
    }
    let properties: Vec<&String> = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    let contract = contract(config, scope, &properties);
    if let Some(tool) = value.as_object_mut() {
        let meta = tool.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(CONTRACT_META.into(), contract);
        }
    }
    serde_json::from_value(value).map_err(|e| format!("`{}`: {e}", tool.name))
}

/// A write tool's contract, as a client or a model reads it: what a
/// repeat is (keyed, checked and ignored fields, scope), how long it is
/// replayed, and what happens when an outcome is unknown.
fn contract(config: &ToolConfig, scope: ScopeKind, properties: &[&String]) -> Value {
    let given = |list: Option<&'static [&'static str]>| list.unwrap_or_default().to_vec();
    let ignored = given(config.ignore);
    let (keyed, checked): (Vec<&str>, Vec<&str>) = match (config.key, config.check) {
        (Some(key), _) => {
            let others = properties
                .iter()
                .map(|p| p.as_str())
                .filter(|p| !key.contains(p) && !ignored.contains(p));
            (key.to_vec(), others.collect())
        }
        (None, check) => {
            let check = given(check);
            let others = properties
                .iter()
                .map(|p| p.as_str())
                .filter(|p| !check.contains(p) && !ignored.contains(p));
            (others.collect(), check)
        }
    };
    let mut contract = Map::new();
    contract.insert("recorded".into(), true.into());
    contract.insert("scope".into(), scope_name(scope).into());
    contract.insert("keyed".into(), json!(keyed));
    contract.insert("checked".into(), json!(checked));
    contract.insert("ignored".into(), json!(ignored));
    let ttl = config.ttl.unwrap_or(DEFAULT_TTL);
    contract.insert("replay_window_secs".into(), ttl.as_secs().into());
    let error_results = match config.error_results.unwrap_or_default() {
        ErrorResults::Release => "release",
        ErrorResults::Record => "record",
    };
    contract.insert("error_results".into(), error_results.into());
    let uncertain = match config.on_uncertain.unwrap_or_default() {
        idem::OnUncertain::Refuse => "refuse",
        _ => "rerun",
    };
    contract.insert("on_uncertain".into(), uncertain.into());
    Value::Object(contract)
}

fn scope_name(scope: ScopeKind) -> &'static str {
    match scope {
        ScopeKind::Global => "global",
        _ => "run",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(annotations: Value) -> Tool {
        serde_json::from_value(json!({
            "name": "charge",
            "inputSchema": {
                "type": "object",
                "properties": {"order_id": {}, "amount": {}, "note": {}},
            },
            "annotations": annotations,
        }))
        .expect("a tool")
    }

    #[test]
    fn only_a_read_only_hint_makes_a_read_and_the_contract_states_the_roles() {
        assert_eq!(Hints::of(&tool(json!({}))).kind, Kind::Write);
        let hint = json!({"readOnlyHint": true});
        assert_eq!(Hints::of(&tool(hint)).kind, Kind::Read);
        let modest = Hints::of(&tool(json!({"destructiveHint": false})));
        assert!(!modest.destructive && modest.open_world);

        let config: Config = toml::from_str(
            "[tools.charge]\nscope = \"global\"\nkey = [\"order_id\"]\nignore = [\"note\"]\nttl = \"1h\"\n",
        )
        .expect("config");
        let listed = listed(&tool(json!({"title": "Charge"})), &config.tool("charge"));
        let listed = serde_json::to_value(listed.expect("listed")).expect("json");
        assert_eq!(
            listed["annotations"],
            json!({"title": "Charge", "readOnlyHint": false, "idempotentHint": true})
        );
        let contract = &listed["_meta"][CONTRACT_META];
        assert_eq!(contract["scope"], "global");
        assert_eq!(contract["keyed"], json!(["order_id"]));
        assert_eq!(contract["checked"], json!(["amount"]));
        assert_eq!(contract["ignored"], json!(["note"]));
        assert_eq!(contract["replay_window_secs"], 3600);
    }
}
