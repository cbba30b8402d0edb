//! Signing in: the API takes a bearer token (`Authorization: Bearer`)
//! or a signed-in page's session cookie; the page's sign-in form trades a
//! token for that cookie (HttpOnly, SameSite=Strict, a random id that
//! names the user here and nowhere else). Who they name is `users.rs`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};

use super::reply::error;
use super::state::Console;
use super::users::{COOKIE, SESSION_LIFE, User};

/// The page, and the sign-in page, embedded.
const PAGE: &str = include_str!("page.html");
const SIGN_IN: &str = include_str!("sign_in.html");

/// The API's authentication: a known user, or 401 with a bearer
/// challenge.
pub(super) async fn authenticated(
    State(console): State<Arc<Console>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(user) = console.users.who(request.headers()) else {
        let mut refused = error(
            StatusCode::UNAUTHORIZED,
            "sign in: a bearer token (Authorization: Bearer TOKEN) or the page's session",
        );
        refused.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"idem console\""),
        );
        return refused;
    };
    request.extensions_mut().insert(User(user));
    next.run(request).await
}

/// `GET /`: the page, or the sign-in form for who is not signed in.
pub(super) async fn page(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    match console.users.who(&headers) {
        Some(_) => Html(PAGE).into_response(),
        None => Html(SIGN_IN.replace("{error}", "")).into_response(),
    }
}

/// `POST /sign-in`, a form with `token`: a session cookie and the page,
/// or the form again saying the token is not known.
pub(super) async fn sign_in(State(console): State<Arc<Console>>, body: Bytes) -> Response {
    let token = form_urlencoded::parse(&body)
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    let Some(user) = console.users.of_token(token.trim()) else {
        tracing::info!("a sign-in with an unknown token was refused");
        let again = SIGN_IN.replace(
            "{error}",
            "<p class=\"error\" role=\"alert\">That token is not known here.</p>",
        );
        return (StatusCode::UNAUTHORIZED, Html(again)).into_response();
    };
    let Some(id) = console.users.open(user) else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no randomness to make a session id from",
        );
    };
    let cookie = format!(
        "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_LIFE.as_secs()
    );
    redirect_home(Some(cookie))
}

/// `POST /sign-out`: the session ends, the cookie goes.
pub(super) async fn sign_out(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    console.users.sign_out(&headers);
    redirect_home(Some(format!(
        "{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
    )))
}

/// 303 to `/`, setting `cookie`.
fn redirect_home(cookie: Option<String>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_static("/"));
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        headers.insert(header::SET_COOKIE, value);
    }
    response
}
