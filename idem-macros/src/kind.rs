//! Which of the two macros is expanding, and the name the user wrote it by.

use crate::symbol::{READ_KEYS, WRITE_KEYS};

/// Which macro is expanding.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Read,
    Write,
}

impl Kind {
    pub(crate) fn attr_name(self) -> &'static str {
        match self {
            Kind::Read => "read_tool",
            Kind::Write => "write_tool",
        }
    }

    /// The attribute keys this macro accepts.
    pub(crate) fn keys(self) -> &'static [&'static str] {
        match self {
            Kind::Read => READ_KEYS,
            Kind::Write => WRITE_KEYS,
        }
    }
}
