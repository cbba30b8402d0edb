//! What the gateway serves, made from the upstream's tools and the
//! configuration: which tools are reads (passed through) and which are
//! writes (a registry of [`ProxiedWrite`]s over the store), and the tool
//! list its clients see, each write carrying the contract the gateway
//! enforces for it (docs/gateway.md, "What clients see").

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use idem::{IdemStore, Registry, ScopeKind, ToolInfo};
use serde_json::{Map, Value, json};

use super::config::{Config, ErrorResults, Kind, ToolConfig};
use super::link::Link;
use super::proxy::ProxiedWrite;
use super::repeat;
use super::spelling::closest;

/// How long a write's result is replayed unless its `ttl` says otherwise
/// (the registry's default, set on it explicitly so that the contract
/// states it).
const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// The `_meta` member of a listed write tool that states its contract.
pub(crate) const CONTRACT_META: &str = "idem/contract";

/// The gateway's view of the upstream's tools, as one session's upstream
/// lists them.
pub(crate) struct Catalog {
    /// The write tools, over the store.
    pub(crate) registry: Registry<()>,
    /// The tools as the upstream listed them.
    pub(crate) upstream_tools: Vec<Value>,
    /// The names of the tools the upstream lists (a read's metrics label).
    listed: HashSet<String>,
    /// The names of the write tools.
    pub(crate) writes: HashSet<String>,
    /// The names of the write tools whose key holds the run.
    pub(crate) run_scoped: HashSet<String>,
    /// The names of the write tools that take [`repeat::REPEAT`].
    pub(crate) repeats: HashSet<String>,
}

/// What [`Catalog::build`] is given beside the tools.
pub(crate) struct Settings {
    pub(crate) config: Config,
    pub(crate) store: Arc<dyn IdemStore>,
    pub(crate) namespace: Option<String>,
    /// How long the upstream has to answer a call, unless a tool says.
    pub(crate) timeout: Duration,
}

/// A tool's name, as the upstream lists it.
fn name(tool: &Value) -> &str {
    tool.get("name").and_then(Value::as_str).unwrap_or_default()
}

impl Catalog {
    /// Whether the upstream lists a tool named `tool`.
    pub(crate) fn lists(&self, tool: &str) -> bool {
        self.listed.contains(tool)
    }

    /// The catalog of `tools` (the upstream's `tools/list`, all pages),
    /// or why one of them cannot be served (a write tool whose name or
    /// settings the registry refuses).
    pub(crate) fn build(tools: &[Value], settings: &Settings) -> Result<Catalog, String> {
        let mut builder = Registry::builder(())
            .store(settings.store.clone())
            .default_ttl(DEFAULT_TTL);
        if let Some(notify) = &settings.config.notify {
            builder = builder.notify(notify.clone());
        }
        if let Some(wait) = settings.config.approval_wait {
            builder = builder.default_approval_wait(wait);
        }
        if let Some(wait) = settings.config.uncertain_wait {
            builder = builder.default_uncertain_wait(wait);
        }
        if let Some(namespace) = &settings.namespace {
            builder = builder.namespace(namespace.clone());
        }
        let (mut writes, mut reads, mut run_scoped, mut repeats) = (
            HashSet::new(),
            HashSet::new(),
            HashSet::new(),
            HashSet::new(),
        );
        for tool in tools {
            let name = name(tool).to_owned();
            let config = settings.config.tool(&name);
            let hints = Hints::of(tool);
            if kind_of(tool, &config).0 == Kind::Read {
                refuse_write_settings(&name, &config)?;
                reads.insert(name);
                continue;
            }
            let offered = repeat::offered(tool);
            builder = builder.tool(proxied(tool, &config, &hints, settings.timeout, offered)?);
            if config.scope.unwrap_or(ScopeKind::Run) == ScopeKind::Run {
                run_scoped.insert(name.clone());
            }
            if offered {
                repeats.insert(name.clone());
            }
            writes.insert(name);
        }
        let registry = builder
            .build()
            .map_err(|e| format!("cannot serve the upstream's tools: {e}"))?;
        Ok(Catalog {
            registry,
            upstream_tools: tools.to_vec(),
            listed: tools.iter().map(|tool| name(tool).to_owned()).collect(),
            writes,
            run_scoped,
            repeats,
        })
    }

    /// Why the configuration does not fit the upstream's tools: a table for
    /// a tool it does not list (a misspelt name would leave the real tool
    /// with the defaults), naming the listed tool it is closest to.
    pub(crate) fn unlisted(&self, config: &Config) -> Option<String> {
        let names: Vec<&str> = self.upstream_tools.iter().map(name).collect();
        let unlisted: Vec<String> = config
            .tools
            .keys()
            .filter(|configured| !names.contains(&configured.as_str()))
            .map(|configured| match closest(configured, &names) {
                Some(listed) => format!("`{configured}` (did you mean `{listed}`?)"),
                None => format!("`{configured}`"),
            })
            .collect();
        if unlisted.is_empty() {
            return None;
        }
        let mut listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        listed.sort();
        Some(format!(
            "the configuration has settings for {}, which the upstream does not list; its tools \
             are {}",
            unlisted.join(", "),
            listed.join(", ")
        ))
    }
}

/// Why read tool `name` cannot be served with `config`: settings only a
/// write uses, which a read (passed through as it came) would ignore.
fn refuse_write_settings(name: &str, config: &ToolConfig) -> Result<(), String> {
    let given = config.write_settings();
    if given.is_empty() {
        return Ok(());
    }
    let why = match config.kind {
        Some(Kind::Read) => "the table says `kind = \"read\"`",
        _ => "the upstream annotates it `readOnlyHint: true`",
    };
    Err(format!(
        "[tools.{name}] gives {}, which only a write tool uses, but `{name}` is a read ({why}) and \
         passes through unrecorded: remove {}, or add `kind = \"write\"` if its calls change things",
        quoted(&given),
        if given.len() == 1 { "it" } else { "them" },
    ))
}

/// `names` as a sentence lists them: `a`, `b` and `c`.
fn quoted(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

/// `tool` (as the upstream lists it) as the gateway's clients see it: a
/// read as it came, a write carrying the contract the gateway enforces.
pub(crate) fn served(tool: Value, config: &Config) -> Value {
    let tool_config = config.tool(name(&tool));
    if kind_of(&tool, &tool_config).0 == Kind::Read {
        return tool;
    }
    listed(tool, &tool_config)
}

/// What decided whether a tool is a read or a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decided {
    /// The tool's table says `kind`.
    Configured,
    /// The upstream annotates it (`readOnlyHint`).
    Annotated,
    /// Nothing: a write, the protocol's default.
    Unannotated,
}

/// Whether `tool` (as the upstream lists it) is a read or a write with
/// `config`, and what decided it: the table's `kind`, else the upstream's
/// `readOnlyHint`, else a write.
pub(crate) fn kind_of(tool: &Value, config: &ToolConfig) -> (Kind, Decided) {
    let hints = Hints::of(tool);
    match (config.kind, hints.annotated) {
        (Some(kind), _) => (kind, Decided::Configured),
        (None, true) => (hints.kind, Decided::Annotated),
        (None, false) => (Kind::Write, Decided::Unannotated),
    }
}

/// The tools taken as writes because nothing says what they are.
pub(crate) fn unannotated<'a>(tools: &'a [Value], config: &Config) -> Vec<&'a str> {
    tools
        .iter()
        .filter(|tool| kind_of(tool, &config.tool(name(tool))).1 == Decided::Unannotated)
        .map(name)
        .collect()
}

/// What the upstream's annotations say of a tool.
struct Hints {
    kind: Kind,
    /// Whether it says `readOnlyHint` at all.
    annotated: bool,
    destructive: bool,
    open_world: bool,
}

impl Hints {
    /// A tool is a read only if the upstream says it is read-only;
    /// anything else is a write, the safe default. MCP's defaults for the
    /// other hints: destructive and open-world.
    fn of(tool: &Value) -> Hints {
        let hint = |name: &str, default| {
            tool.get("annotations")
                .and_then(|a| a.get(name))
                .and_then(Value::as_bool)
                .unwrap_or(default)
        };
        let said = |name: &str| {
            tool.get("annotations")
                .and_then(|a| a.get(name))
                .is_some_and(Value::is_boolean)
        };
        Hints {
            kind: match hint("readOnlyHint", false) {
                true => Kind::Read,
                false => Kind::Write,
            },
            annotated: said("readOnlyHint"),
            destructive: hint("destructiveHint", true),
            open_world: hint("openWorldHint", true),
        }
    }
}

/// The write tool that proxies `tool`.
/// `offered`: the tool takes [`repeat::REPEAT`], keyed.
fn proxied(
    tool: &Value,
    config: &ToolConfig,
    hints: &Hints,
    timeout: Duration,
    offered: bool,
) -> Result<ProxiedWrite, String> {
    let name = name(tool);
    // A tool without a docstring (the Python SDK then sends "") is served
    // all the same: the registry's description is the gateway's own, never
    // shown (clients see the upstream's listing).
    let description = tool
        .get("description")
        .and_then(Value::as_str)
        .filter(|d| !d.trim().is_empty())
        .unwrap_or(name);
    let Some(input) = tool.get("inputSchema").filter(|s| s.is_object()) else {
        return Err(format!("the upstream's tool `{name}` has no input schema"));
    };
    if let Some(condition) = &config.approval_when {
        condition.checked(input).map_err(|e| {
            format!("[tools.{name}] approval_when does not fit the tool's input: {e}")
        })?;
    }
    let input = match offered {
        true => repeat::with_argument(input.clone()),
        false => input.clone(),
    };
    let mut info = ToolInfo::new(name.to_owned(), description.to_owned()).with_input_schema(input);
    if let Some(output) = tool.get("outputSchema").filter(|s| s.is_object()) {
        info = info.with_output_schema(Some(output.clone()));
    }
    Ok(ProxiedWrite {
        info,
        options: config.write_options(hints.destructive, hints.open_world, offered),
        timeout: config.timeout.unwrap_or(timeout),
        error_results: config.error_results.unwrap_or_default(),
        approval_when: config.approval_when.clone(),
    })
}

/// `tool` as the gateway lists it: `idempotentHint` as the gateway
/// enforces it (a repeat is replayed whatever run it comes in only for a
/// `global` tool; a run-scoped tool's only within its run), and its
/// contract under [`CONTRACT_META`] in `_meta`.
fn listed(mut tool: Value, config: &ToolConfig) -> Value {
    let scope = config.scope.unwrap_or(ScopeKind::Run);
    let properties: Vec<String> = tool
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let Some(object) = tool.as_object_mut() else {
        return tool;
    };
    let annotations = object.entry("annotations").or_insert_with(|| json!({}));
    if let Value::Object(annotations) = annotations {
        annotations.insert("readOnlyHint".into(), false.into());
        annotations.insert("idempotentHint".into(), (scope == ScopeKind::Global).into());
    }
    let contract = contract(config, scope, &properties);
    let meta = object.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(meta) = meta {
        meta.insert(CONTRACT_META.into(), contract);
    }
    if repeat::offered(&tool)
        && let Some(input) = tool.get_mut("inputSchema")
    {
        *input = repeat::with_argument(input.take());
    }
    tool
}

/// A write tool's contract, as a client or a model reads it: what a
/// repeat is (keyed, checked and ignored fields, scope), how long it is
/// replayed, and what happens when an outcome is unknown.
fn contract(config: &ToolConfig, scope: ScopeKind, properties: &[String]) -> Value {
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
    let approval = config.approval();
    contract.insert("approval".into(), approval.name().into());
    if let Some(condition) = &config.approval_when {
        contract.insert("approval_when".into(), condition.text().into());
    }
    if approval != idem::Approval::Never {
        let window = config.approval_window.unwrap_or(idem::APPROVAL_WINDOW);
        contract.insert("approval_window_secs".into(), window.as_secs().into());
    }
    Value::Object(contract)
}

fn scope_name(scope: ScopeKind) -> &'static str {
    match scope {
        ScopeKind::Global => "global",
        _ => "run",
    }
}

/// At most this many pages of `tools/list` make a catalog.
const MAX_PAGES: usize = 100;

/// The upstream's tools, all pages, as the gateway lists them itself.
pub(crate) async fn list_all_tools(
    link: &Arc<Link>,
    patience: Duration,
) -> Result<Vec<Value>, String> {
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let page = link
            .call("tools/list", params, patience)
            .await
            .map_err(|e| format!("the upstream server did not list its tools: {e}"))?;
        if let Some(listed) = page.get("tools").and_then(Value::as_array) {
            tools.extend(listed.iter().cloned());
        }
        match page.get("nextCursor") {
            Some(next) if !next.is_null() => cursor = Some(next.clone()),
            _ => return Ok(tools),
        }
    }
    Err(format!(
        "the upstream's tool list runs past {MAX_PAGES} pages"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(annotations: Value) -> Value {
        json!({
            "name": "charge",
            "inputSchema": {
                "type": "object",
                "properties": {"order_id": {}, "amount": {}, "note": {}},
            },
            "annotations": annotations,
        })
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
        let listed = served(tool(json!({"title": "Charge"})), &config);
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
