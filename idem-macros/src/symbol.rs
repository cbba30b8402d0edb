//! The attribute keys, named once.

pub(crate) const NAME: &str = "name";
pub(crate) const DESCRIPTION: &str = "description";
pub(crate) const LEASE: &str = "lease";
pub(crate) const TTL: &str = "ttl";
pub(crate) const MAX_HOLD: &str = "max_hold";
pub(crate) const MAX_RESULT_BYTES: &str = "max_result_bytes";
pub(crate) const SCOPE: &str = "scope";
pub(crate) const KEY: &str = "key";
pub(crate) const CHECK: &str = "check";
pub(crate) const IGNORE: &str = "ignore";
pub(crate) const HIDE: &str = "hide";
pub(crate) const VERSION: &str = "version";
pub(crate) const ON_IN_FLIGHT: &str = "on_in_flight";
pub(crate) const ON_STORE_ERROR: &str = "on_store_error";
pub(crate) const ON_UNCERTAIN: &str = "on_uncertain";
pub(crate) const PERMANENT_ERRORS: &str = "permanent_errors";
pub(crate) const UNCERTAIN_ERRORS: &str = "uncertain_errors";
pub(crate) const VERIFY: &str = "verify";
pub(crate) const APPROVAL: &str = "approval";
pub(crate) const APPROVAL_WINDOW: &str = "approval_window";
pub(crate) const APPROVAL_WAIT: &str = "approval_wait";
pub(crate) const UNCERTAIN_WAIT: &str = "uncertain_wait";
pub(crate) const DESTRUCTIVE: &str = "destructive";
pub(crate) const OPEN_WORLD: &str = "open_world";
pub(crate) const CRATE: &str = "crate";

/// The parameter attribute that marks the one arguments struct.
pub(crate) const ARGS: &str = "args";

/// Keys both macros accept.
pub(crate) const READ_KEYS: &[&str] = &[NAME, DESCRIPTION, CRATE];

/// Keys `#[write_tool]` accepts.
pub(crate) const WRITE_KEYS: &[&str] = &[
    NAME,
    DESCRIPTION,
    LEASE,
    TTL,
    MAX_HOLD,
    MAX_RESULT_BYTES,
    SCOPE,
    KEY,
    APPROVAL,
    APPROVAL_WINDOW,
    APPROVAL_WAIT,
    CHECK,
    IGNORE,
    HIDE,
    VERSION,
    ON_IN_FLIGHT,
    ON_STORE_ERROR,
    ON_UNCERTAIN,
    UNCERTAIN_WAIT,
    VERIFY,
    PERMANENT_ERRORS,
    UNCERTAIN_ERRORS,
    DESTRUCTIVE,
    OPEN_WORLD,
    CRATE,
];
