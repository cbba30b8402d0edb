//! The write settings' vocabulary, defined once: each policy's names and
//! what they mean, the duration grammar, and the bounds. `#[write_tool(..)]`
//! parses its arguments with these, the gateway its TOML, and the runtime
//! re-exports the policies as the builder's types, so the three accept the
//! same spellings and answer a mistake in the same words.

use core::fmt;
use core::time::Duration;

/// The smallest lease accepted: the heartbeat renews every third of it.
pub const MIN_LEASE: Duration = Duration::from_millis(10);

/// How long a person's approval of an operation stays good unless the
/// tool's `approval_window` says otherwise: the next call of the operation
/// within it runs the body; after it, the approval lapses and the next
/// call asks again.
pub const APPROVAL_WINDOW: Duration = Duration::from_secs(3600);

/// The smallest `max_result_bytes` accepted: room for an error message.
pub const MIN_RESULT_BYTES: usize = 1024;

/// The longest duration a setting may have (100 years, of 365.25 days):
/// longer than any record needs keeping, and within what every store can
/// keep (a Redis expiry, a PostgreSQL timestamp) and a clock can add up.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 31_557_600);

/// A setting's value that cannot be taken, and why; its `Display` is the
/// sentence every front (attribute, TOML, CLI flag) shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingError<'a> {
    /// Not `<whole number><unit>`.
    NotADuration {
        /// What was given.
        given: &'a str,
    },
    /// A zero duration where the setting must be positive.
    Zero {
        /// What was given.
        given: &'a str,
    },
    /// Longer than [`MAX_DURATION`].
    TooLong {
        /// What was given.
        given: &'a str,
    },
    /// Not one of the setting's names.
    NotAName {
        /// What was given.
        given: &'a str,
        /// The setting's names and what each means, as a sentence.
        expected: &'static str,
    },
}

impl fmt::Display for SettingError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SettingError::NotADuration { given } => write!(
                f,
                "invalid duration \"{given}\": write a whole number and a unit (ms, s, m, h or d), e.g. \"30s\", \"500ms\" or \"24h\""
            ),
            SettingError::Zero { given } => {
                write!(f, "the duration \"{given}\" is zero: it must be positive")
            }
            SettingError::TooLong { given } => write!(
                f,
                "the duration \"{given}\" is longer than 100 years, the longest a setting may be"
            ),
            SettingError::NotAName { expected, .. } => f.write_str(expected),
        }
    }
}

/// What each named setting's values are, as a sentence naming each: the
/// text of [`SettingError::NotAName`].
const SCOPE: &str = "`scope` is \"run\" (one operation per agent run, the default) or \"global\" (one operation across all runs)";
const ON_IN_FLIGHT: &str = "`on_in_flight` is \"reject\" (answer InFlight at once) or \"wait(<duration>)\", e.g. \"wait(5s)\"";
const ON_STORE_ERROR: &str = "`on_store_error` is \"fail_closed\" (when the store cannot be reached, do not run: the default) or \"run\" (run without a claim, recording nothing: a duplicate may run again)";
const APPROVAL: &str = "`approval` is \"never\" (the default), \"required\" (a person approves each operation before it runs) or \"ask\" (as required, and over MCP the person at the client is asked); `approval = path` lets a function of the arguments decide";
const ON_UNCERTAIN: &str = "`on_uncertain` is \"rerun\" (when an earlier attempt may or may not have taken effect, run again with the same key: the default) or \"refuse\" (at most once: never run again on its own; an operator resolves it)";

/// A positive duration, `"<whole number><unit>"` with unit `ms`, `s`, `m`,
/// `h` or `d`, at most [`MAX_DURATION`]: how `lease`, `ttl` and `max_hold`
/// are written.
///
/// ```
/// use core::time::Duration;
/// assert_eq!(idem_rules::parse_duration("500ms"), Ok(Duration::from_millis(500)));
/// assert_eq!(idem_rules::parse_duration("24h"), Ok(Duration::from_secs(86_400)));
/// assert!(idem_rules::parse_duration("30 seconds").is_err());
/// assert!(idem_rules::parse_duration("0s").is_err());
/// ```
pub fn parse_duration(given: &str) -> Result<Duration, SettingError<'_>> {
    match duration(given)? {
        d if d.is_zero() => Err(SettingError::Zero { given }),
        d => Ok(d),
    }
}

/// [`parse_duration`], zero allowed.
fn duration(given: &str) -> Result<Duration, SettingError<'_>> {
    let bad = SettingError::NotADuration { given };
    let split = given.find(|c: char| !c.is_ascii_digit()).ok_or(bad)?;
    let (number, unit) = given.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad)?;
    let scale: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad),
    };
    let millis = number.checked_mul(scale).ok_or(bad)?;
    let duration = Duration::from_millis(millis);
    if duration > MAX_DURATION {
        return Err(SettingError::TooLong { given });
    }
    Ok(duration)
}

/// One of `names`, by its name; `expected` is the error's text.
fn by_name<'a, T: Copy>(
    expected: &'static str,
    names: &[(&str, T)],
    given: &'a str,
) -> Result<T, SettingError<'a>> {
    names
        .iter()
        .find(|(name, _)| *name == given)
        .map(|(_, value)| *value)
        .ok_or(SettingError::NotAName { given, expected })
}

/// The name `value` has in `names`.
fn name_of<T: PartialEq>(names: &[(&'static str, T)], value: &T) -> &'static str {
    names
        .iter()
        .find(|(_, v)| v == value)
        .map_or("", |(name, _)| name)
}

/// How a write tool scopes its keys: `scope = "run" | "global"`.
///
/// `Run` keys make a duplicate within one agent run harmless (a retried
/// turn, a repeated tool call, a resumed checkpoint) while letting another
/// run do the same thing again; `Global` keys make the operation happen
/// once, whichever run asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ScopeKind {
    /// Per run (the default).
    #[default]
    Run,
    /// Across all runs.
    Global,
}

impl ScopeKind {
    const NAMES: [(&'static str, ScopeKind); 2] =
        [("run", ScopeKind::Run), ("global", ScopeKind::Global)];

    /// `"run"` or `"global"`.
    ///
    /// ```
    /// use idem_rules::ScopeKind;
    /// assert_eq!(ScopeKind::parse("global"), Ok(ScopeKind::Global));
    /// assert!(ScopeKind::parse("tenant").is_err());
    /// ```
    pub fn parse(given: &str) -> Result<ScopeKind, SettingError<'_>> {
        by_name(SCOPE, &Self::NAMES, given)
    }

    /// The name [`parse`](Self::parse) takes.
    pub fn name(self) -> &'static str {
        name_of(&Self::NAMES, &self)
    }
}

/// What a duplicate does when it arrives while the first call still runs:
/// `on_in_flight = "reject" | "wait(<duration>)"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnInFlight {
    /// Answer `ToolError::InFlight` at once (the default).
    #[default]
    Reject,
    /// Wait up to this long for the first call's result, then return it
    /// (or `InFlight` if it is still running).
    Wait(Duration),
}

impl OnInFlight {
    /// `"reject"`, or `"wait(<duration>)"` with a duration as
    /// [`parse_duration`] takes it (zero allowed).
    ///
    /// ```
    /// use core::time::Duration;
    /// use idem_rules::OnInFlight;
    /// assert_eq!(OnInFlight::parse("wait(5s)"), Ok(OnInFlight::Wait(Duration::from_secs(5))));
    /// assert_eq!(OnInFlight::parse("reject"), Ok(OnInFlight::Reject));
    /// assert!(OnInFlight::parse("wait").is_err());
    /// ```
    pub fn parse(given: &str) -> Result<OnInFlight, SettingError<'_>> {
        if given == "reject" {
            return Ok(OnInFlight::Reject);
        }
        let inner = given
            .strip_prefix("wait(")
            .and_then(|v| v.strip_suffix(')'))
            .ok_or(SettingError::NotAName {
                given,
                expected: ON_IN_FLIGHT,
            })?;
        Self::parse_wait(inner)
    }

    /// `Wait` for a duration alone (`"5s"`), as the gateway's older
    /// `wait = "5s"` spells it.
    pub fn parse_wait(given: &str) -> Result<OnInFlight, SettingError<'_>> {
        duration(given).map(OnInFlight::Wait)
    }
}

/// What a write tool does when its claim cannot reach the store:
/// `on_store_error = "fail_closed" | "run"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnStoreError {
    /// Refuse: the body does not run, and the caller gets
    /// `ToolError::Store` (the default). Nothing can then run twice.
    #[default]
    FailClosed,
    /// Run the body without a claim, for low-stakes tools that had better
    /// act than stay silent while the store is away (posting a chat
    /// message). Only when the store is unreachable: after the claim
    /// failed, a second one, over a new connection and given twice the
    /// store timeout, must fail with `StoreError::Unavailable` (a
    /// connection refused, reset, or not made in time). A timeout, a lock
    /// wait, a busy or full store is no proof and fails closed, and a
    /// recorded result is replayed. Each such call is logged at `warn` as
    /// running without a claim. Nothing is recorded, even if the store is
    /// back by the time the body ends: no record may claim an at-most-once
    /// that did not hold, so a duplicate that comes later runs the body
    /// again. The body still gets the operation's key (`WriteCtx::idem_key`)
    /// for a downstream to deduplicate on, and `WriteCtx::is_claimed` is
    /// `false`. A record the store holds but cannot read (corrupt) still
    /// refuses.
    Run,
}

impl OnStoreError {
    const NAMES: [(&'static str, OnStoreError); 2] = [
        ("fail_closed", OnStoreError::FailClosed),
        ("run", OnStoreError::Run),
    ];

    /// `"fail_closed"` or `"run"`.
    pub fn parse(given: &str) -> Result<OnStoreError, SettingError<'_>> {
        by_name(ON_STORE_ERROR, &Self::NAMES, given)
    }

    /// The name [`parse`](Self::parse) takes.
    pub fn name(self) -> &'static str {
        name_of(&Self::NAMES, &self)
    }
}

/// What a write tool does when an operation's outcome is uncertain: an
/// earlier attempt's claim lapsed before it recorded anything (the worker
/// crashed, hung, or lost the store for longer than its lease), or the body
/// failed with an error that leaves it unknown (`WriteTool::is_uncertain`,
/// `uncertain_errors = path`), so its side effect may or may not have
/// happened: `on_uncertain = "rerun" | "refuse"`, or `verify = path`.
///
/// The window: under `refuse` and `verify` a lapsed claim is remembered
/// for as long as its result would have been, the tool's TTL (never less
/// than `store::CLAIM_RETENTION`, 1 h, after the lease's end), so a
/// duplicate within it (an agent resumed from yesterday's checkpoint, a
/// queue's redelivery after an outage) is refused or verified, not run;
/// one that comes after it finds no record, as a duplicate of a settled
/// operation after its TTL does. Under `rerun` a lapsed claim is kept 1 h,
/// to count the attempt. An unknown record, once made, is kept until an
/// operator resolves it, however long after the tool's TTL
/// (`store::UNKNOWN_RETENTION`). A Redis store writing a record format
/// before 4, during a rolling upgrade, keeps every lapsed claim 1 h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnUncertain {
    /// Run the body again, with the same `WriteCtx::idem_key` and
    /// `WriteCtx::attempt` one higher, for a downstream that deduplicates
    /// on the key (the default).
    #[default]
    Rerun,
    /// Ask the downstream first (`WriteTool::verify`, `verify = path`):
    /// record what it says happened, run the body if it says nothing did,
    /// and refuse as [`Refuse`](Self::Refuse) does if it cannot tell. Set
    /// by giving the function, never by name.
    Verify,
    /// At most once: never run the body again on its own. The record is
    /// kept as *unknown*, every caller is answered
    /// `ToolError::OutcomeUnknown` until an operator resolves it
    /// (`Registry::resolve`, `idem resolve`), and the body runs again only
    /// if they say so. For a downstream that cannot deduplicate (an email,
    /// an SMS, a shell command).
    Refuse,
}

impl OnUncertain {
    const NAMES: [(&'static str, OnUncertain); 3] = [
        ("rerun", OnUncertain::Rerun),
        ("verify", OnUncertain::Verify),
        ("refuse", OnUncertain::Refuse),
    ];

    /// `"rerun"` or `"refuse"`; `Verify` needs its function, so it has no
    /// name to parse.
    pub fn parse(given: &str) -> Result<OnUncertain, SettingError<'_>> {
        match by_name(ON_UNCERTAIN, &Self::NAMES, given)? {
            OnUncertain::Verify => Err(SettingError::NotAName {
                given,
                expected: ON_UNCERTAIN,
            }),
            policy => Ok(policy),
        }
    }

    /// `"rerun"`, `"verify"` or `"refuse"`.
    pub fn name(self) -> &'static str {
        name_of(&Self::NAMES, &self)
    }
}

/// Whether a write tool's operation waits for a person's approval before
/// it runs: `approval = "never" | "required" | "ask"`, or `approval = path` to a
/// function of the arguments and context that says whether this call
/// needs one (a charge above a limit).
///
/// An operation that needs one is recorded as *awaiting* its approval and
/// nothing runs: the call, and every duplicate, is answered
/// `ToolError::ApprovalRequired`. A person approves exactly that operation
/// (`Registry::approve`, `idem approve`): the next call with the same
/// arguments runs the body once, and later ones replay its result; other
/// arguments are another operation with an approval of its own. A refusal
/// (`Registry::deny`) is recorded and answered to every duplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Approval {
    /// No approval: the operation runs when called (the default).
    #[default]
    Never,
    /// Every operation of the tool needs one.
    Required,
    /// Every operation of the tool needs one, and an MCP client that can
    /// put a question to its person (elicitation) is asked for it during
    /// the call: the person's answer approves or refuses that very
    /// operation. Anywhere else, as [`Required`](Approval::Required).
    /// The client is trusted to ask its person: for an approver other
    /// than the caller, use `Required`.
    Ask,
    /// The tool's function decides, call by call (`WriteTool::needs_approval`,
    /// `approval = path`). Set by giving the function, never by name.
    Decided,
}

impl Approval {
    const NAMES: [(&'static str, Approval); 4] = [
        ("never", Approval::Never),
        ("required", Approval::Required),
        ("ask", Approval::Ask),
        ("decided", Approval::Decided),
    ];

    /// `"never"`, `"required"` or `"ask"`; `Decided` needs its function,
    /// so it has no name to parse.
    pub fn parse(given: &str) -> Result<Approval, SettingError<'_>> {
        match by_name(APPROVAL, &Self::NAMES, given)? {
            Approval::Decided => Err(SettingError::NotAName {
                given,
                expected: APPROVAL,
            }),
            approval => Ok(approval),
        }
    }

    /// `"never"`, `"required"`, `"ask"` or `"decided"`.
    pub fn name(self) -> &'static str {
        name_of(&Self::NAMES, &self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_written_and_refuse_what_is_not_one() {
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        for bad in [
            "",
            "s",
            "10",
            "10 s",
            "1.5s",
            "10sec",
            "-1s",
            "99999999999999999999d",
        ] {
            assert_eq!(
                parse_duration(bad),
                Err(SettingError::NotADuration { given: bad }),
                "{bad}"
            );
        }
        assert_eq!(
            parse_duration("0ms"),
            Err(SettingError::Zero { given: "0ms" })
        );
        assert_eq!(
            parse_duration("36525d"),
            Ok(MAX_DURATION),
            "100 years is the longest"
        );
        assert_eq!(
            parse_duration("36526d"),
            Err(SettingError::TooLong { given: "36526d" })
        );
        assert_eq!(
            OnInFlight::parse("wait(0s)"),
            Ok(OnInFlight::Wait(Duration::ZERO))
        );
        assert_eq!(
            OnInFlight::parse("wait(5 s)"),
            Err(SettingError::NotADuration { given: "5 s" })
        );
    }

    #[test]
    fn every_name_parses_back_to_its_value() {
        for scope in [ScopeKind::Run, ScopeKind::Global] {
            assert_eq!(ScopeKind::parse(scope.name()), Ok(scope));
        }
        for policy in [OnStoreError::FailClosed, OnStoreError::Run] {
            assert_eq!(OnStoreError::parse(policy.name()), Ok(policy));
        }
        for policy in [OnUncertain::Rerun, OnUncertain::Refuse] {
            assert_eq!(OnUncertain::parse(policy.name()), Ok(policy));
        }
        assert_eq!(OnUncertain::Verify.name(), "verify");
        assert!(
            OnUncertain::parse("verify").is_err(),
            "verify takes a function"
        );
        for approval in [Approval::Never, Approval::Required, Approval::Ask] {
            assert_eq!(Approval::parse(approval.name()), Ok(approval));
        }
        assert!(
            Approval::parse("decided").is_err(),
            "a decision takes a function"
        );
    }
}
