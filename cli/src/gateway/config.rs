//! The gateway's per-tool settings: a TOML file (`--config`) with a
//! `[tools.NAME]` table for each tool whose treatment differs from what the
//! upstream's annotations give (docs/gateway.md, "Configuration").
//!
//! ```toml
//! approval_wait = "10m"     # every tool that asks for approval waits this long
//! uncertain_wait = "5m"     # every tool that refuses uncertain outcomes too
//!
//! [tools.charge_card]
//! scope = "global"          # or "run" (the default)
//! key = ["order_id"]        # or check = [..]; and ignore = [..]
//! hide = ["card_number"]    # left out of what records show operators
//! lease = "30s"
//! ttl = "24h"
//! on_in_flight = "wait(5s)" # or "reject" (the default)
//! on_uncertain = "refuse"   # or "rerun" (the default)
//! approval = "required"     # or "never" (the default), or "ask": a person approves each
//!                           # operation; "ask" also asks the person at an MCP client
//! approval_window = "30m"   # how long an approval stays good (1h by default)
//! approval_wait = "10m"     # a call waits this long for the decision
//!                           # (no wait by default: it is told to call again)
//! uncertain_wait = "5m"     # with on_uncertain = "refuse": waits for `idem resolve`
//! approval_when = "amount_cents > 10000"  # only the calls for which this CEL
//!                           # condition holds wait for approval (condition.rs)
//! error_results = "record"  # or "release" (the default)
//!
//! [tools.search]
//! kind = "read"
//!
//! [notify]                  # webhooks: ../notify.rs
//! url = "https://hooks.example.com/idem"
//! secret_env = "IDEM_WEBHOOK_SECRET"
//! ```
//!
//! Each write setting is spelled, bounded and explained as the
//! `#[write_tool(..)]` attribute spells it: both read it with the parsers
//! of idem's settings (`idem::parse_duration`, `OnUncertain::parse`, ..).
//! The gateway's older `wait = "5s"` still reads, as
//! `on_in_flight = "wait(5s)"`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use idem::{
    Approval, OnInFlight, OnStoreError, OnUncertain, ScopeKind, SettingError, Waits, WriteOptions,
};
use serde::{Deserialize, Deserializer};

use super::condition::Condition;
use crate::notify::NotifyTable;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    /// How long a call of any tool that asks for approval waits for the
    /// decision, unless its table says otherwise.
    #[serde(default, deserialize_with = "duration")]
    pub(crate) approval_wait: Option<Duration>,
    /// How long a call of any tool that leaves an unknown outcome to a
    /// person waits for it to be resolved, unless its table says.
    #[serde(default, deserialize_with = "duration")]
    pub(crate) uncertain_wait: Option<Duration>,
    /// The settings of each tool that has any, by its name upstream.
    #[serde(default)]
    pub(crate) tools: BTreeMap<String, ToolConfig>,
    /// `[notify]`: where webhooks go, as written.
    #[serde(default, rename = "notify")]
    notify_table: Option<NotifyTable>,
    /// `[notify]`, checked: where webhooks go.
    #[serde(skip)]
    pub(crate) notify: Option<idem::notify::Notify>,
}

/// Whether a tool is a read (passed through, never recorded) or a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    Read,
    Write,
}

/// What an `isError` result of the upstream does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ErrorResults {
    /// Answered, and not recorded: a duplicate runs the tool again (the
    /// default, as the library treats a tool's errors as transient).
    #[default]
    Release,
    /// Recorded and replayed to duplicates, as a success is.
    Record,
}

/// One tool's settings; what is not given comes from the upstream's
/// annotations and the registry's defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolConfig {
    pub(crate) kind: Option<Kind>,
    #[serde(default, deserialize_with = "named")]
    pub(crate) scope: Option<ScopeKind>,
    #[serde(default, deserialize_with = "fields")]
    pub(crate) key: Option<&'static [&'static str]>,
    /// `key` and `idem_repeat` (made once, when the file is read).
    #[serde(skip)]
    pub(crate) key_and_repeat: Option<&'static [&'static str]>,
    #[serde(default, deserialize_with = "fields")]
    pub(crate) check: Option<&'static [&'static str]>,
    #[serde(default, deserialize_with = "fields")]
    pub(crate) ignore: Option<&'static [&'static str]>,
    /// Left out of the record's readable view of the arguments.
    #[serde(default, deserialize_with = "fields")]
    pub(crate) hide: Option<&'static [&'static str]>,
    #[serde(default, deserialize_with = "duration")]
    pub(crate) lease: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    pub(crate) ttl: Option<Duration>,
    /// What a duplicate that arrives while the first call runs does
    /// (default: it is answered "in flight" at once).
    #[serde(default, deserialize_with = "named")]
    pub(crate) on_in_flight: Option<OnInFlight>,
    /// The older spelling of `on_in_flight = "wait(..)"`: the duration alone.
    #[serde(default, deserialize_with = "wait")]
    pub(crate) wait: Option<OnInFlight>,
    /// How long the upstream has to answer a call (the gateway's
    /// `--timeout` by default); past it the outcome is uncertain.
    #[serde(default, deserialize_with = "duration")]
    pub(crate) timeout: Option<Duration>,
    pub(crate) version: Option<u32>,
    #[serde(default, deserialize_with = "named")]
    pub(crate) on_store_error: Option<OnStoreError>,
    #[serde(default, deserialize_with = "named")]
    pub(crate) on_uncertain: Option<OnUncertain>,
    /// Whether a person approves each operation before it runs upstream
    /// (`idem approve`; default: never).
    #[serde(default, deserialize_with = "named")]
    pub(crate) approval: Option<Approval>,
    /// How long an approval stays good (an hour by default).
    #[serde(default, deserialize_with = "duration")]
    pub(crate) approval_window: Option<Duration>,
    /// Which calls wait for approval: those for which this condition (CEL,
    /// over the arguments and `tenant`) holds; all of them without it.
    #[serde(default, deserialize_with = "condition")]
    pub(crate) approval_when: Option<Arc<Condition>>,
    /// How long a call waits for a person's decision (the file's
    /// `approval_wait`, else no wait).
    #[serde(default, deserialize_with = "duration")]
    pub(crate) approval_wait: Option<Duration>,
    /// How long a call of an unknown outcome waits for `idem resolve`.
    #[serde(default, deserialize_with = "duration")]
    pub(crate) uncertain_wait: Option<Duration>,
    pub(crate) error_results: Option<ErrorResults>,
}

impl Config {
    /// The file at `path`, or why it cannot be read.
    pub(crate) fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the configuration {}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The settings `text` gives, or why they cannot be taken.
    fn parse(text: &str) -> Result<Config, String> {
        let mut config: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        config.notify = config
            .notify_table
            .as_ref()
            .map(NotifyTable::notify)
            .transpose()?;
        for tool in config.tools.values_mut() {
            tool.key_and_repeat = tool.key.map(|key| {
                let fields = key.iter().copied().chain([super::repeat::REPEAT]);
                &*Box::leak(fields.collect::<Vec<_>>().into_boxed_slice())
            });
        }
        for (name, tool) in &config.tools {
            if tool.approval == Some(Approval::Never) && tool.approval_when.is_some() {
                return Err(format!(
                    "[tools.{name}] gives `approval_when`, the calls that wait for a person's approval, and `approval = \"never\"`: give `approval = \"required\"` (the default with a condition) or \"ask\", or remove `approval_when`"
                ));
            }
            if tool.approval_window.is_some() && tool.approval() == Approval::Never {
                return Err(format!(
                    "[tools.{name}] gives `approval_window`, how long a person's approval stays good, but the tool asks for none: give `approval = \"required\"` (or \"ask\", or `approval_when`), or remove `approval_window`"
                ));
            }
            let waits = Waits {
                approval: tool.approval(),
                approval_window: tool.approval_window.unwrap_or(idem::APPROVAL_WINDOW),
                approval_wait: tool.approval_wait,
                on_uncertain: tool.on_uncertain.unwrap_or_default(),
                uncertain_wait: tool.uncertain_wait,
            };
            if let Err(e) = waits.check() {
                return Err(format!("[tools.{name}]: {e}"));
            }
            if tool.wait.is_some() && tool.on_in_flight.is_some() {
                return Err(format!(
                    "[tools.{name}] gives both `wait` and `on_in_flight`: keep `on_in_flight` (`wait = \"5s\"` is its older spelling)"
                ));
            }
        }
        Ok(config)
    }

    /// The settings of tool `name` (all unset if the file names it not).
    pub(crate) fn tool(&self, name: &str) -> ToolConfig {
        self.tools.get(name).cloned().unwrap_or_default()
    }
}

impl ToolConfig {
    /// The settings given that only a write tool uses (every one but
    /// `kind`), by their names in the file: a read passes through as it
    /// came, so on a read they would be silently ignored.
    pub(crate) fn write_settings(&self) -> Vec<&'static str> {
        let given = [
            ("scope", self.scope.is_some()),
            ("key", self.key.is_some()),
            ("check", self.check.is_some()),
            ("ignore", self.ignore.is_some()),
            ("hide", self.hide.is_some()),
            ("lease", self.lease.is_some()),
            ("ttl", self.ttl.is_some()),
            ("on_in_flight", self.on_in_flight.is_some()),
            ("wait", self.wait.is_some()),
            ("timeout", self.timeout.is_some()),
            ("version", self.version.is_some()),
            ("on_store_error", self.on_store_error.is_some()),
            ("on_uncertain", self.on_uncertain.is_some()),
            ("approval", self.approval.is_some()),
            ("approval_window", self.approval_window.is_some()),
            ("approval_when", self.approval_when.is_some()),
            ("approval_wait", self.approval_wait.is_some()),
            ("uncertain_wait", self.uncertain_wait.is_some()),
            ("error_results", self.error_results.is_some()),
        ];
        given
            .into_iter()
            .filter_map(|(name, given)| given.then_some(name))
            .collect()
    }

    /// Whether a person approves the tool's operations: as `approval`
    /// says; `"required"` when only `approval_when` is given, else never.
    /// With `approval_when`, only the calls for which it holds.
    pub(crate) fn approval(&self) -> Approval {
        match (self.approval, &self.approval_when) {
            (Some(approval), _) => approval,
            (None, Some(_)) => Approval::Required,
            (None, None) => Approval::Never,
        }
    }

    /// The write options these settings make, on top of `destructive` and
    /// `open_world` (the upstream's hints); `repeats`: the tool takes
    /// `idem_repeat`, which `key` then holds besides the fields it names.
    pub(crate) fn write_options(
        &self,
        destructive: bool,
        open_world: bool,
        repeats: bool,
    ) -> WriteOptions {
        let mut options = WriteOptions::new()
            .destructive(destructive)
            .open_world(open_world);
        if let Some(scope) = self.scope {
            options = options.scope(scope);
        }
        match (self.key, self.key_and_repeat) {
            (Some(_), Some(with_repeat)) if repeats => options = options.key_fields(with_repeat),
            (Some(fields), _) => options = options.key_fields(fields),
            (None, _) => {}
        }
        if let Some(fields) = self.check {
            options = options.check_fields(fields);
        }
        if let Some(fields) = self.ignore {
            options = options.ignore_fields(fields);
        }
        if let Some(fields) = self.hide {
            options = options.hide_fields(fields);
        }
        if let Some(lease) = self.lease {
            options = options.lease(lease);
        }
        if let Some(ttl) = self.ttl {
            options = options.ttl(ttl);
        }
        if let Some(on_in_flight) = self.on_in_flight.or(self.wait) {
            options = options.on_in_flight(on_in_flight);
        }
        if let Some(version) = self.version {
            options = options.version(version);
        }
        if let Some(policy) = self.on_store_error {
            options = options.on_store_error(policy);
        }
        if let Some(policy) = self.on_uncertain {
            options = options.on_uncertain(policy);
        }
        options = match self.approval_when {
            // The condition decides call by call (`ProxiedWrite::needs_approval`).
            Some(_) => options.approval(Approval::Decided),
            None => options.approval(self.approval()),
        };
        if let Some(window) = self.approval_window {
            options = options.approval_window(window);
        }
        if let Some(wait) = self.approval_wait {
            options = options.approval_wait(wait);
        }
        if let Some(wait) = self.uncertain_wait {
            options = options.uncertain_wait(wait);
        }
        options
    }
}

/// A list of field paths, kept for the life of the process as
/// [`WriteOptions`] holds them: leaked once, when the file is read (the
/// options are made again from them whenever the upstream's tools change).
fn fields<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'static [&'static str]>, D::Error> {
    let fields: Vec<&'static str> = Vec::<String>::deserialize(d)?
        .into_iter()
        .map(|f| &*Box::leak(f.into_boxed_str()))
        .collect();
    Ok(Some(Box::leak(fields.into_boxed_slice())))
}

/// A setting idem names (a policy, a scope), read as `#[write_tool]`
/// reads it.
trait Named: Sized {
    fn parse(given: &str) -> Result<Self, SettingError<'_>>;
}

macro_rules! named {
    ($($setting:ty),*) => {$(
        impl Named for $setting {
            fn parse(given: &str) -> Result<Self, SettingError<'_>> {
                <$setting>::parse(given)
            }
        }
    )*};
}
named!(ScopeKind, OnInFlight, OnStoreError, OnUncertain, Approval);

fn named<'de, D: Deserializer<'de>, T: Named>(d: D) -> Result<Option<T>, D::Error> {
    let given = String::deserialize(d)?;
    T::parse(&given).map(Some).map_err(serde::de::Error::custom)
}

/// `approval_when`: CEL that parses (whether it fits the tool's input is
/// checked once the upstream lists the tool).
fn condition<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<Condition>>, D::Error> {
    let given = String::deserialize(d)?;
    Condition::parse(&given)
        .map(|c| Some(Arc::new(c)))
        .map_err(|e| serde::de::Error::custom(format!("`approval_when` is not CEL: {e}")))
}

fn wait<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OnInFlight>, D::Error> {
    let given = String::deserialize(d)?;
    OnInFlight::parse_wait(&given)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let given = String::deserialize(d)?;
    parse_duration(&given)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// A positive duration as every write setting takes it: `"500ms"`, `"30s"`,
/// `"10m"`, `"24h"` or `"7d"`.
pub(crate) fn parse_duration(given: &str) -> Result<Duration, String> {
    idem::parse_duration(given).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_with_every_setting_reads_and_a_typo_is_named() {
        let config: Config = toml::from_str(
            r#"
            [tools.charge]
            scope = "global"
            key = ["order.id"]
            ignore = ["note"]
            lease = "500ms"
            ttl = "7d"
            on_in_flight = "wait(5s)"
            timeout = "2m"
            version = 2
            on_store_error = "fail_closed"
            on_uncertain = "refuse"
            approval = "required"
            approval_window = "30m"
            error_results = "record"

            [tools.search]
            kind = "read"
            "#,
        )
        .expect("the file reads");
        let charge = config.tool("charge");
        assert_eq!(charge.scope, Some(ScopeKind::Global));
        assert_eq!(charge.ttl, Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(charge.lease, Some(Duration::from_millis(500)));
        assert_eq!(charge.on_uncertain, Some(OnUncertain::Refuse));
        assert_eq!(charge.error_results, Some(ErrorResults::Record));
        assert_eq!(charge.approval, Some(Approval::Required));
        assert_eq!(
            charge.write_options(true, true, false),
            WriteOptions::new()
                .scope(ScopeKind::Global)
                .approval(Approval::Required)
                .approval_window(Duration::from_secs(1800))
                .on_uncertain(OnUncertain::Refuse)
                .on_store_error(OnStoreError::FailClosed)
                .on_in_flight(OnInFlight::Wait(Duration::from_secs(5)))
                .lease(Duration::from_millis(500))
                .ttl(Duration::from_secs(7 * 86_400))
                .version(2)
                .key_fields(charge.key.expect("key"))
                .ignore_fields(charge.ignore.expect("ignore")),
            "every setting reaches the tool's options"
        );
        let typo = toml::from_str::<Config>("[tools.x]\napproval = \"always\"\n");
        let message = typo.expect_err("refused").to_string();
        assert!(
            message.contains("`approval` is \"never\" (the default), \"required\""),
            "the attribute's words: {message}"
        );
        let five = OnInFlight::Wait(Duration::from_secs(5));
        assert_eq!(charge.on_in_flight, Some(five));
        assert_eq!(config.tool("search").kind, Some(Kind::Read));
        assert_eq!(config.tool("absent").kind, None);

        let typo = toml::from_str::<Config>("[tools.x]\non_uncertain = \"verify\"\n");
        let message = typo.expect_err("refused").to_string();
        assert!(
            message.contains("`on_uncertain` is \"rerun\" (")
                && message.contains("or \"refuse\" ("),
            "the attribute's words: {message}"
        );
        let older: Config = toml::from_str("[tools.x]\nwait = \"5s\"\n").expect("reads");
        assert_eq!(
            older.tool("x").wait,
            Some(five),
            "the older spelling still reads"
        );
        let unknown = toml::from_str::<Config>("[tools.x]\nkeys = [\"a\"]\n");
        assert!(
            unknown
                .expect_err("refused")
                .to_string()
                .contains("unknown field `keys`")
        );
        assert!(parse_duration("10 s").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
    }

    #[test]
    fn both_spellings_of_on_in_flight_are_refused_naming_the_one_to_keep() {
        let both = "[tools.pay]\nwait = \"5s\"\non_in_flight = \"reject\"\n";
        let refused = Config::parse(both);
        let loaded = Config::parse("[tools.pay]\non_in_flight = \"reject\"\n");
        let message = refused.expect_err("both spellings are refused");
        assert!(
            message
                .contains("[tools.pay] gives both `wait` and `on_in_flight`: keep `on_in_flight`"),
            "{message}"
        );
        let on = loaded.expect("one spelling loads").tool("pay").on_in_flight;
        assert_eq!(on, Some(OnInFlight::Reject));
    }

    #[test]
    fn a_condition_asks_as_required_unless_ask_is_given_and_never_contradicts_it() {
        let config = Config::parse(
            "[tools.refund]\napproval_when = \"amount > 5\"\napproval_window = \"10m\"\n\
             [tools.pay]\napproval = \"ask\"\napproval_when = \"amount > 5\"\n",
        )
        .expect("loads");
        let refund = config.tool("refund");
        assert_eq!(refund.approval(), Approval::Required);
        assert_eq!(config.tool("pay").approval(), Approval::Ask);
        assert_eq!(config.tool("other").approval(), Approval::Never);
        let decided = WriteOptions::new()
            .destructive(false)
            .open_world(false)
            .approval(Approval::Decided)
            .approval_window(Duration::from_secs(600));
        assert_eq!(
            refund.write_options(false, false, false),
            decided,
            "the condition decides"
        );
        let never = Config::parse("[tools.pay]\napproval = \"never\"\napproval_when = \"a > 1\"\n");
        let message = never.expect_err("refused");
        assert!(
            message.contains("[tools.pay] gives `approval_when`"),
            "{message}"
        );
        let bad = Config::parse("[tools.pay]\napproval_when = \"amount >\"\n");
        let message = bad.expect_err("refused");
        assert!(
            message.contains("`approval_when` is not CEL") && message.contains("1:9"),
            "{message}"
        );
    }

    #[test]
    fn an_approval_window_for_a_tool_that_asks_for_none_is_refused() {
        let refused = Config::parse("[tools.pay]\napproval_window = \"30m\"\n");
        let asks = "[tools.pay]\napproval = \"ask\"\napproval_window = \"30m\"\n";
        let loaded = Config::parse(asks);
        let message = refused.expect_err("a window without approval is refused");
        assert!(
            message.contains("[tools.pay] gives `approval_window`")
                && message.contains("approval = \"required\""),
            "{message}"
        );
        let window = loaded
            .expect("with approval it loads")
            .tool("pay")
            .approval_window;
        assert_eq!(window, Some(Duration::from_secs(1800)));
    }

    #[test]
    fn waits_read_for_every_tool_and_each_and_are_checked_as_the_attribute_checks_them() {
        let config = Config::parse(
            "approval_wait = \"10m\"\nuncertain_wait = \"1m\"\n\
             [tools.pay]\napproval = \"required\"\napproval_wait = \"30m\"\n\
             on_uncertain = \"refuse\"\nuncertain_wait = \"5m\"\n",
        )
        .expect("loads");
        let minutes = |m: u64| Duration::from_secs(60 * m);
        assert_eq!(
            (config.approval_wait, config.uncertain_wait),
            (Some(minutes(10)), Some(minutes(1)))
        );
        let options = config.tool("pay").write_options(true, true, false);
        let want = WriteOptions::new()
            .approval(Approval::Required)
            .on_uncertain(OnUncertain::Refuse)
            .approval_wait(minutes(30))
            .uncertain_wait(minutes(5));
        assert_eq!(options, want);
        for (text, says) in [
            ("[tools.pay]\napproval_wait = \"5m\"\n", "asks for none"),
            (
                "[tools.pay]\napproval = \"required\"\napproval_wait = \"2h\"\n",
                "(\"2h\") is longer than `approval_window` (\"1h\")",
            ),
            (
                "[tools.pay]\nuncertain_wait = \"5m\"\n",
                "on_uncertain = \"refuse\"",
            ),
            ("approval_wait = \"soon\"\n", "invalid duration \"soon\""),
        ] {
            let message = Config::parse(text).expect_err(text);
            assert!(message.contains(says), "{text}: {message}");
        }
    }
}
