//! The bearer tokens of `idem`'s HTTP endpoints (`idem gateway --http`,
//! `idem console`): `--token USER=TOKEN`, one user per token, read from
//! an `Authorization: Bearer` header.

use std::collections::HashMap;
use std::net::SocketAddr;

/// `USER=TOKEN`.
pub(crate) fn user_token(given: &str) -> Result<(String, String), String> {
    match given.split_once('=') {
        Some((user, token)) if !user.is_empty() && !token.is_empty() => {
            Ok((user.to_owned(), token.to_owned()))
        }
        _ => Err("expected USER=TOKEN".to_owned()),
    }
}

/// The token of an `Authorization` header's value of the `Bearer` scheme,
/// whose name is case-insensitive (RFC 9110).
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether an endpoint listening on `bound` may serve with the users of
/// `tokens`: an address other than loopback without any is refused, since
/// anyone who can reach it `could` do what the endpoint does; unless
/// `anonymous` says it may (`Some(true)`: `--allow-anonymous`, a proxy
/// in front authenticates; `None`: the endpoint has no such flag).
pub(crate) fn may_serve(
    bound: SocketAddr,
    tokens: &[(String, String)],
    could: &str,
    anonymous: Option<bool>,
) -> Result<(), String> {
    if !tokens.is_empty() || bound.ip().is_loopback() || anonymous == Some(true) {
        return Ok(());
    }
    let or_else = match anonymous {
        Some(_) => {
            ", listen on 127.0.0.1, or, behind a proxy that authenticates, say --allow-anonymous"
        }
        None => ", or listen on 127.0.0.1",
    };
    Err(format!(
        "refusing to serve {bound} without --token: anyone who can reach it could {could}. Give \
         --token USER=TOKEN{or_else}"
    ))
}

/// Users by token, or why `--token` cannot be served: one token given to
/// two users would make each the other.
pub(crate) fn users_by_token(
    tokens: Vec<(String, String)>,
) -> Result<HashMap<String, String>, String> {
    let mut users = HashMap::new();
    for (user, token) in tokens {
        if let Some(other) = users.insert(token, user.clone())
            && other != user
        {
            return Err(format!(
                "--token gives the users `{other}` and `{user}` the same token: each would be the \
                 other; give each user a token of its own"
            ));
        }
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_token_is_read_whatever_the_case_of_its_scheme() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("BEARER  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearerabc"), None);
    }

    #[test]
    fn one_token_for_two_users_is_refused() {
        let token = |u: &str, t: &str| (u.to_owned(), t.to_owned());
        let refused = users_by_token(vec![token("alice", "s"), token("bob", "s")]);
        let refused = refused.expect_err("the same token twice");
        assert!(refused.contains("`alice` and `bob`"), "{refused}");
        let users = users_by_token(vec![token("alice", "s"), token("alice", "t")]);
        assert_eq!(users.expect("two tokens of one user").len(), 2);
    }
}
