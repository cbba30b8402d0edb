//! `/healthz` and `/readyz` of `idem gateway --http`, for a load balancer
//! and an orchestrator: served outside the tokens and the cross-site
//! guard, since a probe carries neither, and saying nothing of any call,
//! argument, tenant or token.
//!
//! - `GET /healthz`: 200 while the process serves HTTP at all.
//! - `GET /readyz`: 200 when the gateway can take a call now: the store
//!   answers a read, and the upstream is there (its program is found, or
//!   its URL takes a connection); else 503 with what is missing. A
//!   gateway that is draining (SIGTERM) is not ready. Each check is
//!   bounded by [`CHECK_BOUND`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use idem::{IdemKey, IdemStore};
use serde_json::json;

use super::link::Source;
use super::session::Shared;

/// How long a readiness check waits for the store or the upstream.
pub(super) const CHECK_BOUND: Duration = Duration::from_secs(2);

/// What the checks look at.
pub(super) struct Health {
    /// The store, and the drain (a gateway that drains is not ready).
    pub(super) shared: Arc<Shared>,
    pub(super) source: Source,
}

/// The two routes, for merging outside the tokens.
pub(super) fn routes(health: Arc<Health>) -> axum::Router {
    axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health)
}

async fn healthz() -> Response {
    answer(StatusCode::OK, json!({"status": "serving"}))
}

async fn readyz(State(health): State<Arc<Health>>) -> Response {
    if health.shared.drain.draining() {
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "draining"}),
        );
    }
    let store = &*health.shared.settings.store;
    let (store, upstream) = tokio::join!(store_answers(store), upstream(&health.source));
    let ready = store.is_ok() && upstream.is_ok();
    let said = |check: Result<(), String>| check.err().unwrap_or_else(|| "ok".to_owned());
    let body = json!({
        "status": if ready { "ready" } else { "not ready" },
        "store": said(store),
        "upstream": said(upstream),
    });
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    answer(code, body)
}

/// JSON, never cached.
fn answer(code: StatusCode, body: serde_json::Value) -> Response {
    (
        code,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// Whether the store answers a read of a key no call writes, within the
/// bound. The answer says what failed, the log why: a store's message
/// could name a host or a user.
async fn store_answers(store: &dyn IdemStore) -> Result<(), String> {
    let probe = IdemKey::from_raw("idem-readyz");
    match tokio::time::timeout(CHECK_BOUND, store.get(&probe)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "/readyz: the store failed a read");
            Err(if e.is_unreachable() {
                "the store cannot be reached".to_owned()
            } else {
                "the store failed a read".to_owned()
            })
        }
        Err(_) => Err(format!("the store did not answer within {CHECK_BOUND:?}")),
    }
}

/// Whether the upstream is there: a command's program is found (a new
/// session starts it), a URL takes a TCP connection within the bound.
async fn upstream(source: &Source) -> Result<(), String> {
    match source {
        Source::Command(argv) => {
            let program = argv.first().map(String::as_str).unwrap_or_default();
            if program_found(program) {
                Ok(())
            } else {
                Err("the upstream's program is not found".to_owned())
            }
        }
        Source::Url(url) => {
            let Some(addr) = host_port(url) else {
                return Err("the upstream's URL names no host".to_owned());
            };
            match tokio::time::timeout(CHECK_BOUND, tokio::net::TcpStream::connect(addr)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(format!("the upstream refuses a connection ({})", e.kind())),
                Err(_) => Err(format!(
                    "the upstream took no connection within {CHECK_BOUND:?}"
                )),
            }
        }
    }
}

/// Whether `program` names an executable file: as a path, or on `PATH`.
fn program_found(program: &str) -> bool {
    if program.is_empty() {
        return false;
    }
    if program.contains(std::path::MAIN_SEPARATOR) {
        return executable(Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(program))))
}

fn executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// `host:port` of an `http(s)://` URL, the scheme's port if it gives none.
fn host_port(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    if authority.is_empty() {
        return None;
    }
    // A port after the host (an IPv6 host is bracketed).
    let after_host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.1,
        None => authority,
    };
    if after_host.contains(':') {
        return Some(authority.to_owned());
    }
    let port = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    Some(format!("{authority}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_host_and_port_are_found() {
        assert_eq!(
            host_port("http://127.0.0.1:8080/mcp").as_deref(),
            Some("127.0.0.1:8080")
        );
        assert_eq!(
            host_port("https://mcp.example.com/x?y").as_deref(),
            Some("mcp.example.com:443")
        );
        assert_eq!(host_port("http://u:p@h:81/").as_deref(), Some("h:81"));
        assert_eq!(
            host_port("http://[::1]:9000/mcp").as_deref(),
            Some("[::1]:9000")
        );
        assert_eq!(host_port("http://[::1]/mcp").as_deref(), Some("[::1]:80"));
        assert_eq!(host_port("no scheme"), None);
        assert_eq!(host_port("http:///mcp"), None);
    }

    #[test]
    fn a_program_is_found_on_the_path_or_as_a_path() {
        assert!(program_found("sh"));
        assert!(program_found("/bin/sh"));
        assert!(!program_found("idem-no-such-program"));
        assert!(!program_found("/nonexistent/sh"));
        assert!(!program_found(""));
    }
}
