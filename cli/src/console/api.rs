//! The console's JSON API, which its page uses and scripts and chat bots
//! may: what waits (`GET /api/approvals`, `GET /api/pending`), what was
//! decided (`GET /api/decisions`), and the decisions themselves (`POST
//! /api/approvals/{key}/approve|deny|revoke`, `POST
//! /api/pending/{key}/resolve`). A record is answered as `idem show
//! --json` shows it; an error is `{"error": MESSAGE}` (and the record, for
//! a 409), with the status of its kind (docs/console.md).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use idem::IdemKey;
use idem::store::RecordState;
use serde_json::{Value, json};

use super::auth;
use super::reply::{error, ok};
use super::state::Console;
use super::users::User;
use super::views::Page;
use crate::approve::{self, Decision};
use crate::guard::json_text;
use crate::refused::Refused;
use crate::resolve::{self, Answer};

/// How long a resolution's result or error is kept: the registry's
/// default TTL, as `idem resolve` keeps it.
const RESOLVED_TTL: Duration = Duration::from_secs(86_400);

/// The API's routes, behind authentication.
pub(super) fn routes(console: Arc<Console>) -> Router<Arc<Console>> {
    Router::new()
        .route("/approvals", get(approvals))
        .route("/approvals/{key}/approve", post(approve))
        .route("/approvals/{key}/deny", post(deny))
        .route("/approvals/{key}/revoke", post(revoke))
        .route("/pending", get(pending))
        .route("/pending/{key}/resolve", post(resolve))
        .route("/decisions", get(decisions))
        .layer(axum::middleware::from_fn_with_state(
            console,
            auth::authenticated,
        ))
}

/// The answer to a refusal; a conflict carries the record as it is now.
async fn refused(console: &Console, key: &IdemKey, why: Refused) -> Response {
    let status = why.status();
    let mut body = json!({ "error": why.to_string() });
    if matches!(why, Refused::Conflict(_))
        && let Ok(Some(record)) = console.visible(key).await
    {
        body["record"] = crate::record::to_json(&record);
    }
    json_text(status, body.to_string())
}

/// `GET /api/approvals`: the operations awaiting approval, oldest first.
async fn approvals(State(console): State<Arc<Console>>, RawQuery(query): RawQuery) -> Response {
    listed(&console, RecordState::Awaiting, query.as_deref()).await
}

/// `GET /api/pending`: the unknown outcomes, oldest first.
async fn pending(State(console): State<Arc<Console>>, RawQuery(query): RawQuery) -> Response {
    listed(&console, RecordState::Unknown, query.as_deref()).await
}

/// The records in `state`, oldest first, one page of them as `query`
/// asks (`offset`, `limit`).
async fn listed(console: &Console, state: RecordState, query: Option<&str>) -> Response {
    let page = Page::of(query);
    match console.namespace().await {
        Ok(namespace) => {
            let records = match state {
                RecordState::Awaiting => &namespace.awaiting,
                _ => &namespace.unknown,
            };
            ok(page.answer(records, crate::record::to_json))
        }
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e),
    }
}

/// `GET /api/decisions`: who decided what and when, newest first, and
/// what the operation is now.
async fn decisions(State(console): State<Arc<Console>>, RawQuery(query): RawQuery) -> Response {
    let page = Page::of(query.as_deref());
    match console.decisions().await {
        Ok(decisions) => ok(page.answer(&decisions, Clone::clone)),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e),
    }
}

/// `POST /api/approvals/{key}/approve`.
async fn approve(
    State(console): State<Arc<Console>>,
    Extension(User(by)): Extension<User>,
    Path(key): Path<String>,
) -> Response {
    decided(&console, key, Decision::Approve { by }).await
}

/// `POST /api/approvals/{key}/deny` with `{"reason": ..}`.
async fn deny(
    State(console): State<Arc<Console>>,
    Extension(User(by)): Extension<User>,
    Path(key): Path<String>,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reason = body["reason"].as_str().map(str::trim).unwrap_or_default();
    if reason.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "a refusal needs a reason: send {\"reason\": \"..\"}; every call of the operation is told it",
        );
    }
    let reason = reason.to_owned();
    let decision = Decision::Deny {
        by,
        reason,
        ttl: None,
    };
    decided(&console, key, decision).await
}

/// `POST /api/approvals/{key}/revoke`.
async fn revoke(
    State(console): State<Arc<Console>>,
    Extension(User(by)): Extension<User>,
    Path(key): Path<String>,
) -> Response {
    decided(&console, key, Decision::Revoke { by }).await
}

/// Writes `decision` on the record under `key`, if this console may see
/// it: the record as it is then, or why not.
async fn decided(console: &Console, key: String, decision: Decision) -> Response {
    let key = IdemKey::from_raw(key);
    if let Err(why) = console.seen(&key).await {
        return refused(console, &key, why).await;
    }
    let webhooks = console.webhooks.as_ref();
    match approve::decide(&*console.store, &key, decision, webhooks).await {
        Ok(()) => after(console, &key).await,
        Err(why) => refused(console, &key, why).await,
    }
}

/// `POST /api/pending/{key}/resolve` with `{"outcome": "done", "result":
/// ..}`, `{"outcome": "failed", "message": ..}` or `{"outcome": "rerun"}`.
async fn resolve(
    State(console): State<Arc<Console>>,
    Extension(User(by)): Extension<User>,
    Path(key): Path<String>,
    body: Bytes,
) -> Response {
    let key = IdemKey::from_raw(key);
    let answer = match answer(&body) {
        Ok(answer) => answer,
        Err(why) => return error(StatusCode::BAD_REQUEST, &why),
    };
    if let Err(why) = console.seen(&key).await {
        return refused(console.as_ref(), &key, why).await;
    }
    tracing::info!(key = %key, by, "an unknown outcome is resolved from the console");
    let webhooks = console.webhooks.as_ref();
    match resolve::resolve(&*console.store, &key, answer, RESOLVED_TTL, webhooks).await {
        Ok(()) => after(&console, &key).await,
        Err(why) => refused(&console, &key, why).await,
    }
}

/// What a resolution's `body` asks, or why it cannot be read.
fn answer(body: &[u8]) -> Result<Answer, String> {
    let body: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    match body["outcome"].as_str() {
        Some("done") => match body.get("result") {
            Some(result) => Ok(Answer::Done(result.to_string())),
            None => Err("a resolution as done needs its result: {\"outcome\": \"done\", \"result\": ..}".into()),
        },
        Some("failed") => match body["message"].as_str().map(str::trim) {
            Some(message) if !message.is_empty() => Ok(Answer::Failed(message.to_owned())),
            _ => Err("a resolution as failed needs a message: {\"outcome\": \"failed\", \"message\": \"..\"}".into()),
        },
        Some("rerun") => Ok(Answer::Rerun),
        _ => Err("`outcome` must be \"done\", \"failed\" or \"rerun\"".into()),
    }
}

/// The record under `key` after a decision: 200 with it.
async fn after(console: &Console, key: &IdemKey) -> Response {
    console.decided().await;
    match console.visible(key).await {
        Ok(Some(record)) => ok(json!({ "record": crate::record::to_json(&record) })),
        Ok(None) => ok(json!({ "record": null })),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e),
    }
}
