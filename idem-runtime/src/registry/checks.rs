//! What a registry accepts: tool names and descriptions, namespaces, and
//! the bounds of the write settings.

use std::time::Duration;

pub use idem_rules::valid_tool_name;

use crate::error::RegistryError;
use crate::tool::{OnInFlight, ToolInfo};

/// The smallest lease accepted: the heartbeat renews every third of it.
const MIN_LEASE: Duration = Duration::from_millis(10);

/// The smallest `max_result_bytes` accepted: room for an error message.
const MIN_RESULT_BYTES: usize = 1024;

/// The longest duration a setting may have (100 years, of 365.25 days):
/// longer than any record needs keeping, and within what every store can
/// keep (a Redis expiry, a PostgreSQL timestamp) and a clock can add up.
/// Beyond it a setting is refused when the registry is built, not cut
/// short or lost when a call records its outcome.
pub(super) const MAX_DURATION: Duration = Duration::from_secs(100 * 31_557_600);

/// `Err` naming `setting` if `value` is longer than [`MAX_DURATION`].
pub(super) fn within_max(tool: &str, setting: &str, value: Duration) -> Result<(), RegistryError> {
    if value > MAX_DURATION {
        return Err(RegistryError::InvalidSetting {
            tool: tool.to_owned(),
            message: format!(
                "{setting} must be at most 100 years ({MAX_DURATION:?}), got {value:?}"
            ),
        });
    }
    Ok(())
}

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
    on_in_flight: OnInFlight,
    max_result_bytes: usize,
) -> Result<(), RegistryError> {
    within_max(tool, "lease", lease)?;
    within_max(tool, "ttl", ttl)?;
    within_max(tool, "max_hold", max_hold)?;
    if let OnInFlight::Wait(wait) = on_in_flight {
        within_max(tool, "on_in_flight's wait", wait)?;
    }
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
