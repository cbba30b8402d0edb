//! The upstream as a streamable HTTP endpoint (MCP's HTTP transport, as a
//! client): every message is a POST; a request's answer comes as JSON or as
//! a stream of server-sent events that carries, before it, what the server
//! sends while it works; the MCP session the server issues at `initialize`
//! (`Mcp-Session-Id`) is sent back on every request, and a standalone
//! stream (a GET) carries what belongs to no request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use serde_json::{Value, json};

use super::inbox::{Inbound, Inbox};
use crate::gateway::jsonrpc;
use crate::gateway::metrics::Open;

const SESSION: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";

/// An MCP session at a URL.
pub(super) struct Http {
    client: reqwest::Client,
    url: Arc<str>,
    inbox: Inbox,
    session: Arc<Mutex<Option<String>>>,
    /// The protocol version the session negotiated, sent as a header once
    /// known (the link learns it from the answer to `initialize`).
    protocol_version: Arc<Mutex<Option<String>>>,
    /// False once the server said it does not know the session, or could
    /// not be reached: the next use makes a new connection.
    alive: Arc<AtomicBool>,
    /// The server refused a request sent without a session: the link must
    /// open one (an `initialize` of its own) before it sends again.
    needs_session: AtomicBool,
    _open: Open,
}

impl Http {
    /// A client of the endpoint at `url`; what it sends goes to `inbox`.
    pub(super) fn new(
        url: &str,
        inbox: Inbox,
        protocol_version: Arc<Mutex<Option<String>>>,
    ) -> Result<Http, String> {
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Http {
            client,
            url: url.into(),
            inbox,
            session: Arc::new(Mutex::new(None)),
            protocol_version,
            alive: Arc::new(AtomicBool::new(true)),
            needs_session: AtomicBool::new(false),
            _open: Open::upstream(),
        })
    }

    pub(super) fn alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// Whether the server issued a session.
    pub(super) fn has_session(&self) -> bool {
        self.session().is_some()
    }

    /// Whether the server refused the last request for having no session.
    pub(super) fn needs_session(&self) -> bool {
        self.needs_session.load(Ordering::Relaxed)
    }

    fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// POSTs `message` (`id`: the request's, if it is one) and hands what
    /// comes back to the inbox, the answer and whatever comes before it
    /// on its stream. `Err` means it was not delivered: the server could
    /// not be reached, or does not know the session any more.
    pub(super) async fn send(&self, message: &Value, id: Option<u64>) -> Result<(), String> {
        let mut post = self
            .client
            .post(&*self.url)
            .header(ACCEPT, "application/json, text/event-stream")
            .json(message);
        // In a session, the version it negotiated; outside one (MCP
        // 2026-07-28), the one the request names.
        let session = self.session();
        let negotiated = || {
            self.protocol_version
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        };
        let named = || {
            message
                .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let version = match &session {
            Some(_) => negotiated().or_else(named),
            None => named().or_else(negotiated),
        };
        if let Some(version) = version {
            post = post.header(PROTOCOL_VERSION, version);
        }
        if let Some(session) = &session {
            post = post.header(SESSION, session);
        }
        let response = match post.send().await {
            Ok(response) => response,
            Err(e) if e.is_connect() => {
                self.alive.store(false, Ordering::Relaxed);
                return Err(format!("cannot reach {}: {e}", self.url));
            }
            Err(e) => return self.lost(id, format!("the request to {} failed: {e}", self.url)),
        };
        let status = response.status();
        if status == StatusCode::NOT_FOUND && session.is_some() {
            self.alive.store(false, Ordering::Relaxed);
            return Err("the upstream server ended the MCP session".into());
        }
        if let Some(issued) = response
            .headers()
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
        {
            self.needs_session.store(false, Ordering::Relaxed);
            let first = self
                .session
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .replace(issued.to_owned())
                .is_none();
            if first {
                self.standalone();
            }
        }
        if status == StatusCode::ACCEPTED || id.is_none() {
            return Ok(());
        }
        if !status.is_success() {
            return self.refused(response, message, session.is_some(), id).await;
        }
        let resume = self.resume();
        tokio::spawn(read_answer(response, resume, id));
        Ok(())
    }

    /// The server answered request `id` with an HTTP error: it did not
    /// take it. A request refused for want of a session (`400`, a server
    /// that serves sessions only) is not delivered: the link opens one and
    /// sends it again. Any other refusal is the request's answer, as the
    /// JSON-RPC error the server gave, or one made of its status and text.
    async fn refused(
        &self,
        response: reqwest::Response,
        message: &Value,
        had_session: bool,
        id: Option<u64>,
    ) -> Result<(), String> {
        let status = response.status();
        let body = response.bytes().await.unwrap_or_default();
        let given = serde_json::from_slice::<Value>(&body).ok();
        let error = given.as_ref().and_then(|m| m.get("error")).cloned();
        let said = match error.as_ref().and_then(|e| e.get("message")) {
            Some(Value::String(text)) => text.clone(),
            _ => String::from_utf8_lossy(&body[..body.len().min(500)])
                .trim()
                .to_owned(),
        };
        let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        if status == StatusCode::BAD_REQUEST && !had_session && !initialize {
            self.needs_session.store(true, Ordering::Relaxed);
            return Err(format!(
                "the upstream server needs an MCP session (HTTP {status}: {said})"
            ));
        }
        let error = error.unwrap_or_else(|| {
            json!({"code": jsonrpc::code::INTERNAL_ERROR,
                   "message": format!("the upstream server answered HTTP {status}: {said}")})
        });
        if let Some(id) = id {
            let answer = json!({"jsonrpc": "2.0", "id": id, "error": error});
            let _ = self.inbox.send(Inbound::Message(answer, Some(id)));
        }
        Ok(())
    }

    /// Request `id` was (or may have been) delivered and will get no
    /// answer on its stream.
    fn lost(&self, id: Option<u64>, why: String) -> Result<(), String> {
        if let Some(id) = id {
            let _ = self.inbox.send(Inbound::Gone(id, why));
        }
        Ok(())
    }

    /// What a reader of the session's streams needs to resume one.
    fn resume(&self) -> Resume {
        Resume {
            client: self.client.clone(),
            url: self.url.clone(),
            session: self.session.clone(),
            protocol_version: self.protocol_version.clone(),
            inbox: self.inbox.clone(),
            alive: self.alive.clone(),
        }
    }

    /// Opens the standalone stream (a GET), if the server offers one, and
    /// opens it again whenever the server closes it, for as long as the
    /// server takes it back: after the last event, with `Last-Event-ID`,
    /// so that what was sent meanwhile comes too.
    fn standalone(&self) {
        let resume = self.resume();
        tokio::spawn(async move {
            let mut cursor = Cursor::default();
            let mut first = true;
            while resume.alive.load(Ordering::Relaxed) {
                if !first {
                    tokio::time::sleep(cursor.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY)).await;
                }
                first = false;
                let Some(response) = resume.get(cursor.last_event_id.as_deref()).await else {
                    return;
                };
                read_events(response, &resume.inbox, None, &mut cursor).await;
            }
        });
    }

    /// Ends the MCP session (a DELETE).
    pub(super) async fn close(&self) {
        self.alive.store(false, Ordering::Relaxed);
        if let Some(session) = self.session() {
            let delete = self.client.delete(&*self.url).header(SESSION, session);
            let _ = delete.send().await;
        }
    }
}

fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// Where a stream of server-sent events can be resumed (SEP-1699): the
/// id of its last event, and how long the server asks a client to wait
/// before it reconnects.
#[derive(Default)]
struct Cursor {
    last_event_id: Option<String>,
    retry: Option<Duration>,
}

/// The wait before a reconnection when the server names none.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// The longest wait before a reconnection, whatever the server asks.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// How many reconnections in a row may bring nothing new before the
/// stream is taken as lost.
const FRUITLESS_RESUMES: u32 = 5;

/// Hands the messages of the answer to request `id` to `inbox`. A stream
/// of events that ends before the answer, after an event id, is resumed
/// as a client must: after the `retry` the server asked, a GET with
/// `Last-Event-ID`, again as long as the server takes it and sends
/// something new. If the answer never comes, says so: an uncertain
/// outcome, never a refusal.
async fn read_answer(response: reqwest::Response, resume: Resume, id: Option<u64>) {
    let inbox = resume.inbox.clone();
    let answered = if content_type(response.headers()).starts_with("text/event-stream") {
        let mut cursor = Cursor::default();
        let answered = read_events(response, &inbox, id, &mut cursor).await;
        answered || resume.again(&mut cursor, id).await
    } else {
        match response.bytes().await {
            Ok(body) => match serde_json::from_slice::<Value>(&body) {
                Ok(message) => hand(message, &inbox, id),
                Err(e) => {
                    tracing::warn!(error = %e, "the upstream's answer is not JSON");
                    false
                }
            },
            Err(e) => {
                tracing::debug!(error = %e, "the upstream's answer was cut");
                false
            }
        }
    };
    if !answered && let Some(id) = id {
        let why =
            "the upstream's answer stream ended without it, and could not be resumed".to_owned();
        let _ = inbox.send(Inbound::Gone(id, why));
    }
}

/// What a reader needs to resume a stream of the session's: shared with
/// the connection (made for every request, so nothing is copied but
/// pointers), the session and version read when a stream is resumed.
struct Resume {
    client: reqwest::Client,
    url: Arc<str>,
    session: Arc<Mutex<Option<String>>>,
    protocol_version: Arc<Mutex<Option<String>>>,
    inbox: Inbox,
    alive: Arc<AtomicBool>,
}

impl Resume {
    /// Resumes the answer stream to request `id` that `cursor` is at,
    /// after the `retry` the server asked, for as long as the server takes
    /// it back and sends something new: whether the answer came.
    async fn again(&self, cursor: &mut Cursor, id: Option<u64>) -> bool {
        let mut fruitless = 0;
        while fruitless < FRUITLESS_RESUMES && self.alive.load(Ordering::Relaxed) {
            let Some(last) = cursor.last_event_id.clone() else {
                return false;
            };
            tokio::time::sleep(cursor.retry.unwrap_or(DEFAULT_RETRY).min(MAX_RETRY)).await;
            let Some(response) = self.get(Some(&last)).await else {
                return false;
            };
            if read_events(response, &self.inbox, id, cursor).await {
                return true;
            }
            fruitless = if cursor.last_event_id.as_deref() == Some(last.as_str()) {
                fruitless + 1
            } else {
                0
            };
        }
        false
    }

    /// A GET of the session's standalone stream, or of the stream after
    /// event `last`, if the server serves it.
    async fn get(&self, last: Option<&str>) -> Option<reqwest::Response> {
        let mut get = self
            .client
            .get(&*self.url)
            .header(ACCEPT, "text/event-stream");
        if let Some(last) = last {
            get = get.header(LAST_EVENT_ID, last);
        }
        let read = |value: &Mutex<Option<String>>| {
            value.lock().unwrap_or_else(PoisonError::into_inner).clone()
        };
        if let Some(session) = read(&self.session) {
            get = get.header(SESSION, session);
        }
        if let Some(version) = read(&self.protocol_version) {
            get = get.header(PROTOCOL_VERSION, version);
        }
        match get.send().await {
            Ok(response) if response.status().is_success() => {
                tracing::debug!(?last, "a stream of the upstream's is opened");
                Some(response)
            }
            Ok(response) => {
                tracing::debug!(status = %response.status(), ?last, "the upstream did not open a stream");
                None
            }
            Err(e) => {
                tracing::debug!(error = %e, ?last, "a stream of the upstream's could not be opened");
                None
            }
        }
    }
}

/// Hands each event of a stream of server-sent events to `inbox`, until
/// it ends, keeping in `cursor` where it can be resumed; whether the
/// answer to request `id` was among them.
async fn read_events(
    response: reqwest::Response,
    inbox: &Inbox,
    id: Option<u64>,
    cursor: &mut Cursor,
) -> bool {
    let mut stream = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    let mut data = String::new();
    let mut answered = false;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { break };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !data.is_empty() {
                    match serde_json::from_str::<Value>(&data) {
                        Ok(message) => answered |= hand(message, inbox, id),
                        Err(e) => {
                            tracing::warn!(error = %e, "an event of the upstream's is not JSON")
                        }
                    }
                    data.clear();
                }
            } else if let Some(value) = field(line, "data") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            } else if let Some(value) = field(line, "id") {
                cursor.last_event_id = Some(value.to_owned());
            } else if let Some(value) = field(line, "retry") {
                cursor.retry = value.parse().ok().map(Duration::from_millis);
            }
        }
    }
    answered
}

/// The value of an event stream's line if it is field `name`.
fn field<'l>(line: &'l str, name: &str) -> Option<&'l str> {
    let value = line.strip_prefix(name)?.strip_prefix(':')?;
    Some(value.strip_prefix(' ').unwrap_or(value))
}

/// Hands `message` (or each of a batch) to `inbox`, as having come on the
/// stream of request `id`; whether it was that request's answer.
fn hand(message: Value, inbox: &Inbox, id: Option<u64>) -> bool {
    let messages = match message {
        Value::Array(batch) => batch,
        message => vec![message],
    };
    let mut answered = false;
    for message in messages {
        let is_answer = id.is_some()
            && message.get("id").and_then(Value::as_u64) == id
            && (message.get("result").is_some() || message.get("error").is_some());
        answered |= is_answer;
        let _ = inbox.send(Inbound::Message(message, id));
    }
    answered
}
