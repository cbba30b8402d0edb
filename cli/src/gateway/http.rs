//! `idem gateway --http ADDR`: the gateway as a streamable HTTP endpoint at
//! `/mcp`, a handler per MCP session, behind bearer tokens when `--token`
//! gives any: a request's token names its user, who is the principal (and
//! so the tenant) of its calls, as the library's MCP server takes a
//! principal from its hook.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::server::Gateway;

/// The user an authenticated request comes from, as [`authenticate`]
/// puts it in the request's extensions for the principal hook.
#[derive(Clone)]
struct User(String);

/// Users by bearer token.
type Tokens = Arc<HashMap<String, String>>;

/// `USER=TOKEN`.
pub(super) fn user_token(given: &str) -> Result<(String, String), String> {
    match given.split_once('=') {
        Some((user, token)) if !user.is_empty() && !token.is_empty() => {
            Ok((user.to_owned(), token.to_owned()))
        }
        _ => Err("expected USER=TOKEN".to_owned()),
    }
}

/// Serves `gateway` at `http://addr/mcp` until the process is stopped.
pub(super) async fn serve(
    mut gateway: Gateway,
    addr: &str,
    tokens: Vec<(String, String)>,
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    if !tokens.is_empty() {
        gateway.binding = gateway
            .binding
            .with_principal(|request| request.extensions.get::<User>().map(|u| u.0.clone()));
    }
    let service = StreamableHttpService::new(
        move || Ok(gateway.new_session()),
        Arc::new(LocalSessionManager::default()),
        Default::default(),
    );
    let mut app = axum::Router::new().nest_service("/mcp", service);
    if !tokens.is_empty() {
        let tokens: Tokens = Arc::new(tokens.into_iter().map(|(u, t)| (t, u)).collect());
        app = app.layer(axum::middleware::from_fn_with_state(tokens, authenticate));
    }
    // The address bound, for `--http 127.0.0.1:0`.
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("idem gateway: listening on http://{bound}/mcp");
    axum::serve(listener, app)
        .await
        .map_err(|e| format!("the HTTP server stopped: {e}"))
}

/// A known bearer token, or 401.
async fn authenticate(
    State(tokens): State<Tokens>,
    mut request: Request,
    next: Next,
) -> Result<Response, StatusCode> {
    let user = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .and_then(|token| tokens.get(token))
        .ok_or(StatusCode::UNAUTHORIZED)?;
    let user = User(user.clone());
    request.extensions_mut().insert(user);
    Ok(next.run(request).await)
}
