//! Which of the two macros is expanding, and the name the user wrote it by.

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
}
