//! The rules and vocabulary of [idem](https://docs.rs/idem) that its
//! macros, its runtime and its gateway share: `#[read_tool]` /
//! `#[write_tool]` reject a bad tool name, bad field roles or a bad setting
//! at compile time, `RegistryBuilder::build` rejects those a hand-written
//! tool gives, and `idem gateway` reads its TOML with the same grammar. One
//! rule, written once, so they can never disagree.
//!
//! This crate has no dependencies; use it through `idem`.

#![no_std]

mod settings;
mod wait;

pub use settings::{
    APPROVAL_WINDOW, Approval, MAX_DURATION, MIN_LEASE, MIN_RESULT_BYTES, OnInFlight, OnStoreError,
    OnUncertain, ScopeKind, SettingError, parse_duration,
};
pub use wait::{WaitError, Waits};

/// Whether `name` matches `^[A-Za-z_][A-Za-z0-9_-]{0,63}$`, the names every
/// provider (OpenAI, Anthropic, Gemini, MCP) accepts.
///
/// ```
/// assert!(idem_rules::valid_tool_name("send_email"));
/// assert!(!idem_rules::valid_tool_name("send email"));
/// assert!(!idem_rules::valid_tool_name("1st"));
/// ```
pub const fn valid_tool_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() > 64 {
        return false;
    }
    if !(bytes[0].is_ascii_alphabetic() || bytes[0] == b'_') {
        return false;
    }
    let mut i = 1;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return false;
        }
        i += 1;
    }
    true
}

/// A field's role in a write tool's identity (docs/spec.md, "Field roles").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Part of the key (every field's role unless told otherwise).
    Key,
    /// Not part of the key, but a duplicate with another value there is a
    /// key conflict.
    Check,
    /// Neither: a duplicate that differs only there is replayed.
    Ignore,
}

impl Role {
    /// The attribute key that lists fields of this role.
    pub const fn attribute(self) -> &'static str {
        match self {
            Role::Key => "key",
            Role::Check => "check",
            Role::Ignore => "ignore",
        }
    }

    const fn participle(self) -> &'static str {
        match self {
            Role::Key => "keyed",
            Role::Check => "checked",
            Role::Ignore => "ignored",
        }
    }
}

/// One thing wrong with a tool's field roles: which list, which entry of
/// it (for a span), and what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault<'a> {
    /// The list the fault is in.
    pub role: Role,
    /// The entry of that list (0 for a fault of the whole list).
    pub index: usize,
    /// What is wrong.
    pub problem: Problem<'a>,
}

/// What is wrong, in a [`Fault`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem<'a> {
    /// The list names no field.
    Empty,
    /// `check` beside `key`, where every other field is checked already.
    CheckBesideKey,
    /// The entry (`path`) was given a role before: `first`.
    Repeated {
        /// The path.
        path: &'a str,
        /// The role it had already.
        first: Role,
    },
    /// The entry (`path`) lies inside an ignored field, `ignored`.
    InsideIgnored {
        /// The path.
        path: &'a str,
        /// The ignored field it lies in.
        ignored: &'a str,
    },
    /// Every argument is checked or ignored: the tool keys on nothing.
    KeysOnNothing,
}

impl core::fmt::Display for Fault<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let list = self.role.attribute();
        match self.problem {
            Problem::Empty => write!(
                f,
                "`{list} = []` names no field: list the fields, or leave `{list}` out"
            ),
            Problem::CheckBesideKey => write!(
                f,
                "`check` cannot go with `key`: with `key`, every field it does not name is checked already"
            ),
            Problem::Repeated { path, first } if first == self.role => {
                write!(f, "`{path}` is listed twice in `{list}`")
            }
            Problem::Repeated { path, first } => write!(
                f,
                "`{path}` is given two roles, `{}` and `{list}`: a field is keyed, checked or ignored",
                first.attribute()
            ),
            Problem::InsideIgnored { path, ignored } => write!(
                f,
                "`{path}` is {}, but it lies inside `{ignored}`, which is ignored",
                self.role.participle()
            ),
            Problem::KeysOnNothing => write!(
                f,
                "every argument is checked or ignored, so the tool keys on nothing and all its calls in a scope would be one operation: leave at least one argument keyed"
            ),
        }
    }
}

/// Checks a write tool's field roles: the dotted paths listed under `key`,
/// `check` and `ignore` (`None` where the list is not given), and, when
/// the top-level argument names are known (`arguments`), that something is
/// left keyed. Every fault goes to `report`; none means the roles hold.
///
/// The rules: no list is empty; `check` does not go with `key` (which
/// checks every field it does not name); no path is listed twice, in one
/// list or two; no keyed or checked path lies inside an ignored one
/// (`order.id` inside `order`); without `key`, not every argument is
/// checked or ignored.
///
/// ```
/// use idem_rules::{check_roles, Problem, Role};
/// let mut faults = Vec::new();
/// check_roles(Some(&["order.id"]), None, Some(&["order"]), None, |f| faults.push(f));
/// assert_eq!(faults[0].role, Role::Key);
/// assert!(matches!(faults[0].problem, Problem::InsideIgnored { ignored: "order", .. }));
///
/// let mut faults = Vec::new();
/// check_roles(None, None, Some(&["reason"]), Some(&["amount", "reason"]), |f| faults.push(f));
/// assert!(faults.is_empty());
/// ```
pub fn check_roles<'a>(
    key: Option<&[&'a str]>,
    check: Option<&[&'a str]>,
    ignore: Option<&[&'a str]>,
    arguments: Option<&[&str]>,
    mut report: impl FnMut(Fault<'a>),
) {
    let lists = [
        (Role::Key, key),
        (Role::Check, check),
        (Role::Ignore, ignore),
    ];
    let whole = |role, problem| Fault {
        role,
        index: 0,
        problem,
    };
    for (role, list) in lists {
        if list.is_some_and(<[&str]>::is_empty) {
            report(whole(role, Problem::Empty));
        }
    }
    if key.is_some() && check.is_some() {
        report(whole(Role::Check, Problem::CheckBesideKey));
    }
    check_entries(&lists, &mut report);
    if key.is_none()
        && let Some(arguments) = arguments
        && !arguments.is_empty()
        && arguments.iter().all(|name| {
            [check, ignore]
                .iter()
                .any(|list| list.unwrap_or(&[]).contains(name))
        })
    {
        let role = if ignore.is_some() {
            Role::Ignore
        } else {
            Role::Check
        };
        report(whole(role, Problem::KeysOnNothing));
    }
}

/// Each entry against the ones before it (in the order key, check,
/// ignore), and each keyed or checked one against the ignored ones.
fn check_entries<'a>(lists: &[(Role, Option<&[&'a str]>); 3], report: &mut impl FnMut(Fault<'a>)) {
    let ignored = lists[2].1.unwrap_or(&[]);
    let entries = lists.iter().flat_map(|(role, list)| {
        list.unwrap_or(&[])
            .iter()
            .enumerate()
            .map(move |(i, p)| (*role, i, *p))
    });
    for (n, (role, index, path)) in entries.clone().enumerate() {
        let problem = match entries.clone().take(n).find(|(_, _, p)| *p == path) {
            Some((first, _, _)) => Problem::Repeated { path, first },
            None if role == Role::Ignore => continue,
            None => match ignored.iter().find(|i| **i != path && inside(path, i)) {
                Some(ignored) => Problem::InsideIgnored { path, ignored },
                None => continue,
            },
        };
        report(Fault {
            role,
            index,
            problem,
        });
    }
}

/// Whether dotted path `path` is `outer` or lies inside it.
fn inside(path: &str, outer: &str) -> bool {
    path.strip_prefix(outer)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::{String, ToString};
    use std::vec::Vec;

    use super::*;

    fn faults(
        key: Option<&[&'static str]>,
        check: Option<&[&'static str]>,
        ignore: Option<&[&'static str]>,
        arguments: Option<&[&str]>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        check_roles(key, check, ignore, arguments, |f| out.push(f.to_string()));
        out
    }

    #[test]
    fn roles_that_hold() {
        let args: &[&str] = &["amount", "reason", "order"];
        assert!(faults(None, None, None, Some(args)).is_empty());
        assert!(faults(Some(&["amount"]), None, Some(&["reason"]), Some(args)).is_empty());
        assert!(faults(None, Some(&["amount"]), Some(&["reason"]), Some(args)).is_empty());
        // Ignoring a part of a keyed field: keyed except that part.
        assert!(faults(Some(&["order"]), None, Some(&["order.note"]), Some(args)).is_empty());
        // A prefix of a name is not a parent: `order` is not inside `ord`.
        assert!(faults(Some(&["order"]), None, Some(&["ord"]), None).is_empty());
    }

    #[test]
    fn roles_that_do_not_hold() {
        let args: &[&str] = &["amount", "reason"];
        /// `key`, `check`, `ignore`, and what the fault says.
        type Case<'a> = (
            Option<&'a [&'a str]>,
            Option<&'a [&'a str]>,
            Option<&'a [&'a str]>,
            &'a str,
        );
        let cases: [Case<'_>; 6] = [
            (None, None, Some(&[]), "`ignore = []` names no field"),
            (
                Some(&["amount"]),
                Some(&["reason"]),
                None,
                "`check` cannot go with `key`",
            ),
            (
                None,
                None,
                Some(&["reason", "reason"]),
                "`reason` is listed twice in `ignore`",
            ),
            (
                Some(&["reason"]),
                None,
                Some(&["reason"]),
                "given two roles, `key` and `ignore`",
            ),
            (
                Some(&["order.id"]),
                None,
                Some(&["order"]),
                "`order.id` is keyed, but it lies inside `order`",
            ),
            (
                None,
                Some(&["amount"]),
                Some(&["reason"]),
                "the tool keys on nothing",
            ),
        ];
        for (key, check, ignore, expected) in cases {
            let found = faults(key, check, ignore, Some(args));
            assert!(
                found.iter().any(|f| f.contains(expected)),
                "{expected}: {found:?}"
            );
        }
    }

    #[test]
    fn names_providers_accept() {
        for name in ["a", "_", "send_email", "get-weather", "A1", &"x".repeat(64)] {
            assert!(valid_tool_name(name), "{name}");
        }
        for name in ["", "1a", "-a", "a b", "a.b", "é", &"x".repeat(65)] {
            assert!(!valid_tool_name(name), "{name}");
        }
    }
}
