//! What a registry accepts: tool names and descriptions, namespaces, and
//! the bounds of the write settings.

use std::time::Duration;

pub use idem_rules::valid_tool_name;
use idem_rules::{MAX_DURATION, MIN_LEASE, MIN_RESULT_BYTES, Waits};

use crate::engine::ToolSettings;
use crate::error::RegistryError;
use crate::tool::{Approval, OnInFlight, OnStoreError, ToolInfo};

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

/// Whether a tool's settings (or, as tool `"*"`, the registry's defaults)
/// are within the bounds `idem_rules` sets.
pub(super) fn check_settings(tool: &str, settings: &ToolSettings) -> Result<(), RegistryError> {
    let ToolSettings {
        lease,
        ttl,
        max_hold,
        on_in_flight,
        max_result_bytes,
        approval,
        approval_window,
        approval_wait,
        uncertain_wait,
        on_uncertain,
        on_store_error,
        ..
    } = *settings;
    within_max(tool, "lease", lease)?;
    within_max(tool, "approval_window", approval_window)?;
    within_max(tool, "approval_wait", approval_wait)?;
    within_max(tool, "uncertain_wait", uncertain_wait)?;
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
    if approval_window.is_zero() {
        return bad("approval_window must be greater than zero".into());
    }
    let given = |wait: Duration| (!wait.is_zero()).then_some(wait);
    let waits = Waits {
        approval,
        approval_window,
        approval_wait: given(approval_wait),
        on_uncertain,
        uncertain_wait: given(uncertain_wait),
    };
    if let Err(e) = waits.check() {
        return bad(e.to_string());
    }
    if max_hold < lease {
        return bad(format!(
            "max_hold ({max_hold:?}) must not be shorter than the lease ({lease:?})"
        ));
    }
    if approval != Approval::Never && on_store_error == OnStoreError::Run {
        return bad(
            "a tool that needs a person's approval cannot run without a claim: \
             on_store_error must be \"fail_closed\""
                .into(),
        );
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
