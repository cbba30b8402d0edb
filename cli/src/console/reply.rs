//! How the console's API answers: JSON, an error as `{"error":
//! MESSAGE}`.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::guard::json_text;

/// An error answer: `{"error": message}`.
pub(super) fn error(status: StatusCode, message: &str) -> Response {
    json_text(status, json!({ "error": message }).to_string())
}

/// `value` as a 200 answer.
pub(super) fn ok(value: Value) -> Response {
    json_text(StatusCode::OK, value.to_string())
}
