//! What every HTTP endpoint of `idem` (the gateway's `/mcp`) checks before
//! it reads a request, so that a web page the user happens to visit cannot
//! use it: the `Host` the request was addressed to (against DNS
//! rebinding), the `Origin` of a browser's request (against cross-site
//! requests), and a POST's `Content-Type` (a browser sends
//! `application/json` to another site only after a preflight, which only
//! an allowed origin passes). Allowed origins get CORS headers; nothing
//! else does.
//!
//! - `Host` must name the endpoint: a loopback name (`localhost`,
//!   `127.0.0.1`, `[::1]`), the address it listens on, or a name given
//!   with `--allowed-host` (`*`: any, for a proxy in front that checks).
//! - `Origin` may be absent (a program, not a browser), the endpoint's own
//!   (scheme, host and port of the `Host` it was sent to), or one given
//!   with `--allowed-origin`. Anything else, `null` included, is refused.
//! - A POST's body must be `application/json`, but at the paths an
//!   endpoint takes a form at ([`Guard::with_form`]).
//!
//! A refusal is a 403 or 415 with a JSON-RPC error body that names the
//! header and the flag that would allow it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use clap::Args;
use serde_json::json;

/// The options that widen what the guard lets through.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct GuardArgs {
    /// Over HTTP, also serve requests addressed to this host name (or
    /// `host:port`) in their `Host` header (repeatable; `*` for any, behind
    /// a proxy that checks it). Loopback names and the address listened on
    /// are always served.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub(crate) hosts: Vec<String>,
    /// Over HTTP, let web pages of this origin (`https://app.example.com`,
    /// `http://localhost:3000`) call the endpoint, with CORS (repeatable).
    /// Requests from any other page are refused.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub(crate) origins: Vec<String>,
}

/// The checks, made once from the options and the address listened on.
#[derive(Debug)]
pub(crate) struct Guard {
    /// `None`: any host (`--allowed-host '*'`).
    hosts: Option<Vec<Authority>>,
    origins: Vec<Origin>,
    /// The paths whose POST may be an HTML form (the console's sign-in):
    /// its `Origin` is checked all the same.
    forms: Vec<&'static str>,
}

/// A host name and perhaps a port, lowercased, IPv6 without brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

/// A web origin, its port made explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

/// Why a request is refused, as its answer.
struct Refusal {
    status: StatusCode,
    message: String,
}

/// The request headers a page of an allowed origin may send.
const ALLOWED_HEADERS: &str =
    "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id";
/// The response headers such a page may read.
const EXPOSED_HEADERS: &str = "mcp-session-id, mcp-protocol-version, www-authenticate";

impl Guard {
    /// The guard of an endpoint listening on `bound`, widened by `args`;
    /// `Err` names a value that is not a host or an origin.
    pub(crate) fn new(args: &GuardArgs, bound: SocketAddr) -> Result<Guard, String> {
        let hosts = if args.hosts.iter().any(|h| h.trim() == "*") {
            None
        } else {
            let mut hosts: Vec<Authority> = ["localhost", "127.0.0.1", "::1"]
                .iter()
                .map(|host| Authority {
                    host: (*host).to_owned(),
                    port: None,
                })
                .collect();
            if !bound.ip().is_unspecified() {
                hosts.push(Authority {
                    host: bound.ip().to_string(),
                    port: None,
                });
            }
            for given in &args.hosts {
                hosts.push(Authority::parse(given).ok_or_else(|| {
                    format!("--allowed-host `{given}` is not a host name or host:port")
                })?);
            }
            Some(hosts)
        };
        let origins = args
            .origins
            .iter()
            .map(|given| {
                Origin::parse(given).ok_or_else(|| {
                    format!(
                        "--allowed-origin `{given}` is not an origin: give a scheme, a host and \
                         perhaps a port, as `https://app.example.com` or `http://localhost:3000`"
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Guard {
            hosts,
            origins,
            forms: Vec::new(),
        })
    }

    /// The guard, taking a POST of an HTML form at `path` (whose `Origin`
    /// is checked as any other's).
    pub(crate) fn with_form(mut self, path: &'static str) -> Guard {
        self.forms.push(path);
        self
    }

    /// The request's `Host`, if it is one the endpoint serves.
    fn host(&self, headers: &HeaderMap) -> Result<Authority, Refusal> {
        let given = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let Some(host) = given.and_then(Authority::parse) else {
            return Err(Refusal::forbidden(
                "the request has no readable Host header".to_owned(),
            ));
        };
        let served = match &self.hosts {
            None => true,
            Some(hosts) => hosts
                .iter()
                .any(|h| h.host == host.host && h.port.is_none_or(|p| Some(p) == host.port)),
        };
        if served {
            return Ok(host);
        }
        let given = given.unwrap_or_default();
        Err(Refusal::forbidden(format!(
            "the Host header `{given}` names no host this endpoint serves (a web page may be \
             reaching it through DNS rebinding); to serve that name, start it with \
             --allowed-host {}",
            host.host
        )))
    }

    /// The request's `Origin`, if it must be answered with CORS headers
    /// (a page of an allowed origin); `Ok(None)` for a request with no
    /// `Origin` or of the endpoint's own (its host and port, whatever the
    /// scheme: a proxy in front may speak TLS).
    fn origin(&self, headers: &HeaderMap, host: &Authority) -> Result<Option<Origin>, Refusal> {
        let Some(value) = headers.get(header::ORIGIN) else {
            return Ok(None);
        };
        let given = value.to_str().unwrap_or_default();
        let origin = Origin::parse(given);
        if let Some(origin) = &origin {
            if self.origins.contains(origin) {
                return Ok(Some(origin.clone()));
            }
            let default = if origin.scheme == "https" { 443 } else { 80 };
            if origin.host == host.host && origin.port == host.port.unwrap_or(default) {
                return Ok(None);
            }
        }
        Err(Refusal::forbidden(format!(
            "a web page of origin `{given}` may not call this endpoint; to let it, start it with \
             --allowed-origin {given}"
        )))
    }
}

impl Authority {
    /// `host`, `host:port`, `[v6]` or `[v6]:port`.
    fn parse(given: &str) -> Option<Authority> {
        let given = given.trim().to_ascii_lowercase();
        let authority: axum::http::uri::Authority = given.parse().ok()?;
        if authority.as_str().contains('@') {
            return None;
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        Some(Authority {
            host: host.to_owned(),
            port: authority.port_u16(),
        })
    }
}

impl Origin {
    /// `scheme://host[:port]`, nothing after it but perhaps a `/`.
    fn parse(given: &str) -> Option<Origin> {
        let given = given.trim().to_ascii_lowercase();
        let (scheme, rest) = given.split_once("://")?;
        let default = match scheme {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let authority = Authority::parse(rest.strip_suffix('/').unwrap_or(rest))?;
        Some(Origin {
            scheme: scheme.to_owned(),
            host: authority.host,
            port: authority.port.unwrap_or(default),
        })
    }

    /// As a browser writes it in `Origin`.
    fn header(&self) -> Option<HeaderValue> {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default = if self.scheme == "https" { 443 } else { 80 };
        let text = if self.port == default {
            format!("{}://{host}", self.scheme)
        } else {
            format!("{}://{host}:{}", self.scheme, self.port)
        };
        HeaderValue::from_str(&text).ok()
    }
}

impl Refusal {
    fn forbidden(message: String) -> Refusal {
        Refusal {
            status: StatusCode::FORBIDDEN,
            message,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        tracing::info!(status = %self.status, "an HTTP request was refused: {}", self.message);
        refusal(self.status, &self.message)
    }
}

/// A refusal of the whole HTTP request, with a JSON-RPC error as its body
/// (the request's id is not read: it is `null`).
pub(crate) fn refusal(status: StatusCode, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": message},
    });
    json_text(status, body.to_string())
}

/// `body`, JSON text, as a response of `status`.
pub(crate) fn json_text(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Whether `headers` say the body is JSON (`application/json`, perhaps
/// with parameters).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim())
        .is_some_and(|essence| essence.eq_ignore_ascii_case("application/json"))
}

/// The guard as a layer: refuses what it must, answers a preflight of an
/// allowed origin, and adds CORS headers to what that origin is answered.
pub(crate) async fn layer(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let checked = guard
        .host(request.headers())
        .and_then(|host| guard.origin(request.headers(), &host));
    let cross = match checked {
        Ok(cross) => cross,
        Err(refusal) => return refusal.into_response(),
    };
    let cors = cross.as_ref().and_then(Origin::header);
    if request.method() == Method::OPTIONS {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::ALLOW,
            HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
        );
        if let Some(origin) = cors {
            allow(headers, origin);
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, DELETE"),
            );
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(ALLOWED_HEADERS),
            );
            headers.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
        }
        return response;
    }
    let form = guard.forms.contains(&request.uri().path());
    if request.method() == Method::POST && !is_json(request.headers()) && !form {
        let mut response = refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a POST's body must be JSON, sent as Content-Type: application/json",
        );
        if let Some(origin) = cors {
            allow(response.headers_mut(), origin);
        }
        return response;
    }
    let mut response = next.run(request).await;
    if let Some(origin) = cors {
        allow(response.headers_mut(), origin);
    }
    response
}

/// The CORS headers of an answer to a page of `origin`, an allowed one.
fn allow(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED_HEADERS),
    );
    headers.append(header::VARY, HeaderValue::from_static("origin"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(hosts: &[&str], origins: &[&str]) -> Guard {
        let args = GuardArgs {
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            origins: origins.iter().map(|o| (*o).to_owned()).collect(),
        };
        Guard::new(&args, "127.0.0.1:8080".parse().expect("an address")).expect("a guard")
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(name, HeaderValue::from_str(value).expect("a header value"));
        }
        headers
    }

    #[test]
    fn loopback_names_are_served_and_others_only_when_allowed() {
        let guard = self::guard(&["mcp.example.com:8443"], &[]);
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "LOCALHOST",
        ] {
            assert!(
                guard.host(&headers(&[(header::HOST, host)])).is_ok(),
                "{host}"
            );
        }
        assert!(
            guard
                .host(&headers(&[(header::HOST, "mcp.example.com:8443")]))
                .is_ok()
        );
        for host in [
            "evil.example.com",
            "mcp.example.com:80",
            "127.0.0.1.evil.com:8080",
            "u@localhost",
        ] {
            let refused = guard.host(&headers(&[(header::HOST, host)]));
            let refused = refused.expect_err(host);
            assert_eq!(refused.status, StatusCode::FORBIDDEN);
        }
        let refused = guard.host(&headers(&[(header::HOST, "evil.example.com")]));
        let message = refused.expect_err("refused").message;
        assert!(
            message.contains("--allowed-host evil.example.com"),
            "{message}"
        );
        assert!(guard.host(&HeaderMap::new()).is_err(), "no Host at all");
        let any = self::guard(&["*"], &[]);
        assert!(
            any.host(&headers(&[(header::HOST, "anything.example")]))
                .is_ok()
        );
    }

    #[test]
    fn an_origin_passes_when_it_is_the_endpoints_own_or_allowed() {
        let guard = self::guard(&[], &["https://app.example.com", "http://localhost:3000/"]);
        let host = Authority::parse("127.0.0.1:8080").expect("a host");
        let origin = |value: &str| guard.origin(&headers(&[(header::ORIGIN, value)]), &host);
        assert!(matches!(guard.origin(&HeaderMap::new(), &host), Ok(None)));
        assert!(
            matches!(origin("http://127.0.0.1:8080"), Ok(None)),
            "its own"
        );
        // Its own behind a proxy that speaks TLS (the Host has no port).
        let proxied = Authority::parse("mcp.example.com").expect("a host");
        let own = headers(&[(header::ORIGIN, "https://mcp.example.com")]);
        assert!(matches!(guard.origin(&own, &proxied), Ok(None)));
        let allowed = origin("https://app.example.com:443").ok().flatten();
        assert_eq!(
            allowed.and_then(|o| o.header()),
            Some(HeaderValue::from_static("https://app.example.com"))
        );
        assert!(matches!(origin("http://localhost:3000"), Ok(Some(_))));
        for refused in [
            "http://evil.example.com",
            "http://127.0.0.1:9999",
            "null",
            "http://localhost:3001",
            "",
        ] {
            let refused = origin(refused).expect_err(refused);
            assert_eq!(refused.status, StatusCode::FORBIDDEN);
            assert!(
                refused.message.contains("--allowed-origin"),
                "{}",
                refused.message
            );
        }
    }

    #[test]
    fn what_is_not_a_host_or_an_origin_is_refused_at_start() {
        let bound = "127.0.0.1:0".parse().expect("an address");
        let args = |hosts: &[&str], origins: &[&str]| GuardArgs {
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            origins: origins.iter().map(|o| (*o).to_owned()).collect(),
        };
        let bad_origin = Guard::new(&args(&[], &["app.example.com"]), bound);
        assert!(
            bad_origin
                .expect_err("no scheme")
                .contains("`app.example.com`")
        );
        assert!(Guard::new(&args(&[], &["ftp://x"]), bound).is_err());
        assert!(Guard::new(&args(&["a b"], &[]), bound).is_err());
    }

    #[test]
    fn only_json_is_a_body() {
        let json = |value: &str| is_json(&headers(&[(header::CONTENT_TYPE, value)]));
        assert!(json("application/json"));
        assert!(json("Application/JSON; charset=utf-8"));
        assert!(!json("text/plain"));
        assert!(!json("application/x-www-form-urlencoded"));
        assert!(!is_json(&HeaderMap::new()));
    }
}
