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
}

impl UnknownNote {
    /// A note of `reason`, for a call of `tenant`.
    pub fn new(tenant: Option<&str>, reason: impl Into<String>) -> UnknownNote {
        UnknownNote {
            reason: reason.into(),
            tenant: tenant.map(str::to_owned),
        }
    }

    /// The payload an unknown record keeps: the note as JSON.
    pub fn to_payload(&self) -> String {
        serde_json::json!({ "reason": self.reason, "tenant": self.tenant }).to_string()
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
}

impl ApprovalAsked {
    /// Asked for `reason`, by a call of `tenant`; no terms yet.
    pub fn new(tenant: Option<&str>, reason: impl Into<String>) -> ApprovalAsked {
        ApprovalAsked {
            reason: reason.into(),
            tenant: tenant.map(str::to_owned),
            window: None,
            ttl: None,
        }
    }

    /// With the tool's terms: its approval `window` and its `ttl`.
    pub fn with_terms(mut self, window: std::time::Duration, ttl: std::time::Duration) -> Self {
        self.window = Some(window);
        self.ttl = Some(ttl);
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

/// The error a refused operation's record keeps, replayed to every call of
/// it (`Registry::deny`, `idem deny`): that a person refused it, and why.
///
/// ```
/// assert_eq!(
///     idem_runtime::store::refusal("over the limit"),
///     "a person refused this operation: over the limit"
/// );
/// ```
pub fn refusal(reason: &str) -> String {
    format!("{REFUSED}{reason}")
}

/// How every [`refusal`] begins.
const REFUSED: &str = "a person refused this operation: ";

/// Whether a recorded error is a person's [`refusal`]: its replays are
/// `idem.outcome = "denied"`.
pub(crate) fn is_refusal(error: &str) -> bool {
    error.starts_with(REFUSED)
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

/// Who approved an operation, and when ([`About::approved`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Approved {
    /// The approver, as they were named.
    pub by: String,
    /// When, as RFC 3339 UTC (`2026-12-05T07:15:00Z`).
    pub at: String,
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
            payload["approved"] = serde_json::json!({ "by": approved.by, "at": approved.at });
        }
        payload.to_string()
    }

    /// The about an approval writes over a record's ([`Outcome::Approved`](super::Outcome::Approved)):
    /// what the record said (`about`, JSON; anything else is dropped),
    /// with `approved`: `by`, now.
    ///
    /// ```
    /// use idem_runtime::store::About;
    /// let text = About::approval(Some(r#"{"tenant":"acme","run":"r","arguments":{"n":1}}"#), "ana");
    /// let about = About::parse(&text).expect("an About");
    /// assert_eq!(about.approved.map(|a| a.by).as_deref(), Some("ana"));
    /// assert_eq!(about.arguments["n"], 1);
    /// ```
    pub fn approval(about: Option<&str>, by: &str) -> String {
        let mut object = match about.and_then(|text| serde_json::from_str(text).ok()) {
            Some(serde_json::Value::Object(object)) => object,
            _ => serde_json::Map::new(),
        };
        let at = crate::utc::utc(std::time::SystemTime::now());
        object.insert("approved".into(), serde_json::json!({ "by": by, "at": at }));
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
    /// operator resolves it; `None` otherwise.
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
