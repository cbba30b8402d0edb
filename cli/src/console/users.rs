//! The console's users: who a bearer token (`--token USER=TOKEN`) or a
//! signed-in page's session cookie names, or, without tokens (loopback
//! only), the user running the console. The user is who a decision is
//! recorded as: a request never names its own.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};

use crate::tokens::{bearer, users_by_token};

/// The cookie a signed-in page sends.
pub(super) const COOKIE: &str = "idem_console";

/// How long a session lasts after sign-in.
pub(super) const SESSION_LIFE: Duration = Duration::from_secs(12 * 3600);

/// The console's users, and the sessions of the signed-in pages.
pub(crate) struct Users {
    /// Users by token; none: everyone is `anonymous`.
    by_token: HashMap<String, String>,
    /// Who everyone is without tokens: the user running the console.
    anonymous: Option<String>,
    /// The signed-in pages' sessions: by id, their user and when they
    /// end.
    sessions: Mutex<HashMap<String, (String, Instant)>>,
}

/// The user a request is made by, as authentication puts it in the
/// request's extensions.
#[derive(Clone)]
pub(super) struct User(pub(super) String);

impl Users {
    /// The users of `tokens`; without any, the user running the console.
    pub(crate) fn new(tokens: Vec<(String, String)>) -> Result<Users, String> {
        let anonymous = tokens.is_empty().then(|| {
            std::env::var("USER")
                .ok()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "console".to_owned())
        });
        Ok(Users {
            by_token: users_by_token(tokens)?,
            anonymous,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Instant)>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Who `headers` come from: a bearer token, a live session's cookie,
    /// or everyone's user; `None`, nobody known.
    pub(super) fn who(&self, headers: &HeaderMap) -> Option<String> {
        if let Some(token) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer)
        {
            return self
                .by_token
                .get(token)
                .cloned()
                .or_else(|| self.anonymous.clone());
        }
        if let Some(id) = cookie(headers) {
            let now = Instant::now();
            let mut sessions = self.sessions();
            sessions.retain(|_, (_, ends)| *ends > now);
            if let Some((user, _)) = sessions.get(id) {
                return Some(user.clone());
            }
        }
        self.anonymous.clone()
    }

    /// The user of `token`, if it is one of theirs.
    pub(super) fn of_token(&self, token: &str) -> Option<String> {
        self.by_token.get(token).cloned()
    }

    /// Ends the session `headers` carry the cookie of, if any.
    pub(super) fn sign_out(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers) {
            self.sessions().remove(id);
        }
    }

    /// A new session of `user`: its id, or `None` if no random id can be
    /// made (never a guessable one).
    pub(super) fn open(&self, user: String) -> Option<String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).ok()?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.sessions()
            .insert(id.clone(), (user, Instant::now() + SESSION_LIFE));
        Some(id)
    }
}

/// The value of the console's cookie in `headers`.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}
