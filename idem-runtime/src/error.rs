//! Errors of tool calls, stores and registry construction.

use std::time::{Duration, SystemTime};

use crate::key::IdemKey;
use crate::utc::utc;

/// A boxed error from a store backend.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a store operation did not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The caller's lease token no longer matches the record: another worker
    /// claimed the key after this one's lease lapsed, or a result has been
    /// recorded. Nothing was changed.
    #[error("lease lost: another worker has claimed this key or recorded its result")]
    LeaseLost,
    /// The store could not be reached: the connection was refused, reset
    /// or closed, or could not be made in time.
    #[error("store unavailable: {source}")]
    Unavailable {
        /// What the backend reported.
        #[source]
        source: BoxError,
    },
    /// The store answered that it cannot serve now, but will: it is
    /// loading its data after a restart, failing over, or busy (a lock
    /// another connection holds, a long script). Nothing was changed.
    #[error("store busy: {source}")]
    Busy {
        /// What the backend reported.
        #[source]
        source: BoxError,
    },
    /// The store is out of memory or disk space (Redis `OOM` under
    /// `noeviction`, PostgreSQL `disk_full` or `out_of_memory`, SQLite
    /// `SQLITE_FULL`): nothing was written. What it holds can still be
    /// read, so a duplicate of a recorded operation is still replayed.
    #[error("store is full: {source}")]
    Full {
        /// What the backend reported.
        #[source]
        source: BoxError,
    },
    /// The store did not answer within the bounded time.
    #[error("store did not answer `{op}` within {after:?}")]
    Timeout {
        /// The operation that timed out (`claim`, `settle_done`, ...).
        op: &'static str,
        /// The bound that was exceeded.
        after: Duration,
    },
    /// A record under our key could not be understood: malformed, written by
    /// something else, from an unknown format version, or a cached result
    /// that no longer fits the tool's result type.
    #[error("unreadable record under `{key}`: {reason}")]
    Corrupt {
        /// The stored key.
        key: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The store does not offer the operation: scanning a store that keeps
    /// no keys ([`MemoryStore`](crate::MemoryStore)), or an operation a
    /// custom store left out.
    #[error("the {backend} store cannot {op}: {why}")]
    Unsupported {
        /// The store's [`backend`](crate::IdemStore::backend).
        backend: &'static str,
        /// The operation (`scan`, `inspect`).
        op: &'static str,
        /// Why not.
        why: &'static str,
    },
    /// The backend answered with an error of its own (a failed statement, a
    /// script error, ...).
    #[error("store backend error: {source}")]
    Backend {
        /// What the backend reported.
        #[source]
        source: BoxError,
    },
}

impl StoreError {
    /// Whether the store could not be reached
    /// ([`Unavailable`](Self::Unavailable)): a connection refused, reset or
    /// not made in time. A store that answered ([`Busy`](Self::Busy),
    /// [`Full`](Self::Full)) is reachable, and a [`Timeout`](Self::Timeout)
    /// is no proof either: the store may be slow, or waiting for a lock,
    /// and may have done what was asked.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }

    /// Wraps a connection-level failure.
    pub fn unavailable(source: impl Into<BoxError>) -> StoreError {
        StoreError::Unavailable {
            source: source.into(),
        }
    }

    /// Wraps a store's answer that it cannot serve now.
    pub fn busy(source: impl Into<BoxError>) -> StoreError {
        StoreError::Busy {
            source: source.into(),
        }
    }

    /// Wraps a store's answer that it is out of memory or space.
    pub fn full(source: impl Into<BoxError>) -> StoreError {
        StoreError::Full {
            source: source.into(),
        }
    }

    /// Wraps a backend's own error.
    pub fn backend(source: impl Into<BoxError>) -> StoreError {
        StoreError::Backend {
            source: source.into(),
        }
    }

    /// A malformed record under `key`.
    pub fn corrupt(key: impl Into<String>, reason: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// Whether the same operation may succeed if tried again later
    /// (the store was unreachable, slow, busy or full).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable { .. }
                | StoreError::Timeout { .. }
                | StoreError::Busy { .. }
                | StoreError::Full { .. }
        )
    }
}

/// Why a tool call returned no result.
///
/// Every variant has [`model_message`](ToolError::model_message), a short
/// text to hand back to the model as the tool's result, and
/// [`is_retryable`](ToolError::is_retryable).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool of that name is registered.
    #[error("unknown tool `{name}`")]
    UnknownTool {
        /// The name that was asked for.
        name: String,
    },
    /// The arguments do not fit the tool's parameters. Nothing was stored
    /// and nothing ran.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// Which field, and what was expected.
        message: String,
    },
    /// The run id was empty: without it, run-scoped keys would collide
    /// across runs.
    #[error("the run id must not be empty")]
    InvalidRunId,
    /// The call's operation key
    /// ([`CallContext::operation_key`](crate::CallContext::operation_key))
    /// was empty: every call carrying it would be one operation. Nothing
    /// ran.
    #[error("the operation key must not be empty")]
    InvalidOperationKey,
    /// The call's tenant ([`CallContext::tenant`](crate::CallContext::tenant))
    /// was empty: a tenant the caller meant to name and lost on the way
    /// (an empty claim, a missing header). Nothing ran.
    #[error("the tenant must not be empty")]
    InvalidTenant,
    /// The registry requires a tenant on every call
    /// ([`RegistryBuilder::require_tenant`](crate::RegistryBuilder::require_tenant)),
    /// and this call named none. Nothing ran.
    #[error(
        "this registry requires a tenant on every call (CallContext::tenant), and none was given"
    )]
    TenantRequired,
    /// The same operation is running right now (in this process or another).
    #[error("`{tool}` is already running with these arguments (key {key})")]
    InFlight {
        /// The tool.
        tool: String,
        /// The operation's key.
        key: String,
    },
    /// The key is held by an operation with different arguments (a tool
    /// keyed on a subset of its arguments was called with the same key
    /// fields but another value in a checked field). Nothing ran.
    #[error("`{tool}`: key {key} was already used with different arguments{}", differing(.fields))]
    KeyConflict {
        /// The tool.
        tool: String,
        /// The operation's key.
        key: String,
        /// The paths of the checked fields whose values differ from the
        /// recorded operation's (`order.note`; never the values), in path
        /// order. Empty when the record cannot tell: it was written before
        /// records kept field tags, or the field was absent from this call.
        fields: Vec<String>,
    },
    /// The tool itself returned an error (now, or recorded earlier and
    /// replayed).
    #[error("`{tool}` failed: {message}")]
    Failed {
        /// The tool.
        tool: String,
        /// The tool error's `Display`.
        message: String,
        /// Whether the failure was recorded and will be replayed to
        /// duplicates (a permanent error) or the key was released so a retry
        /// runs the tool again (a transient one).
        permanent: bool,
    },
    /// The store could not be reached or answered nonsense. A write tool's
    /// body did not run.
    #[error("`{tool}`: {source}")]
    Store {
        /// The tool.
        tool: String,
        /// What the store reported.
        #[source]
        source: StoreError,
    },
    /// The tool ran, but its lease lapsed and another worker took the key
    /// over before the result was recorded; its result was not recorded.
    #[error("`{tool}` ran but lost its lease on key {key}; its result was not recorded")]
    LeaseLost {
        /// The tool.
        tool: String,
        /// The operation's key.
        key: String,
    },
    /// Nobody knows whether the operation took effect (an earlier claim
    /// lapsed before recording anything), and the tool may not run it again
    /// on its own ([`OnUncertain::Refuse`](crate::OnUncertain::Refuse)).
    /// Nothing ran now. Every duplicate gets this until an operator
    /// resolves the record ([`Registry::resolve`](crate::Registry::resolve),
    /// `idem resolve`).
    #[error(
        "`{tool}`: nobody knows whether operation {key} took effect (attempt {attempt}, unknown since {}); it will not run again until an operator resolves it (idem pending, idem resolve)",
        utc(*.since)
    )]
    OutcomeUnknown {
        /// The tool.
        tool: String,
        /// The operation's key.
        key: String,
        /// The record's attempt: how many claims of the operation ended
        /// without a recorded outcome before the one that found it
        /// uncertain.
        attempt: u32,
        /// Since when, by the store's clock as this process reckons it.
        since: SystemTime,
    },
    /// The operation waits for a person's approval, and nothing ran: its
    /// tool needs one, and none was given for these very arguments yet
    /// (`Registry::approve`, `idem approve`). Every duplicate gets this
    /// until a person approves (the next call then runs it, once) or
    /// refuses (every call then gets the refusal).
    #[error(
        "`{tool}`: operation {key} waits for a person's approval (asked {}); nothing ran (idem approvals, idem approve)",
        utc(*.since)
    )]
    ApprovalRequired {
        /// The tool.
        tool: String,
        /// The operation's key, which the approver approves.
        key: IdemKey,
        /// When the approval was asked, by the store's clock as this
        /// process reckons it.
        since: SystemTime,
        /// How long an approval stays good once given: the next call of
        /// the operation must come within it (the tool's
        /// `approval_window`).
        window: Duration,
    },
    /// A person refused the operation when it awaited their approval
    /// (`Registry::deny`, `idem deny`), and nothing ran: every call of it
    /// is answered this, for the tool's TTL.
    #[error("`{tool}`: operation {key} was refused by {}: {reason}", .by.as_deref().unwrap_or("a person"))]
    Denied {
        /// The tool.
        tool: String,
        /// The operation's key.
        key: IdemKey,
        /// Who refused it; `None` for a refusal recorded before refusals
        /// named who.
        by: Option<String>,
        /// Why.
        reason: String,
    },
}

/// `fields` as `` `a`, `b` and `c` `` (with `or` for `and` where asked).
fn field_list(fields: &[String], last: &str) -> String {
    let quoted: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
    match quoted.split_last() {
        Some((only, [])) => only.clone(),
        Some((end, rest)) => format!("{} {last} {end}", rest.join(", ")),
        None => String::new(),
    }
}

/// A duration as the model is told it: `30 minutes`, `1 hour`, `2 days`
/// (the largest unit it is a whole number of; seconds otherwise).
fn spoken(d: Duration) -> String {
    let s = d.as_secs();
    let (n, unit) = match s {
        _ if s >= 86_400 && s.is_multiple_of(86_400) => (s / 86_400, "day"),
        _ if s >= 3600 && s.is_multiple_of(3600) => (s / 3600, "hour"),
        _ if s >= 60 && s.is_multiple_of(60) => (s / 60, "minute"),
        _ => (s.max(1), "second"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// What [`ToolError::KeyConflict`]'s message adds when it knows the fields.
fn differing(fields: &[String]) -> String {
    match fields {
        [] => String::new(),
        [_] => format!(" (`{}` differs)", fields[0]),
        _ => format!(" ({} differ)", field_list(fields, "and")),
    }
}

impl ToolError {
    /// A short text for the model, saying what happened and what to do.
    pub fn model_message(&self) -> String {
        match self {
            ToolError::UnknownTool { name } => {
                format!("Error: there is no tool named `{name}`. Use one of the tools provided.")
            }
            ToolError::InvalidArgs { message, .. } => {
                format!("Error: invalid arguments: {message}. Fix the arguments and call again.")
            }
            ToolError::InvalidRunId => {
                "Error: the tool could not run because of an internal error (no run id). Nothing was done."
                    .to_owned()
            }
            ToolError::InvalidOperationKey => {
                "Error: the tool could not run because of an internal error (an empty operation key). Nothing was done."
                    .to_owned()
            }
            ToolError::TenantRequired => {
                "Error: the tool could not run because of an internal error (no tenant). Nothing was done."
                    .to_owned()
            }
            ToolError::InvalidTenant => {
                "Error: the tool could not run because of an internal error (an empty tenant). Nothing was done."
                    .to_owned()
            }
            ToolError::InFlight { .. } => {
                "This exact operation is already in progress. Do not start it again; it will complete on its own."
                    .to_owned()
            }
            ToolError::KeyConflict { fields, .. } if !fields.is_empty() => format!(
                "Error: an operation with the same identifying fields but another {} was already performed. Nothing was done now; check what was done before changing anything.",
                field_list(fields, "or")
            ),
            ToolError::KeyConflict { .. } => {
                "Error: an operation with the same identifying fields but different details was already performed. Nothing was done now; check what was done before changing anything."
                    .to_owned()
            }
            ToolError::Failed {
                message, permanent, ..
            } => {
                if *permanent {
                    format!("Error: {message}. Repeating the same call will give the same result.")
                } else {
                    format!("Error: {message}")
                }
            }
            ToolError::Store { .. } => {
                "Error: the tool is temporarily unavailable. Nothing was done; you may try again later."
                    .to_owned()
            }
            ToolError::LeaseLost { .. } => {
                "The operation was carried out, but another worker took it over before its result was saved. Calling it again returns the recorded result."
                    .to_owned()
            }
            ToolError::OutcomeUnknown { .. } => {
                "Error: it is not known whether this operation was carried out: an earlier attempt was interrupted before it could report. Do not call it again, and do not try another way to do the same thing. Tell the user that the outcome is unknown and that a person must check it; it will not be repeated automatically."
                    .to_owned()
            }
            ToolError::ApprovalRequired { key, window, .. } => format!(
                "This operation needs a person's approval before it runs, and nothing was done. It waits as operation {key}: tell the user so, with that key, which whoever approves such operations (the user, or someone else) needs to find it. Once it is approved, call the tool again with exactly the same arguments within {}; calling it before then, or with other arguments, will not run it.",
                spoken(*window)
            ),
            ToolError::Denied { reason, .. } => format!(
                "A person refused this operation, and nothing was done. Their reason: {reason}. Do not call it again and do not try another way to do the same thing; tell the user it was refused, and why."
            ),
        }
    }

    /// Whether the same call, made again later, may succeed.
    ///
    /// `InFlight`, `Store`, `LeaseLost` (a retry replays the recorded
    /// result), `ApprovalRequired` (once approved, the same call runs) and
    /// transient `Failed` errors are retryable; unknown tools, invalid
    /// arguments, key conflicts, permanent failures, refusals and unknown
    /// outcomes are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            ToolError::UnknownTool { .. }
            | ToolError::InvalidArgs { .. }
            | ToolError::InvalidRunId
            | ToolError::InvalidOperationKey
            | ToolError::InvalidTenant
            | ToolError::TenantRequired
            | ToolError::KeyConflict { .. }
            | ToolError::OutcomeUnknown { .. }
            | ToolError::Denied { .. } => false,
            ToolError::InFlight { .. }
            | ToolError::LeaseLost { .. }
            | ToolError::ApprovalRequired { .. } => true,
            ToolError::Failed { permanent, .. } => !permanent,
            ToolError::Store { source, .. } => !matches!(source, StoreError::Corrupt { .. }),
        }
    }

    /// The kind of error, in snake case (`"invalid_args"`, `"in_flight"`,
    /// `"key_conflict"`, ...): low-cardinality, for a span's `error.type`
    /// and metric labels.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::UnknownTool { .. } => "unknown_tool",
            ToolError::InvalidArgs { .. } => "invalid_args",
            ToolError::InvalidRunId => "invalid_run_id",
            ToolError::InvalidOperationKey => "invalid_operation_key",
            ToolError::InvalidTenant => "invalid_tenant",
            ToolError::TenantRequired => "tenant_required",
            ToolError::InFlight { .. } => "in_flight",
            ToolError::KeyConflict { .. } => "key_conflict",
            ToolError::Failed { .. } => "failed",
            ToolError::Store { .. } => "store",
            ToolError::LeaseLost { .. } => "lease_lost",
            ToolError::OutcomeUnknown { .. } => "outcome_unknown",
            ToolError::ApprovalRequired { .. } => "approval_required",
            ToolError::Denied { .. } => "denied",
        }
    }
}

/// Why an operator's decision changed nothing: a resolution of an unknown
/// outcome ([`Registry::resolve`](crate::Registry::resolve)), or an approval or
/// refusal ([`Registry::approve`](crate::Registry::approve),
/// [`Registry::deny`](crate::Registry::deny)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// No record under the key: it expired, was never written, or the key
    /// is mistyped.
    #[error("no record under key {key} (expired, never written, or mistyped)")]
    NotFound {
        /// The key.
        key: String,
    },
    /// The record's outcome is not unknown: only an unknown one is
    /// resolved (a stuck running claim is released instead: `idem
    /// release`).
    #[error(
        "the record under key {key} is {state}, not unknown: only an unknown outcome is resolved"
    )]
    NotUnknown {
        /// The key.
        key: String,
        /// What the record is.
        state: crate::store::RecordState,
    },
    /// The record does not await a person's approval: only an awaiting
    /// one is approved or refused ([`Registry::approve`](crate::Registry::approve),
    /// [`Registry::deny`](crate::Registry::deny)): it was decided already,
    /// or never asked.
    #[error(
        "the record under key {key} is {state}, not awaiting approval: only an operation awaiting a person's approval is approved or refused"
    )]
    NotAwaiting {
        /// The key.
        key: String,
        /// What the record is.
        state: crate::store::RecordState,
    },
    /// The record is not an approval still unused: only one is revoked
    /// ([`Registry::revoke`](crate::Registry::revoke)). The message says
    /// what it is instead: awaiting (nothing to revoke), used (running or
    /// done), refused or failed, released.
    #[error("{}", not_approved(key, *state))]
    NotApproved {
        /// The key.
        key: String,
        /// What the record is.
        state: crate::store::RecordState,
    },
    /// The record changed while it was being resolved: another resolution
    /// came first.
    #[error(
        "the record under key {key} changed while it was being resolved (another resolution came first); look at it again"
    )]
    Raced {
        /// The key.
        key: String,
    },
    /// A [`Resolution::Done`](crate::Resolution::Done) result the tool
    /// could not replay: not of its result type, or too large.
    #[error("the result cannot be recorded for `{tool}`: {message}")]
    InvalidResult {
        /// The record's tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// [`ResolveError::NotApproved`]'s message: what the record is instead.
fn not_approved(key: &str, state: crate::store::RecordState) -> String {
    use crate::store::RecordState as S;
    let is = match state {
        S::Awaiting => "awaits approval: it is not approved, so there is nothing to revoke",
        S::Running => "is running: a call is carrying it out (any approval it had is used)",
        S::Done => "is done: it ran (any approval it had is used)",
        S::Failed => "failed: it was refused, or it ran and failed",
        S::Unknown => "is of unknown outcome: it began to run (any approval it had is used)",
        S::Released => "was released: it holds no approval",
        S::Approved => "is approved",
    };
    format!("the record under key {key} {is}; only an approval no call has used yet is revoked")
}

/// Why a [`Registry`](crate::Registry) could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two tools have the same name.
    #[error("two tools are named `{name}`; tool names must be unique")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// A tool name does not match `^[A-Za-z_][A-Za-z0-9_-]{0,63}$`.
    #[error(
        "invalid tool name `{name}`: use 1 to 64 ASCII letters, digits, `_` or `-`, not starting with a digit or `-`"
    )]
    InvalidName {
        /// The name.
        name: String,
    },
    /// A tool has an empty description.
    #[error("tool `{name}` has no description; the model needs one to know when to call it")]
    MissingDescription {
        /// The tool.
        name: String,
    },
    /// The namespace is empty or has characters other than
    /// ASCII letters, digits, `_`, `-`, `.` and `:`.
    #[error(
        "invalid namespace `{namespace}`: use 1 to 128 ASCII letters, digits, `_`, `-`, `.` or `:`"
    )]
    InvalidNamespace {
        /// The namespace.
        namespace: String,
    },
    /// A duration setting is out of range.
    #[error("tool `{tool}`: {message}")]
    InvalidSetting {
        /// The tool (or `*` for a registry-wide default).
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// A tool's argument schema could not be generated or is not an object
    /// schema.
    #[error("tool `{tool}`: invalid input schema: {message}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
}
