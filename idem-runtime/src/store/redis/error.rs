//! What Redis's replies and errors mean to a [`RedisStore`](super::RedisStore):
//! which failures are worth retrying, which mean a corrupt record, and the
//! text of a reply.

use redis::{RedisError, Value as RValue};

use crate::error::StoreError;
use crate::key::IdemKey;

/// A reply's text, if it is a string.
pub(super) fn as_text(v: &RValue) -> Option<String> {
    String::from_utf8(as_bytes(v)?.to_vec()).ok()
}

/// A reply's bytes, if it is a string, without copying them.
pub(super) fn as_bytes(v: &RValue) -> Option<&[u8]> {
    match v {
        RValue::BulkString(b) => Some(b),
        RValue::SimpleString(s) => Some(s.as_bytes()),
        RValue::VerbatimString { text, .. } => Some(text.as_bytes()),
        _ => None,
    }
}

/// Whether `e` means the connection broke under the command (closed by the
/// server, reset, a restart), so that it may not have been sent or
/// answered: worth sending once more over a new connection.
pub(super) fn connection_lost(e: &RedisError) -> bool {
    e.is_connection_dropped() || e.is_io_error() || e.is_unrecoverable_error()
}

/// Replies with which a server says it cannot serve now but will soon:
/// loading its data after a restart, running a long script, a replica not
/// yet promoted or resyncing, a cluster reconfiguring.
const BUSY: &[&str] = &[
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "MASTERDOWN",
    "READONLY",
    "CLUSTERDOWN",
];

/// Connection-level failures are `Unavailable`, a server that cannot
/// serve now `Busy`, one at its `maxmemory` (`OOM`, under `noeviction`)
/// `Full`: all worth another try. The rest are the backend's own errors.
pub(super) fn store_error(e: RedisError) -> StoreError {
    match e.code() {
        Some("OOM") => return StoreError::full(e),
        Some(code) if BUSY.contains(&code) => return StoreError::busy(e),
        _ => {}
    }
    if e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || e.is_cluster_error()
    {
        StoreError::unavailable(e)
    } else {
        StoreError::backend(e)
    }
}

/// A script's own `error('corrupt: ..')` or a `WRONGTYPE` is a corrupt
/// record; anything else as [`store_error`].
pub(super) fn script_error(key: &IdemKey, e: RedisError) -> StoreError {
    let message = e.to_string();
    if let Some(i) = message.find("corrupt: ") {
        let reason = message[i + "corrupt: ".len()..]
            .split(" script:")
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        return StoreError::corrupt(key.as_str(), reason);
    }
    if e.code() == Some("WRONGTYPE") {
        return StoreError::corrupt(key.as_str(), "the key holds another Redis type");
    }
    store_error(e)
}

/// Whether the server refused a command's form as one it does not know,
/// as Redis before 7.0 refuses `SET .. NX GET` (6.2 took `GET` without
/// `NX`, older versions no `GET` at all) and before 8.4 `SET .. IFEQ`:
/// `ERR syntax error`.
pub(super) fn rejects_option(e: &RedisError) -> bool {
    e.code() == Some("ERR") && e.detail().is_some_and(|d| d.contains("syntax error"))
}

/// Whether the node lacks the function called: it lost its library (a
/// restart without persistence, a `FUNCTION FLUSH`) or never had it (a
/// node new to a cluster).
pub(super) fn function_missing(e: &RedisError) -> bool {
    e.code() == Some("ERR")
        && e.detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

/// Whether the server refuses functions: a server before 7.0 does not
/// know `FCALL` or `FUNCTION`, and an ACL may deny them.
pub(super) fn refuses_functions(e: &RedisError) -> bool {
    e.code() == Some("NOPERM")
        || (e.code() == Some("ERR") && e.detail().is_some_and(|d| d.contains("unknown command")))
}
