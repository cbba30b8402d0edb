//! What an operator sees of the records: a record's state, tool, attempt,
//! times and payload ([`RecordInfo`], from [`IdemStore::inspect`]), and
//! the records of a namespace a page at a time ([`ScanFilter`],
//! [`ScanPage`], from [`IdemStore::scan`]). The `idem` command-line tool is
//! built on these; nothing here can run a tool.
//!
//! [`IdemStore::inspect`]: crate::IdemStore::inspect
//! [`IdemStore::scan`]: crate::IdemStore::scan

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::key::{Fingerprint, IdemKey};
use crate::store::LeaseToken;

/// Where a record is in its life (the module documentation of
/// [`store`](crate::store) has what each means).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordState {
    /// Claimed by a worker; its lease may have lapsed.
    Running,
    /// Given up after a transient failure; claimable at once.
    Released,
    /// A recorded result.
    Done,
    /// A recorded permanent failure.
    Failed,
    /// Nobody knows whether the operation took effect (a claim lapsed, or
    /// the tool's error left it uncertain), and the tool may not run it
    /// again on its own: every caller is told so until an operator
    /// resolves it.
    Unknown,
    /// A person's approval was asked, and nothing ran: every caller is
    /// told so until it is given or refused.
    Awaiting,
    /// Approved, not yet run: the next call of the same arguments runs
    /// it, once.
    Approved,
}

impl RecordState {
    /// Every state, in the order of a record's life.
    pub const ALL: [RecordState; 7] = [
        RecordState::Awaiting,
        RecordState::Approved,
        RecordState::Running,
        RecordState::Released,
        RecordState::Done,
        RecordState::Failed,
        RecordState::Unknown,
    ];

    /// The state's name as every backend stores it: `awaiting`,
    /// `approved`, `running`, `released`, `done`, `failed`, `unknown`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RecordState::Running => "running",
            RecordState::Released => "released",
            RecordState::Done => "done",
            RecordState::Failed => "failed",
            RecordState::Unknown => "unknown",
            RecordState::Awaiting => "awaiting",
            RecordState::Approved => "approved",
        }
    }

    /// The state named `name`, if it is one.
    pub fn parse(name: &str) -> Option<RecordState> {
        RecordState::ALL
            .into_iter()
            .find(|state| state.as_str() == name)
    }
}

impl fmt::Display for RecordState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`RecordState`] from a name that is none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown record state {0:?} (expected awaiting, approved, running, released, done, failed or unknown)"
)]
pub struct UnknownState(pub String);

impl FromStr for RecordState {
    type Err = UnknownState;

    fn from_str(name: &str) -> Result<RecordState, UnknownState> {
        RecordState::parse(name).ok_or_else(|| UnknownState(name.to_owned()))
    }
}

/// What an unknown record says of itself, in its payload (a JSON object,
/// sealed like an error when the registry encrypts results): why the
/// outcome is unknown, and the tenant of the call that found it so, for
/// the operator who resolves it (`idem pending` lists both). Records do not
/// otherwise keep the tenant, which only the key's digest holds.
///
/// ```
/// use idem_runtime::store::UnknownNote;
/// let note = UnknownNote::new(Some("acme"), "the claim of attempt 0 lapsed");
/// let payload = note.to_payload();
/// assert_eq!(UnknownNote::parse(&payload), Some(note));
/// assert_eq!(UnknownNote::parse("idem-sealed:v1:k1:..."), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct UnknownNote {
    /// Why the outcome is unknown.
    pub reason: String,
    /// The tenant of the call, if it named one.
    pub tenant: Option<String>,
    /// The JSON Schema of the tool's structured result, if its info gives
    /// one ([`ToolInfo::output_schema`](crate::ToolInfo::output_schema);
    /// `idem gateway`'s: the upstream tool's `outputSchema`): what a
    /// result given by a person who resolves the outcome (`idem resolve`,
    /// the console) must fit, where the resolver finds it. A note written
    /// before it was kept reads with it `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
}

impl UnknownNote {
    /// A note of `reason`, for a call of `tenant`.
    pub fn new(tenant: Option<&str>, reason: impl Into<String>) -> UnknownNote {
        UnknownNote {
            reason: reason.into(),
            tenant: tenant.map(str::to_owned),
            output_schema: None,
        }
    }

    /// The note, keeping the tool's output schema `schema`.
    pub fn with_output_schema(mut self, schema: Option<serde_json::Value>) -> UnknownNote {
        self.output_schema = schema;
        self
    }

    /// The payload an unknown record keeps: the note as JSON.
    pub fn to_payload(&self) -> String {
        let mut note = serde_json::json!({ "reason": self.reason, "tenant": self.tenant });
        if let Some(schema) = &self.output_schema {
            note["output_schema"] = schema.clone();
        }
        note.to_string()
    }

    /// The note an unknown record's payload holds; `None` when it holds
    /// none (sealed, or written by hand).
    pub fn parse(payload: &str) -> Option<UnknownNote> {
        serde_json::from_str(payload).ok()
    }
}

/// What a record awaiting a person's approval keeps as its payload (a JSON
/// object, sealed like an error when the registry encrypts results): why
/// it waits, the tenant of the call, and the tool's terms for the
/// decision, so that a person who decides from a shell (`idem approve`,
/// `idem deny`) decides on them: how long an approval stays good (the
/// tool's `approval_window`) and how long a refusal is kept (its TTL).
/// A record written before these terms were kept reads with them `None`.
///
/// ```
/// use std::time::Duration;
/// use idem_runtime::store::ApprovalAsked;
/// let asked = ApprovalAsked::new(Some("acme"), "a person's approval is asked for `refund`")
///     .with_terms(Duration::from_secs(1800), Duration::from_secs(86_400));
/// let payload = asked.to_payload();
/// assert_eq!(ApprovalAsked::parse(&payload), Some(asked.clone()));
/// assert_eq!(asked.window, Some(Duration::from_secs(1800)));
/// // What a record awaiting approval held before (the reason and tenant).
/// let older = ApprovalAsked::parse(r#"{"reason": "asked", "tenant": null}"#).unwrap();
/// assert_eq!((older.window, older.ttl), (None, None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ApprovalAsked {
    /// Why the operation waits.
    pub reason: String,
    /// The tenant of the call, if it named one.
    pub tenant: Option<String>,
    /// How long an approval of it stays good.
    #[serde(default, rename = "window_ms", with = "millis")]
    pub window: Option<std::time::Duration>,
    /// How long a refusal of it is kept: the tool's TTL.
    #[serde(default, rename = "ttl_ms", with = "millis")]
    pub ttl: Option<std::time::Duration>,
    /// Who took back the approval it had been given, and when
    /// (`Registry::revoke`, `idem revoke`): it awaits a decision again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<Revoked>,
}

/// Who took back an approval not yet used, and when
/// ([`ApprovalAsked::revoked`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Revoked {
    /// Who revoked it, as they were named.
    pub by: String,
    /// When, as RFC 3339 UTC.
    pub at: String,
}

impl ApprovalAsked {
    /// Asked for `reason`, by a call of `tenant`; no terms yet.
    pub fn new(tenant: Option<&str>, reason: impl Into<String>) -> ApprovalAsked {
        ApprovalAsked {
            reason: reason.into(),
            tenant: tenant.map(str::to_owned),
            window: None,
            ttl: None,
            revoked: None,
        }
    }

    /// What the registry asks for a call of `tool` by `tenant` (and asks
    /// again when an approval is revoked): no terms yet.
    pub fn for_tool(tool: &str, tenant: Option<&str>) -> ApprovalAsked {
        ApprovalAsked::new(tenant, format!("a person's approval is asked for `{tool}`"))
    }

    /// With the tool's terms: its approval `window` and its `ttl`.
    pub fn with_terms(mut self, window: std::time::Duration, ttl: std::time::Duration) -> Self {
        self.window = Some(window);
        self.ttl = Some(ttl);
        self
    }

    /// Asked again because `by` revoked, now, the approval it had been
    /// given.
    pub fn revoked_by(mut self, by: &str) -> Self {
        self.revoked = Some(Revoked {
            by: by.to_owned(),
            at: crate::utc::utc(std::time::SystemTime::now()),
        });
        self
    }

    /// The payload an awaiting record keeps: this, as JSON.
    pub fn to_payload(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What an awaiting record's payload says; `None` when it says nothing
    /// readable (sealed, or written by hand).
    pub fn parse(payload: &str) -> Option<ApprovalAsked> {
        serde_json::from_str(payload).ok()
    }
}

/// A duration as whole milliseconds in JSON, absent when `None`.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => serializer.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_millis))
    }
}

/// What a record says of its operation, for the person who looks at it
/// (`idem pending`, `list`, `show`): the call's tenant and run, and its
/// arguments as the tool read them (defaults filled in), but for the
/// fields the tool hides (`hide`), each shown as `"(hidden)"`. The
/// registry writes it with every claim (sealed like a result when it
/// encrypts results); [`ClaimRequest::about`](crate::store::ClaimRequest)
/// carries it to the store.
///
/// ```
/// use idem_runtime::store::About;
/// use serde_json::json;
/// let about = About::new(Some("acme"), Some("run-7"), json!({"amount": 5}));
/// assert_eq!(About::parse(&about.to_payload()), Some(about));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct About {
    /// The tenant of the call, if it named one.
    pub tenant: Option<String>,
    /// The run the operation belongs to; `None` for a tool keyed across
    /// runs (`scope = "global"`).
    pub run: Option<String>,
    /// The arguments, hidden fields replaced.
    pub arguments: serde_json::Value,
    /// Who approved the operation, and when, once a person has
    /// (`Registry::approve`, `idem approve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<Approved>,
}

/// A person's refusal of an operation that awaited their approval
/// (`Registry::deny`, `idem deny`): who refused it, why, and when. Its
/// record is a failed one whose error is this refusal as JSON
/// ([`to_payload`](Self::to_payload), sealed like any error when the
/// registry encrypts results), and every call of the operation is
/// answered [`ToolError::Denied`](crate::ToolError::Denied) with it. A
/// refusal recorded before refusals named who (the text `a person refused
/// this operation: WHY`) reads with `by` and `at` unknown.
///
/// ```
/// use idem_runtime::store::Refusal;
/// let refusal = Refusal::new("ana", "over the limit");
/// assert_eq!(Refusal::parse(&refusal.to_payload()), Some(refusal));
/// let older = Refusal::parse("a person refused this operation: over the limit").unwrap();
/// assert_eq!((older.by, older.reason.as_str()), (None, "over the limit"));
/// // A tool's own error is no refusal.
/// assert_eq!(Refusal::parse("card declined"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Refusal {
    /// Who refused, as they were named; `None` for a refusal recorded
    /// before refusals named who.
    pub by: Option<String>,
    /// Why, as every call of the operation is told.
    pub reason: String,
    /// When, as RFC 3339 UTC; `None` for an older refusal.
    pub at: Option<String>,
}

/// The one member of the JSON object a [`Refusal`] is recorded as: a
/// tool's own error text never is such an object.
const REFUSAL_TAG: &str = "idem/refused";

/// How a refusal recorded before refusals named who begins.
const REFUSED_BEFORE: &str = "a person refused this operation: ";

impl Refusal {
    /// Refused by `by`, now, for `reason`.
    pub fn new(by: &str, reason: &str) -> Refusal {
        Refusal {
            by: Some(by.to_owned()),
            reason: reason.to_owned(),
            at: Some(crate::utc::utc(std::time::SystemTime::now())),
        }
    }

    /// The error its record keeps: `{"idem/refused": {by, reason, at}}`.
    pub fn to_payload(&self) -> String {
        serde_json::json!({ REFUSAL_TAG: self }).to_string()
    }

    /// The refusal a failed record's error is; `None` for a tool's own
    /// error (or a sealed one).
    pub fn parse(error: &str) -> Option<Refusal> {
        if let Some(reason) = error.strip_prefix(REFUSED_BEFORE) {
            return Some(Refusal {
                by: None,
                reason: reason.to_owned(),
                at: None,
            });
        }
        if !error.starts_with('{') {
            return None;
        }
        let mut object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(error).ok()?;
        if object.len() != 1 {
            return None;
        }
        serde_json::from_value(object.remove(REFUSAL_TAG)?).ok()
    }
}

/// An operation that now awaits a person's approval, as the hook of
/// [`RegistryBuilder::on_approval_requested`](crate::RegistryBuilder::on_approval_requested)
/// is told of it: to post it where a person will see it (a chat, a queue),
/// with the key they approve (`idem approve KEY`, `Registry::approve`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The tool.
    pub tool: String,
    /// The operation's key: what the person approves or refuses.
    pub key: crate::key::IdemKey,
    /// What the operation is: the call's tenant and run, and its
    /// arguments as the tool read them, hidden fields replaced. Never
    /// sealed: the hook runs in the application.
    pub about: About,
}

/// Who approved an operation, and when ([`About::approved`]), and the
/// terms it was approved on (so that an approval revoked from a shell
/// awaits again on them); an approval recorded before it kept its terms
/// reads with them `None`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Approved {
    /// The approver, as they were named.
    pub by: String,
    /// When, as RFC 3339 UTC (`2026-12-05T07:15:00Z`).
    pub at: String,
    /// How long the approval stays good: the tool's `approval_window`.
    #[serde(
        default,
        rename = "window_ms",
        with = "millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub window: Option<std::time::Duration>,
    /// How long a refusal of the operation is kept: the tool's TTL.
    #[serde(
        default,
        rename = "ttl_ms",
        with = "millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl: Option<std::time::Duration>,
}

impl About {
    /// What a record of a call of `tenant` in `run` with `arguments` says.
    pub fn new(tenant: Option<&str>, run: Option<&str>, arguments: serde_json::Value) -> About {
        About {
            tenant: tenant.map(str::to_owned),
            run: run.map(str::to_owned),
            arguments,
            approved: None,
        }
    }

    /// The text a record keeps: JSON.
    pub fn to_payload(&self) -> String {
        let mut payload = serde_json::json!({
            "tenant": self.tenant, "run": self.run, "arguments": self.arguments
        });
        if let Some(approved) = &self.approved {
            payload["approved"] = serde_json::to_value(approved).unwrap_or_default();
        }
        payload.to_string()
    }

    /// The about an approval writes over a record's ([`Outcome::Approved`](super::Outcome::Approved)):
    /// what the record said (`about`, JSON; anything else is dropped),
    /// with `approved`: `by`, now, on the terms the awaiting record asked
    /// on (`asked`'s window and TTL).
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_runtime::store::{About, ApprovalAsked};
    /// let asked = ApprovalAsked::new(Some("acme"), "asked")
    ///     .with_terms(Duration::from_secs(1800), Duration::from_secs(86_400));
    /// let text = About::approval(Some(r#"{"tenant":"acme","run":"r","arguments":{"n":1}}"#), "ana", &asked);
    /// let about = About::parse(&text).expect("an About");
    /// let approved = about.approved.expect("approved");
    /// assert_eq!((approved.by.as_str(), approved.window), ("ana", Some(Duration::from_secs(1800))));
    /// assert_eq!(about.arguments["n"], 1);
    /// ```
    pub fn approval(about: Option<&str>, by: &str, asked: &ApprovalAsked) -> String {
        let mut object = match about.and_then(|text| serde_json::from_str(text).ok()) {
            Some(serde_json::Value::Object(object)) => object,
            _ => serde_json::Map::new(),
        };
        let approved = Approved {
            by: by.to_owned(),
            at: crate::utc::utc(std::time::SystemTime::now()),
            window: asked.window,
            ttl: asked.ttl,
        };
        let approved = serde_json::to_value(approved).unwrap_or_default();
        object.insert("approved".into(), approved);
        serde_json::Value::Object(object).to_string()
    }

    /// What `text` says, when it is an `About` (not sealed, nor written by
    /// hand).
    pub fn parse(text: &str) -> Option<About> {
        serde_json::from_str(text).ok()
    }
}

/// One record as an operator sees it. Times are durations on the store's
/// own clock, measured when the store answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordInfo {
    /// The key the record is stored under.
    pub key: IdemKey,
    /// Where it is in its life.
    pub state: RecordState,
    /// The tool whose call made it; `None` for a record written before
    /// records named their tool (record format 1).
    pub tool: Option<String>,
    /// The attempt number: how many earlier claims of the operation ended
    /// without a recorded outcome.
    pub attempt: u32,
    /// The fingerprint of the arguments.
    pub fingerprint: Fingerprint,
    /// How long ago the record entered its state (was claimed, released,
    /// settled done, failed or unknown); `None` for a record of format 1.
    pub age: Option<Duration>,
    /// For a running record, how long its lease has left (zero once it has
    /// lapsed, when the next claim takes the key over); `None` otherwise.
    pub lease_left: Option<Duration>,
    /// How long until the store forgets the record.
    pub expires_in: Duration,
    /// For a running record, the holder's lease token, with which
    /// [`IdemStore::settle`](crate::IdemStore::settle) with
    /// [`Outcome::Released`](crate::store::Outcome::Released) ends the claim;
    /// for an unknown one, the token that settled it, with which an
    /// operator resolves it; for an awaiting one, the token that asked,
    /// with which a person decides it; for an approved one, that token
    /// still, with which the approval is revoked; `None` otherwise.
    pub holder: Option<LeaseToken>,
    /// The recorded result (done), error (failed), reason the outcome is
    /// unknown ([`UnknownNote`]) or why and on what terms an approval is
    /// asked ([`ApprovalAsked`], awaiting), as stored (sealed when the
    /// registry encrypts results).
    /// Filled by `inspect`; `None` from `scan`, which never reads payloads.
    pub payload: Option<String>,
    /// What the record says of its operation (an [`About`], sealed when
    /// the registry encrypts results), as its claim gave it; `None` when
    /// the claim gave none, for a record written before records said
    /// (SQLite and PostgreSQL schema 2, Redis format 1 and 2), and from
    /// `scan`.
    pub about: Option<String>,
}

impl RecordInfo {
    /// A record with what every record has; a store sets the other fields
    /// (`tool`, `age`, `lease_left`, `holder`, `payload`, `about`) where it
    /// knows them.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_runtime::store::{RecordInfo, RecordState};
    /// use idem_runtime::{Fingerprint, IdemKey};
    ///
    /// let mut record = RecordInfo::new(
    ///     IdemKey::from_raw("idem:00"),
    ///     RecordState::Done,
    ///     0,
    ///     Fingerprint::from_bytes(&[0; 32]).unwrap(),
    ///     Duration::from_secs(3600),
    /// );
    /// record.tool = Some("charge_card".into());
    /// record.payload = Some(r#"{"charge":"ch_1"}"#.into());
    /// assert!(idem_runtime::store::ScanFilter::namespace("").tool("charge_card").admits(&record));
    /// ```
    pub fn new(
        key: IdemKey,
        state: RecordState,
        attempt: u32,
        fingerprint: Fingerprint,
        expires_in: Duration,
    ) -> RecordInfo {
        RecordInfo {
            key,
            state,
            tool: None,
            attempt,
            fingerprint,
            age: None,
            lease_left: None,
            expires_in,
            holder: None,
            payload: None,
            about: None,
        }
    }
}

/// Which records [`IdemStore::scan`](crate::IdemStore::scan) answers: those
/// of one namespace, of a state, of a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScanFilter {
    /// The namespace ([`RegistryBuilder::namespace`](crate::RegistryBuilder::namespace));
    /// empty for the default. Only keys of the form this crate derives
    /// (`[<namespace>:]idem:<digest>`) are scanned.
    pub namespace: String,
    /// Only records in this state.
    pub state: Option<RecordState>,
    /// Only records of this tool (so never records of format 1).
    pub tool: Option<String>,
}

impl ScanFilter {
    /// Every record of `namespace` (empty for the default).
    pub fn namespace(namespace: impl Into<String>) -> ScanFilter {
        ScanFilter {
            namespace: namespace.into(),
            ..ScanFilter::default()
        }
    }

    /// Only records in `state`.
    pub fn state(mut self, state: RecordState) -> ScanFilter {
        self.state = Some(state);
        self
    }

    /// Only records of `tool`.
    pub fn tool(mut self, tool: impl Into<String>) -> ScanFilter {
        self.tool = Some(tool.into());
        self
    }

    /// The prefix every key of the namespace starts with.
    pub fn key_prefix(&self) -> String {
        if self.namespace.is_empty() {
            "idem:".to_owned()
        } else {
            format!("{}:idem:", self.namespace)
        }
    }

    /// Whether `record` passes the state and tool filters (the namespace is
    /// the scan's own business).
    pub fn admits(&self, record: &RecordInfo) -> bool {
        self.state.is_none_or(|s| s == record.state)
            && self
                .tool
                .as_deref()
                .is_none_or(|t| record.tool.as_deref() == Some(t))
    }
}

/// One page of a scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScanPage {
    /// The live records of the page that pass the filter, payloads left
    /// out. A page may hold none while the scan goes on.
    pub records: Vec<RecordInfo>,
    /// Where the next page starts; `None` when the scan is over.
    pub next: Option<String>,
}

impl ScanPage {
    /// A page of `records`, followed by the page at `next`.
    pub fn new(records: Vec<RecordInfo>, next: Option<String>) -> ScanPage {
        ScanPage { records, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_reads_back_as_itself() {
        for state in RecordState::ALL {
            assert_eq!(state.as_str().parse(), Ok(state));
        }
        assert_eq!(RecordState::parse("Running"), None);
        assert_eq!("".parse::<RecordState>(), Err(UnknownState(String::new())));
    }
}
