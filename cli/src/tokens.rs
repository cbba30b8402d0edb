//! The bearer tokens of `idem`'s HTTP endpoints (`idem gateway --http`,
//! `idem console`): `USER=TOKEN`, one user per token, read from an
//! `Authorization: Bearer` header. Given with `--token` (which `ps` shows
//! to every user of the host), in a file (`--token-file`, or the file
//! `IDEM_TOKEN_FILE` names), or in `IDEM_TOKENS`; all of them count.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

/// The environment variable that may hold tokens: `USER=TOKEN` entries
/// separated by commas or white space.
pub(crate) const TOKENS_ENV: &str = "IDEM_TOKENS";

/// Every token given: on the command line (`given`), in `file` (a
/// `USER=TOKEN` line each; blank lines and `#` comments are skipped) and
/// in [`TOKENS_ENV`]. An error names where a malformed entry is, never
/// what it holds.
pub(crate) fn gather(
    mut given: Vec<(String, String)>,
    file: Option<&Path>,
) -> Result<Vec<(String, String)>, String> {
    if let Some(path) = file {
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
        warn_if_others_may_read(path);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let entry = user_token(line).map_err(|_| {
                format!(
                    "the token file {shown}, line {}: expected USER=TOKEN",
                    n + 1
                )
            })?;
            given.push(entry);
        }
    }
    if let Some(text) = std::env::var_os(TOKENS_ENV) {
        let text = text
            .into_string()
            .map_err(|_| format!("{TOKENS_ENV} is not UTF-8"))?;
        let entries = text.split(|c: char| c == ',' || c.is_whitespace());
        for (n, entry) in entries.filter(|e| !e.is_empty()).enumerate() {
            let entry = user_token(entry)
                .map_err(|_| format!("{TOKENS_ENV}, entry {}: expected USER=TOKEN", n + 1))?;
            given.push(entry);
        }
    }
    Ok(given)
}

/// Warns when users other than the file's owner may read a token file.
fn warn_if_others_may_read(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = path.metadata()
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                file = %path.display(),
                "the token file may be read by other users of this host: chmod 600 it"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

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
    fn tokens_are_read_from_a_file_without_repeating_a_bad_line() {
        let dir = std::env::temp_dir().join(format!("idem-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let file = dir.join("tokens");
        std::fs::write(&file, "# who may call\nana=a-token\n\n  bob=b-token  \n").expect("write");
        let given = vec![("cy".to_owned(), "c-token".to_owned())];
        let all = gather(given, Some(&file)).expect("read");
        let users: Vec<&str> = all.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(users, ["cy", "ana", "bob"]);
        assert_eq!(all[2].1, "b-token");

        std::fs::write(&file, "ana=a-token\nsecret-without-a-user\n").expect("write");
        let refused = gather(Vec::new(), Some(&file)).expect_err("a bad line");
        assert!(refused.contains("line 2: expected USER=TOKEN"), "{refused}");
        assert!(!refused.contains("secret"), "{refused}");
        let missing = gather(Vec::new(), Some(&dir.join("none"))).expect_err("no file");
        assert!(missing.contains("cannot read the token file"), "{missing}");
        let _ = std::fs::remove_dir_all(&dir);
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
