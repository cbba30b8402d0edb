//! Why a record could not be read or decided: the one error of the
//! commands that decide (`approve`, `deny`, `revoke`, `resolve`,
//! `release`), which the shell prints as a line and the console answers
//! with the status code of its kind.

use std::fmt;

use axum::http::StatusCode;

/// Why a record could not be read or decided, in words for a person.
#[derive(Debug)]
pub(crate) enum Refused {
    /// There is no record under the key (never written, expired,
    /// mistyped), or none the asker may see.
    NotFound(String),
    /// The record is not in the state the decision needs: decided
    /// already, running, settled; or it changed meanwhile (another
    /// decision came first).
    Conflict(String),
    /// What was given cannot be written: a result that is not JSON, a
    /// record sealed with keys the tool has not.
    Invalid(String),
    /// The store failed.
    Store(String),
}

impl Refused {
    /// The HTTP status that answers it.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Refused::NotFound(_) => StatusCode::NOT_FOUND,
            Refused::Conflict(_) => StatusCode::CONFLICT,
            Refused::Invalid(_) => StatusCode::BAD_REQUEST,
            Refused::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::NotFound(why)
            | Refused::Conflict(why)
            | Refused::Invalid(why)
            | Refused::Store(why) => f.write_str(why),
        }
    }
}

impl From<Refused> for String {
    fn from(refused: Refused) -> String {
        refused.to_string()
    }
}
