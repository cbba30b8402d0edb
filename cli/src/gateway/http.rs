//! `idem gateway --http ADDR`: the gateway as a streamable HTTP endpoint at
//! `/mcp` (MCP's HTTP transport, as a server), behind bearer tokens when
//! `--token` gives any: a request's token names its user, who is the
//! principal (and so the tenant) of its calls. Without a token it serves a
//! loopback address only, unless `--allow-anonymous` says that a proxy
//! in front authenticates.
//!
//! - An `initialize` opens an MCP session (`Mcp-Session-Id`) with an
//!   upstream connection of its own (a child process of its own, or an
//!   MCP session of its own at the upstream's URL), so that nothing of one
//!   client's session (its capabilities, roots, subscriptions, log level,
//!   the upstream's requests and notifications) reaches another. Only the
//!   principal that opened a session can use it. A session whose client
//!   sent nothing for `--session-idle` (5 minutes by default), and that
//!   waits for no answer, is ended, its upstream connection with it.
//! - A request in a session is answered on its own stream of server-sent
//!   events, which also carries what belongs to it (its progress, the
//!   upstream's requests made while it runs); what belongs to no request
//!   goes on the session's standalone stream (a GET), if the client opened
//!   one. A DELETE ends the session.
//! - A request outside any session (the stateless protocol of MCP
//!   2026-07-28) goes to one upstream connection that all such requests
//!   share, under an id of the link's own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use idem::mcp::{Binding, Caller};
use serde_json::Value;
use tokio::sync::OnceCell;

use self::stream::{Abandoned, AnswerStream, Standalone, Streams, status};
use super::drain;
use super::health::{self, Health};
use super::jsonrpc::{self, Kind, code};
use super::link::{Link, Sink, Source};
use super::session::{Session, Shared, new_origin};
use crate::guard::{Guard, GuardArgs, json_text, refusal};
use crate::tokens::{bearer, may_serve, users_by_token};

mod stream;

const SESSION: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";

/// The largest request body taken: MCP messages carry files and images as
/// base64, but not without bound.
const MAX_BODY: usize = 32 << 20;

/// The user an authenticated request comes from, as [`authenticate`]
/// puts it in the request's extensions.
#[derive(Clone)]
struct User(String);

/// Users by bearer token.
type Tokens = Arc<HashMap<String, String>>;

/// The gateway's HTTP endpoint.
struct Front {
    shared: Arc<Shared>,
    source: Source,
    /// The binding each session's is made from.
    binding: Binding,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    /// The session of every request outside one.
    stateless: OnceCell<Arc<Session>>,
    /// How long a session may go without a message of its client.
    idle: Duration,
    /// How many sessions may be open at once (`--max-sessions`).
    max_sessions: Option<usize>,
}

/// One MCP session over HTTP.
struct HttpSession {
    session: Arc<Session>,
    /// Who opened it.
    principal: Option<String>,
    standalone: Arc<Standalone>,
    /// Its answer streams, for a client to resume.
    streams: Streams,
    /// When its client last sent anything.
    seen: Mutex<Instant>,
}

/// How a POST's requests are answered.
struct Answer {
    /// As server-sent events (else as JSON).
    events: bool,
    /// With a priming event, for resuming.
    prime: bool,
}

/// How the gateway serves HTTP (`--http` and the options that go with it).
pub(super) struct Options {
    /// Where it listens.
    pub(super) addr: String,
    /// Users and their tokens (`--token`).
    pub(super) tokens: Vec<(String, String)>,
    /// How long a session may be idle (`--session-idle`).
    pub(super) idle: Duration,
    /// How long writes in flight have once the gateway is told to stop
    /// (`--drain`).
    pub(super) drain: Duration,
    /// How many sessions may be open at once (`--max-sessions`).
    pub(super) max_sessions: Option<usize>,
    /// Serve an address other than loopback without a token
    /// (`--allow-anonymous`).
    pub(super) anonymous: bool,
    /// The hosts and origins served besides the endpoint's own
    /// (`--allowed-host`, `--allowed-origin`).
    pub(super) guard: GuardArgs,
}

/// Serves the gateway at `http://addr/mcp` until the process is stopped.
pub(super) async fn serve(
    shared: Arc<Shared>,
    source: Source,
    binding: Binding,
    options: Options,
) -> Result<(), String> {
    let Options {
        addr,
        tokens,
        idle,
        drain,
        max_sessions,
        anonymous,
        guard,
    } = options;
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let health = Arc::new(Health {
        shared: shared.clone(),
        source: source.clone(),
    });
    let front = Arc::new(Front {
        shared,
        source,
        binding,
        sessions: Mutex::new(HashMap::new()),
        stateless: OnceCell::new(),
        idle,
        max_sessions,
    });
    tokio::spawn(end_idle_sessions(front.clone()));
    let mut app = axum::Router::new()
        .route("/mcp", any(endpoint))
        .with_state(front.clone());
    // The address bound, for `--http 127.0.0.1:0`.
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    if anonymous && !tokens.is_empty() {
        return Err(
            "--allow-anonymous serves without tokens, yet tokens are given (--token, \
                    --token-file, IDEM_TOKEN_FILE or IDEM_TOKENS): give one or the other"
                .into(),
        );
    }
    may_serve(bound, &tokens, "call the upstream's tools", Some(anonymous))?;
    if !tokens.is_empty() {
        let tokens: Tokens = Arc::new(users_by_token(tokens)?);
        app = app.layer(axum::middleware::from_fn_with_state(tokens, authenticate));
    }
    // Outside the tokens: a preflight carries none, and a cross-site
    // request is refused before anything else is read.
    let guard = Arc::new(Guard::new(&guard, bound)?);
    app = app.layer(axum::middleware::from_fn_with_state(
        guard,
        crate::guard::layer,
    ));
    // Outside both: a probe carries no token, and may name any host.
    app = app.merge(health::routes(health));
    eprintln!("idem gateway: listening on http://{bound}/mcp");
    let server = std::future::IntoFuture::into_future(axum::serve(listener, app));
    tokio::pin!(server);
    let stopped = |e: std::io::Error| format!("the HTTP server stopped: {e}");
    let signal = tokio::select! {
        served = &mut server => return served.map_err(stopped),
        signal = drain::stop_signal() => signal,
    };
    // The server goes on answering while the writes drain: their clients
    // read their answers on it.
    tokio::select! {
        served = &mut server => served.map_err(stopped),
        () = front.drain(signal, drain) => Ok(()),
    }
}

/// A known bearer token, or 401 with a `WWW-Authenticate` challenge
/// (RFC 6750), logged at `info` without the token.
async fn authenticate(State(tokens): State<Tokens>, mut request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(bearer);
    let Some(given) = given else {
        tracing::info!("an HTTP request without a bearer token was refused");
        return challenge(None);
    };
    let Some(user) = tokens.get(given) else {
        tracing::info!("an HTTP request with an unknown bearer token was refused");
        return challenge(Some("invalid_token"));
    };
    let user = User(user.clone());
    request.extensions_mut().insert(user);
    next.run(request).await
}

/// 401, asking for a bearer token (`error`: why the one given is refused).
fn challenge(error: Option<&str>) -> Response {
    let value = match error {
        Some(error) => format!("Bearer realm=\"idem gateway\", error=\"{error}\""),
        None => "Bearer realm=\"idem gateway\"".to_owned(),
    };
    let mut response = status(StatusCode::UNAUTHORIZED, "a bearer token is needed");
    if let Ok(value) = HeaderValue::from_str(&value) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// `/mcp`: POST a message, GET the standalone stream, DELETE the session.
async fn endpoint(State(front): State<Arc<Front>>, request: Request) -> Response {
    let principal = request.extensions().get::<User>().map(|u| u.0.clone());
    let session_id = request
        .headers()
        .get(SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let session = match &session_id {
        Some(id) => match front.session(id, principal.as_deref()) {
            Some(session) => Some((id.clone(), session)),
            None => return status(StatusCode::NOT_FOUND, "no such MCP session"),
        },
        None => None,
    };
    let accepts = Accepts::of(request.headers());
    let resumed = request
        .headers()
        .get(LAST_EVENT_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Answer streams are primed for clients that know of it (SEP-1699,
    // MCP 2025-11-25 and later), as the protocol's own servers do.
    let prime = request
        .headers()
        .get(PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|version| version >= "2025-11-25");
    match *request.method() {
        // The protocol asks a client to accept both; real clients send
        // one or the other, and are answered in the form they take.
        axum::http::Method::POST if !accepts.json && !accepts.events => refusal(
            StatusCode::NOT_ACCEPTABLE,
            "a POST must accept application/json and text/event-stream in its Accept header",
        ),
        axum::http::Method::GET if !accepts.events => refusal(
            StatusCode::NOT_ACCEPTABLE,
            "a GET must accept text/event-stream in its Accept header",
        ),
        axum::http::Method::POST => {
            let body = axum::body::to_bytes(request.into_body(), MAX_BODY).await;
            match body {
                Ok(body) => {
                    let answer = Answer {
                        events: accepts.events,
                        prime,
                    };
                    front.post(&body, session, principal, answer).await
                }
                Err(_) => status(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("a request body is at most {MAX_BODY} bytes"),
                ),
            }
        }
        axum::http::Method::GET => match session {
            Some((_, session)) => match resumed {
                Some(last) => session.streams.resume(&last),
                None => session.standalone.open(),
            },
            None => status(StatusCode::BAD_REQUEST, "a GET needs an Mcp-Session-Id"),
        },
        axum::http::Method::DELETE => match session {
            Some((id, _)) => {
                front.end(&id);
                StatusCode::OK.into_response()
            }
            None => status(StatusCode::BAD_REQUEST, "a DELETE needs an Mcp-Session-Id"),
        },
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

impl Front {
    /// Session `id`, if it is open and `principal` opened it; its client
    /// is seen now.
    fn session(&self, id: &str, principal: Option<&str>) -> Option<Arc<HttpSession>> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let session = sessions
            .get(id)
            .filter(|s| s.principal.as_deref() == principal)?;
        *session.seen.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        Some(session.clone())
    }

    /// A new session, with an upstream connection of its own, or `None`
    /// if the gateway serves as many as `--max-sessions` allows.
    fn open(&self, principal: Option<String>) -> Option<(String, Arc<HttpSession>)> {
        let standalone = Arc::new(Standalone::default());
        let client: Sink = standalone.clone();
        let link = Link::new(self.source.clone(), self.shared.patience, Some(client));
        let session = Session::new(self.shared.clone(), link, self.binding.new_session());
        let http = Arc::new(HttpSession {
            session,
            principal,
            standalone,
            streams: Streams::default(),
            seen: Mutex::new(Instant::now()),
        });
        let id = session_id();
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if self.max_sessions.is_some_and(|max| sessions.len() >= max) {
            return None;
        }
        sessions.insert(id.clone(), http.clone());
        Some((id, http))
    }

    /// The answer to an `initialize` past `--max-sessions`: 503, and when
    /// to try again (when idle sessions are next looked for).
    fn full(&self) -> Response {
        let max = self.max_sessions.unwrap_or_default();
        let mut response = refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "the gateway serves at most {max} MCP sessions at once (--max-sessions): try again \
                 later, or end a session no longer used (an HTTP DELETE)"
            ),
        );
        let after = sweep_period(self.idle).as_secs().max(1);
        if let Ok(value) = HeaderValue::from_str(&after.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }

    /// Drains (see [`drain`]), told to stop by `signal`: the writes in
    /// flight have `within` to be recorded, then are given up; then every
    /// session ends.
    async fn drain(&self, signal: &str, within: Duration) {
        let drain = &self.shared.drain;
        drain.begin();
        let sessions: Vec<Arc<Session>> = self
            .lock_sessions()
            .values()
            .map(|http| http.session.clone())
            .chain(self.stateless.get().cloned())
            .collect();
        let writes: usize = sessions.iter().map(|s| s.writes_in_flight()).sum();
        eprintln!(
            "idem gateway: {signal}: draining, {writes} write(s) in flight, at most {within:?}"
        );
        if !all_settled(&sessions, within).await {
            let left: usize = sessions.iter().map(|s| s.writes_in_flight()).sum();
            tracing::warn!(
                writes = left,
                "--drain passed with writes in flight: they are given up, their outcome recorded as unknown"
            );
            drain.give_up();
            if !all_settled(&sessions, drain::RECORD_GRACE).await {
                tracing::error!(
                    "writes given up at the deadline were not recorded in time (the store does not answer?): their records are taken as uncertain once their leases lapse"
                );
            }
        }
        for session in sessions {
            session.close_now().await;
        }
        eprintln!("idem gateway: drained, stopping");
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<HttpSession>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends session `id`: once its writes in flight are recorded, its
    /// upstream connection.
    fn end(&self, id: &str) {
        let removed = self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        if let Some(http) = removed {
            tokio::spawn(async move { http.session.close().await });
        }
    }

    /// The session of requests outside one.
    async fn stateless(&self) -> Arc<Session> {
        self.stateless
            .get_or_init(|| async {
                let link = Link::new(self.source.clone(), self.shared.patience, None);
                Session::new(self.shared.clone(), link, self.binding.new_session())
            })
            .await
            .clone()
    }

    /// A POST: its messages relayed, its requests' responses streamed
    /// back.
    async fn post(
        &self,
        body: &Bytes,
        session: Option<(String, Arc<HttpSession>)>,
        principal: Option<String>,
        answer: Answer,
    ) -> Response {
        let messages = match messages(body) {
            Ok(messages) => messages,
            Err(refused) => return json_text(StatusCode::BAD_REQUEST, refused.to_string()),
        };
        let opens = messages.iter().any(|m| {
            jsonrpc::method(m) == Some("initialize") && jsonrpc::kind(m) == Some(Kind::Request)
        });
        let (opened, session) = match session {
            Some((id, session)) => (Some(id), Some(session)),
            None if opens && self.shared.drain.draining() => return shutting_down(),
            None if opens => {
                let Some((id, session)) = self.open(principal.clone()) else {
                    return self.full();
                };
                (Some(id), Some(session))
            }
            None => (None, None),
        };
        let (target, origin, standalone) = match &session {
            Some(http) => (
                http.session.clone(),
                http.session.origin(),
                Some(http.standalone.clone()),
            ),
            None => (self.stateless().await, new_origin(), None),
        };
        let caller = Caller::http(principal, opened.as_deref());
        let awaited: Vec<Value> = messages
            .iter()
            .filter(|m| jsonrpc::kind(m) == Some(Kind::Request))
            .filter_map(|m| jsonrpc::id(m).cloned())
            .collect();
        let answers = !awaited.is_empty();
        // A session keeps the streams of its requests, for resuming; what
        // else comes of a POST without requests goes to its standalone.
        let stream = match (&session, answers) {
            (Some(http), true) => http.streams.open(awaited, standalone),
            _ => Arc::new(AnswerStream::new(0, awaited, standalone)),
        };
        let sink: Sink = stream.clone();
        // Outside a session, the client's closing the answer stream is
        // how it cancels (it cannot resume it): what it has not been
        // answered stops waiting for a person. Dropped with the answer
        // (its stream's body, or this handler's future).
        let abandoned = (session.is_none() && answers).then(|| {
            let target = target.clone();
            Abandoned::new(stream.clone(), move |ids| target.abandoned(origin, &ids))
        });
        for message in messages {
            target
                .handle(message, origin, sink.clone(), caller.clone())
                .await;
        }
        if !answers {
            return StatusCode::ACCEPTED.into_response();
        }
        let mut response = if answer.events {
            // Only a session's streams can be resumed.
            stream.events(0, answer.prime && session.is_some(), abandoned)
        } else {
            let json = stream.json().await;
            drop(abandoned);
            json
        };
        if let Some(id) = opened.and_then(|id| HeaderValue::from_str(&id).ok()) {
            response.headers_mut().insert(SESSION, id);
        }
        response
    }
}

/// The answer to an `initialize` while the gateway drains: 503, to try
/// again (elsewhere, behind a load balancer) at once.
fn shutting_down() -> Response {
    let mut response = refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        "idem gateway is shutting down: open the session again (another gateway on the same \
         store serves it)",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The JSON-RPC messages of a POST's `body` (one, or a batch), or the
/// JSON-RPC error that refuses it.
fn messages(body: &Bytes) -> Result<Vec<Value>, Value> {
    let messages = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Array(batch)) => batch,
        Ok(message) => vec![message],
        Err(e) => {
            let refused = jsonrpc::error(Value::Null, code::PARSE_ERROR, &e.to_string());
            return Err(refused);
        }
    };
    if messages.is_empty() || messages.iter().any(|m| jsonrpc::kind(m).is_none()) {
        let refused = jsonrpc::error(
            Value::Null,
            code::INVALID_REQUEST,
            "the body is not a JSON-RPC request, notification or response, nor a batch of them",
        );
        return Err(refused);
    }
    Ok(messages)
}

/// How often sessions idle for `idle` are looked for.
fn sweep_period(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30))
}

/// Ends, now and then, the sessions whose client has sent nothing for
/// the front's `idle` and that wait for no answer.
async fn end_idle_sessions(front: Arc<Front>) {
    let every = sweep_period(front.idle);
    loop {
        tokio::time::sleep(every).await;
        let idle: Vec<String> = {
            let sessions = front
                .sessions
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            sessions
                .iter()
                .filter(|(_, s)| {
                    let seen = *s.seen.lock().unwrap_or_else(PoisonError::into_inner);
                    seen.elapsed() >= front.idle && !s.session.busy()
                })
                .map(|(id, _)| id.clone())
                .collect()
        };
        for id in idle {
            tracing::info!(session = %id, "an idle MCP session is ended");
            front.end(&id);
        }
    }
}

/// What a request's `Accept` takes of the two forms an answer comes in.
#[derive(Debug, Default, PartialEq, Eq)]
struct Accepts {
    json: bool,
    events: bool,
}

impl Accepts {
    /// Read from `headers`: each media range, less those of weight 0.
    fn of(headers: &HeaderMap) -> Accepts {
        let mut accepts = Accepts::default();
        let ranges = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','));
        for range in ranges {
            let mut parts = range.split(';').map(str::trim);
            let essence = parts.next().unwrap_or_default().to_ascii_lowercase();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            if refused {
                continue;
            }
            match essence.as_str() {
                "*/*" => (accepts.json, accepts.events) = (true, true),
                "application/json" | "application/*" => accepts.json = true,
                "text/event-stream" | "text/*" => accepts.events = true,
                _ => {}
            }
        }
        accepts
    }
}

/// A new session id: 128 random bits, in hex.
fn session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).unwrap_or_else(|_| {
        // No system randomness: the time and a counter, still unique.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes = (nanos ^ u128::from(new_origin())).to_le_bytes();
    });
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether every write in flight in `sessions` was answered and recorded
/// within `within`.
async fn all_settled(sessions: &[Arc<Session>], within: Duration) -> bool {
    let settled = async {
        for session in sessions {
            session.settled().await;
        }
    };
    tokio::time::timeout(within, settled).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_is_read_as_media_ranges() {
        let of = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::ACCEPT,
                HeaderValue::from_str(value).expect("a value"),
            );
            Accepts::of(&headers)
        };
        let both = Accepts {
            json: true,
            events: true,
        };
        assert_eq!(of("application/json, text/event-stream"), both);
        assert_eq!(of("*/*"), both);
        assert_eq!(of("text/event-stream;q=0.5, Application/JSON"), both);
        assert!(!of("application/json, text/event-stream;q=0").events);
        assert_eq!(of("text/html"), Accepts::default());
        assert_eq!(Accepts::of(&HeaderMap::new()), Accepts::default());
    }
}
