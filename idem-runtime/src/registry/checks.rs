//! What a registry accepts: tool names and descriptions, namespaces, and
//! the bounds of the write settings.

use std::time::Duration;

pub use idem_rules::valid_tool_name;

use crate::error::RegistryError;
use crate::tool::ToolInfo;

/// The smallest lease accepted: the heartbeat renews every third of it.
const MIN_LEASE: Duration = Duration::from_millis(10);

/// The smallest `max_result_bytes` accepted: room for an error message.
const MIN_RESULT_BYTES: usize = 1024;

pub(super) fn valid_namespace(ns: &str) -> bool {
    !ns.is_empty()
        && ns.len() <= 128
        && ns
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

pub(super) fn check_settings(
    tool: &str,
    lease: Duration,
    ttl: Duration,
    max_hold: Duration,
    max_result_bytes: usize,
) -> Result<(), RegistryError> {
    let bad = |message: String| {
        Err(RegistryError::InvalidSetting {
            tool: tool.to_owned(),
            message,
        })
    };
    if lease < MIN_LEASE {
        return bad(format!(
            "lease must be at least {MIN_LEASE:?}, got {lease:?}"
        ));
    }
    if ttl.is_zero() {
        return bad("ttl must be greater than zero".into());
    }
    if max_hold < lease {
        return bad(format!(
            "max_hold ({max_hold:?}) must not be shorter than the lease ({lease:?})"
        ));
    }
    if max_result_bytes < MIN_RESULT_BYTES {
        return bad(format!(
            "max_result_bytes must be at least {MIN_RESULT_BYTES}, got {max_result_bytes}"
        ));
    }
    Ok(())
}

/// A tool's name and description, as every provider needs them.
pub(super) fn check_info(info: &ToolInfo) -> Result<(), RegistryError> {
    if !valid_tool_name(&info.name) {
        return Err(RegistryError::InvalidName {
            name: info.name.to_string(),
        });
    }
    if info.description.trim().is_empty() {
        return Err(RegistryError::MissingDescription {
            name: info.name.to_string(),
        });
    }
    Ok(())
}
