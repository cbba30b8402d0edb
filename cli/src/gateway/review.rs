//! What the gateway makes of an upstream's tools, said instead of serving
//! them: `idem gateway init`, a configuration to start from, with the
//! tools taken as writes only because nothing says otherwise (MCP's
//! default for a tool without `readOnlyHint`) marked for review and the
//! ones whose name reads as a query suggested as reads; `idem gateway
//! check`, what each tool will be with a configuration, or why the gateway
//! would refuse it. (The warning at start is `start.rs`'s.)

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::catalog::{CONTRACT_META, Catalog, Decided, Settings, kind_of, served, unannotated};
use super::config::{Config, Kind};
use super::link::Source;

/// The first words of a tool's name that say it asks rather than acts.
const QUERY_WORDS: &[&str] = &[
    "browse", "count", "describe", "fetch", "find", "get", "inspect", "list", "lookup", "open",
    "peek", "query", "read", "retrieve", "search", "show", "view",
];

/// A tool's name as the upstream lists it.
fn name(tool: &Value) -> &str {
    tool.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// Whether `name` reads as a query: its first word (of `snake_case`,
/// `kebab-case`, `dotted.names` or `camelCase`) is one of [`QUERY_WORDS`].
fn reads_as_query(name: &str) -> bool {
    let first: String = name
        .chars()
        .enumerate()
        .take_while(|(i, c)| c.is_alphanumeric() && !(*i > 0 && c.is_uppercase()))
        .map(|(_, c)| c.to_ascii_lowercase())
        .collect();
    QUERY_WORDS.contains(&first.as_str())
}

/// How the upstream is named in what is said of it.
fn described(source: &Source) -> String {
    match source {
        Source::Command(command) => format!("`{}`", command.join(" ")),
        Source::Url(url) => url.clone(),
    }
}

/// `idem gateway init`: prints a configuration for the upstream's tools.
pub(super) async fn init(source: &Source, patience: Duration) -> Result<(), String> {
    let tools = super::start::upstream_tools(source, patience).await?;
    print!("{}", configuration(&tools, source));
    Ok(())
}

/// The configuration `init` prints for `tools`.
fn configuration(tools: &[Value], source: &Source) -> String {
    let mut out = format!(
        "# idem gateway's configuration for {}, made by `idem gateway init`.\n\
         # Pass it with --config. A tool is a read (passed through, never recorded)\n\
         # or a write (claimed, run once upstream, its result replayed to a repeat\n\
         # within its run). Review every table marked REVIEW: the server does not\n\
         # say what those tools do, and a tool it does not say is a read is a write.\n",
        described(source)
    );
    let none = Config::default();
    for tool in tools {
        let name = name(tool);
        let _ = write!(out, "\n[tools.{}]\n", toml_key(name));
        match kind_of(tool, &none.tool(name)) {
            (Kind::Read, _) => out.push_str("kind = \"read\"       # annotated read-only\n"),
            (Kind::Write, Decided::Unannotated) if reads_as_query(name) => out.push_str(
                "# REVIEW: not annotated, so taken as a write; its name reads as a query.\n\
                 # If it changes nothing, make it a read:\n\
                 # kind = \"read\"\n",
            ),
            (Kind::Write, Decided::Unannotated) => out.push_str(
                "kind = \"write\"      # REVIEW: not annotated; a write unless it changes nothing\n",
            ),
            (Kind::Write, _) => out.push_str("kind = \"write\"      # annotated\n"),
        }
    }
    out
}

/// `name` as a TOML key: bare when it may be, quoted otherwise.
fn toml_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match bare {
        true => name.to_owned(),
        false => Value::String(name.to_owned()).to_string(),
    }
}

/// `idem gateway check`: says what each tool will be with the
/// configuration at `path`, or why the gateway would refuse it.
pub(super) async fn check(
    path: Option<&Path>,
    source: &Source,
    patience: Duration,
) -> Result<(), String> {
    let config = match path {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let tools = super::start::upstream_tools(source, patience).await?;
    let settings = Settings {
        config,
        store: Arc::new(idem::MemoryStore::new()),
        namespace: None,
        timeout: patience,
    };
    let catalog = Catalog::build(&tools, &settings)?;
    if let Some(unfit) = catalog.unlisted(&settings.config) {
        return Err(unfit);
    }
    print!("{}", verdicts(&tools, &settings.config));
    Ok(())
}

/// A line per tool: what it will be, and why.
fn verdicts(tools: &[Value], config: &Config) -> String {
    let width = tools.iter().map(|t| name(t).len()).max().unwrap_or(0);
    let mut out = String::new();
    for tool in tools {
        let name = name(tool);
        let (kind, decided) = kind_of(tool, &config.tool(name));
        let why = match decided {
            Decided::Configured => "as the configuration says",
            Decided::Annotated => "as the server annotates it",
            Decided::Unannotated => "REVIEW: not annotated, so taken as a write",
        };
        let what = match kind {
            Kind::Read => "read ".to_owned(),
            Kind::Write => {
                let listed = served(tool.clone(), config);
                format!("write ({})", terms(&listed["_meta"][CONTRACT_META]))
            }
        };
        let _ = write!(out, "{name:<width$}  {what}  {why}");
        if decided == Decided::Unannotated && reads_as_query(name) {
            out.push_str("; its name reads as a query: `kind = \"read\"` if it changes nothing");
        }
        out.push('\n');
    }
    let unannotated = unannotated(tools, config).len();
    let _ = writeln!(
        out,
        "\n{} tools: {} reads, {} writes, {unannotated} to review",
        tools.len(),
        tools
            .iter()
            .filter(|t| kind_of(t, &config.tool(name(t))).0 == Kind::Read)
            .count(),
        tools
            .iter()
            .filter(|t| kind_of(t, &config.tool(name(t))).0 == Kind::Write)
            .count(),
    );
    out
}

/// A write's contract in a few words: its scope, keyed fields and
/// approval.
fn terms(contract: &Value) -> String {
    let listed = |field: &str| {
        let names: Vec<&str> = contract[field]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match names.is_empty() {
            true => "none".to_owned(),
            false => names.join(", "),
        }
    };
    let mut terms = format!(
        "{} scope, keyed by {}",
        contract["scope"].as_str().unwrap_or("run"),
        listed("keyed")
    );
    let checked = listed("checked");
    if checked != "none" {
        let _ = write!(terms, ", checked {checked}");
    }
    match contract["approval"].as_str() {
        Some("never") | None => {}
        Some(approval) => {
            let _ = write!(terms, ", approval {approval}");
            if let Some(when) = contract["approval_when"].as_str() {
                let _ = write!(terms, " when {when}");
            }
        }
    }
    terms
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_that_ask_read_as_queries() {
        for query in [
            "read_graph",
            "search_nodes",
            "open_nodes",
            "getUser",
            "list-files",
        ] {
            assert!(reads_as_query(query), "{query}");
        }
        for act in [
            "create_entities",
            "delete",
            "readme_update_x",
            "settle",
            "Getaway",
        ] {
            assert!(!reads_as_query(act), "{act}");
        }
    }

    #[test]
    fn init_marks_what_to_review_and_suggests_reads_commented_out() {
        let tools = [
            json!({"name": "create_entities", "inputSchema": {"type": "object"}}),
            json!({"name": "read_graph", "inputSchema": {"type": "object"}}),
            json!({"name": "count", "annotations": {"readOnlyHint": true}}),
            json!({"name": "pay", "annotations": {"readOnlyHint": false}}),
            json!({"name": "odd name", "inputSchema": {"type": "object"}}),
        ];
        let source = Source::Command(vec!["server".into()]);
        let text = configuration(&tools, &source);
        let parsed: toml::Table = toml::from_str(&text).expect("init prints TOML");
        let kind = |tool: &str| parsed["tools"][tool].get("kind").and_then(|k| k.as_str());
        assert_eq!(kind("create_entities"), Some("write"));
        assert_eq!(kind("read_graph"), None, "a suggestion only: {text}");
        assert!(text.contains("# kind = \"read\""), "{text}");
        assert_eq!(kind("count"), Some("read"));
        assert_eq!(kind("pay"), Some("write"));
        assert_eq!(kind("odd name"), Some("write"));
        assert_eq!(text.matches("REVIEW").count(), 4, "{text}");
    }
}
