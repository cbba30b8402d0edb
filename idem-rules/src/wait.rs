//! When a call may wait for a person: `approval_wait` (for a decision on an
//! operation that awaits approval) and `uncertain_wait` (for an unknown
//! outcome to be resolved), checked in one place for the attribute, the
//! builder and the gateway's TOML.

use core::fmt;
use core::time::Duration;

use crate::settings::{Approval, OnUncertain};

/// A write tool's waits as given, beside what they depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waits {
    /// The tool's `approval`.
    pub approval: Approval,
    /// Its `approval_window` (the default, `APPROVAL_WINDOW`, if unset).
    pub approval_window: Duration,
    /// Its `approval_wait`, if it gives one.
    pub approval_wait: Option<Duration>,
    /// Its `on_uncertain` policy.
    pub on_uncertain: OnUncertain,
    /// Its `uncertain_wait`, if it gives one.
    pub uncertain_wait: Option<Duration>,
}

/// Why a tool's waits cannot be taken; its `Display` is the sentence every
/// front shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitError {
    /// `approval_wait` on a tool that asks for no approval.
    NoApproval,
    /// `approval_wait` longer than the `approval_window`.
    LongerThanWindow {
        /// The wait given.
        wait: Duration,
        /// The window it outlives.
        window: Duration,
    },
    /// `uncertain_wait` on a tool that runs an uncertain operation again
    /// (`rerun`): nobody is asked to resolve it.
    NothingToResolve,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WaitError::NoApproval => f.write_str(
                "`approval_wait` is how long a call waits for a person's approval, and this tool asks for none: give `approval` (\"required\", \"ask\", or a function that decides), or remove `approval_wait`",
            ),
            WaitError::LongerThanWindow { wait, window } => write!(
                f,
                "`approval_wait` (\"{}\") is longer than `approval_window` (\"{}\"): a call must not wait longer than an approval stays good; shorten the wait or lengthen the window",
                Written(wait),
                Written(window)
            ),
            WaitError::NothingToResolve => f.write_str(
                "`uncertain_wait` is how long a call waits for a person to resolve an unknown outcome, and this tool runs an uncertain operation again by itself (`on_uncertain = \"rerun\"`): give `on_uncertain = \"refuse\"` (or a `verify` function), or remove `uncertain_wait`",
            ),
        }
    }
}

/// A duration as a setting writes it: in the largest unit that says it
/// exactly (`"2h"`, `"90m"`, `"1500ms"`).
struct Written(Duration);

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        let units = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1000, "s"),
        ];
        for (size, unit) in units {
            if ms >= size && ms.is_multiple_of(size) {
                return write!(f, "{}{unit}", ms / size);
            }
        }
        write!(f, "{ms}ms")
    }
}

impl Waits {
    /// Whether these waits can be taken: an approval wait only where the
    /// tool asks for approval, and no longer than its window; an
    /// uncertain wait only where a person resolves what is uncertain.
    ///
    /// ```
    /// use core::time::Duration;
    /// use idem_rules::{Approval, OnUncertain, WaitError, Waits};
    ///
    /// let minutes = |m: u64| Duration::from_secs(60 * m);
    /// let waits = Waits {
    ///     approval: Approval::Required,
    ///     approval_window: minutes(60),
    ///     approval_wait: Some(minutes(10)),
    ///     on_uncertain: OnUncertain::Rerun,
    ///     uncertain_wait: None,
    /// };
    /// assert_eq!(waits.check(), Ok(()));
    /// let too_long = Waits { approval_wait: Some(minutes(90)), ..waits };
    /// assert!(matches!(too_long.check(), Err(WaitError::LongerThanWindow { .. })));
    /// ```
    pub fn check(&self) -> Result<(), WaitError> {
        if let Some(wait) = self.approval_wait {
            if self.approval == Approval::Never {
                return Err(WaitError::NoApproval);
            }
            if wait > self.approval_window {
                return Err(WaitError::LongerThanWindow {
                    wait,
                    window: self.approval_window,
                });
            }
        }
        if self.uncertain_wait.is_some() && self.on_uncertain == OnUncertain::Rerun {
            return Err(WaitError::NothingToResolve);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate alloc;
    use alloc::string::ToString;

    use super::*;

    #[test]
    fn durations_are_written_as_a_setting_writes_them() {
        let written = |ms: u64| Written(Duration::from_millis(ms)).to_string();
        assert_eq!(written(7_200_000), "2h");
        assert_eq!(written(5_400_000), "90m");
        assert_eq!(written(172_800_000), "2d");
        assert_eq!(written(1500), "1500ms");
        assert_eq!(written(45_000), "45s");
    }
}
