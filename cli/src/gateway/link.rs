//! A link to the upstream MCP server: one connection (a child process it
//! starts, or an MCP session at a URL), which relays JSON-RPC messages as
//! they came and routes what the upstream sends back to the client it
//! belongs to.
//!
//! Every request sent up gets an id of the link's own (a number), so that
//! the requests of several clients, and the gateway's own, never collide;
//! its response goes back under the client's id. What belongs to a request
//! (its progress, by a progress token the link gave it; a subscription's
//! notifications, by `_meta`; a request the upstream makes while it runs)
//! goes to that request's client, marked as related to it. The rest goes
//! to the link's client, if it has one (a session's own link); a link
//! shared by several clients drops it.
//!
//! A link whose connection has gone starts a new one at its next use and,
//! if its client had initialized a session, initializes the new one as the
//! client did. Requests in flight when a connection goes fail: the
//! client's with an error, the gateway's with [`Failure::Lost`].

mod child;
mod handshake;
mod http;
mod inbox;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use self::handshake::Handshake;
use self::inbox::{Inbound, Inbox};
use super::jsonrpc::{self, Kind, SUBSCRIPTION_META};
use super::metrics;

/// Where the upstream server is.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// A program and its arguments, started as a child process, spoken to
    /// over its stdio.
    Command(Vec<String>),
    /// A streamable HTTP endpoint.
    Url(String),
}

/// A client of the gateway, as the link delivers to it.
pub(crate) trait Downstream: Send + Sync {
    /// Delivers `message`; `related` is the id of the client's request it
    /// belongs to, if any (over HTTP, it then goes on that request's
    /// stream).
    fn deliver(&self, message: Value, related: Option<&Value>);
}

/// A client, shared.
pub(crate) type Sink = Arc<dyn Downstream>;

/// Why a request got no answer from the upstream.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// It was never delivered (the upstream could not be started, or the
    /// request not written to it): it did not run.
    NotSent(String),
    /// It was delivered and no answer came: the connection went, or the
    /// client gave up on it. It may or may not have run.
    Lost(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotSent(why) => write!(f, "the upstream server was not reached: {why}"),
            Failure::Lost(why) => write!(
                f,
                "the upstream server gave no answer ({why}), so whether the call took effect is unknown"
            ),
        }
    }
}

/// Who a request's response goes to.
pub(crate) enum Reply {
    /// The client that sent it, under its own id.
    Client,
    /// The gateway, whole (a `result` or an `error` member).
    Gateway(oneshot::Sender<Result<Value, Failure>>),
}

/// The client a request came from, and its id there.
#[derive(Clone)]
pub(crate) struct Route {
    /// Where what belongs to the request goes.
    pub(crate) sink: Sink,
    /// The client: a session, or one stateless HTTP request (its ids are
    /// its own).
    pub(crate) origin: u64,
    pub(crate) id: Value,
}

/// A request sent up and not answered yet.
struct Pending {
    method: String,
    route: Option<Route>,
    /// The client's progress token, where the link gave the request its own.
    progress: Option<Value>,
    reply: Reply,
    /// The connection it was sent on.
    generation: u64,
    /// When it was sent.
    sent: Instant,
}

/// One connection to the upstream.
enum Connection {
    Child(Box<child::Child>),
    Http(http::Http),
}

impl Connection {
    async fn send(&self, message: &Value, id: Option<u64>) -> Result<(), String> {
        match self {
            Connection::Child(child) => child.send(message).await,
            Connection::Http(http) => http.send(message, id).await,
        }
    }

    fn alive(&self) -> bool {
        match self {
            Connection::Child(child) => child.alive(),
            Connection::Http(http) => http.alive(),
        }
    }

    /// Whether the upstream refused a request for want of a session.
    fn needs_session(&self) -> bool {
        match self {
            Connection::Child(_) => false,
            Connection::Http(http) => http.needs_session(),
        }
    }

    /// Whether the upstream issued the connection a session.
    fn has_session(&self) -> bool {
        match self {
            Connection::Child(_) => false,
            Connection::Http(http) => http.has_session(),
        }
    }

    async fn close(&self) {
        match self {
            Connection::Child(child) => child.close(),
            Connection::Http(http) => http.close().await,
        }
    }
}

/// Everything the link keeps under one lock.
#[derive(Default)]
struct State {
    pending: HashMap<u64, Pending>,
    /// The upstream's requests being answered by a client, by their id's
    /// JSON: who answers, for the upstream's cancellation of one.
    asked: HashMap<String, Sink>,
    handshake: Handshake,
}

/// The link: see the module docs.
pub(crate) struct Link {
    source: Source,
    /// How long the upstream has to start and to answer the gateway's own
    /// requests.
    patience: Duration,
    /// The link's own client, which gets what belongs to no request.
    client: Option<Sink>,
    state: Mutex<State>,
    /// The protocol version the upstream answered the client's
    /// `initialize` with.
    protocol_version: Arc<Mutex<Option<String>>>,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Held while the link opens a session of its own.
    introducing: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
    generation: AtomicU64,
    /// Counts the times the upstream's tools may have changed: it said so,
    /// or a new connection was made.
    changed: watch::Sender<u64>,
}

/// The progress token the link gives request `id`.
fn progress_token(id: u64) -> Value {
    Value::String(format!("idem-gateway/{id}"))
}

/// The request id behind a progress token [`progress_token`] made.
fn token_id(token: &Value) -> Option<u64> {
    token.as_str()?.strip_prefix("idem-gateway/")?.parse().ok()
}

impl Link {
    /// A link to `source`, not connected yet; `client` gets what belongs
    /// to no request.
    pub(crate) fn new(source: Source, patience: Duration, client: Option<Sink>) -> Arc<Link> {
        Arc::new(Link {
            source,
            patience,
            client,
            state: Mutex::new(State::default()),
            protocol_version: Arc::new(Mutex::new(None)),
            connection: tokio::sync::Mutex::new(None),
            introducing: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(1),
            generation: AtomicU64::new(0),
            changed: watch::Sender::new(0),
        })
    }

    /// What the link connects to.
    pub(crate) fn source(&self) -> &Source {
        &self.source
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many times the upstream's tools may have changed so far.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Sends the client's `request` up (`route`: where it came from), its
    /// response to `reply`. The upstream id it was sent under, or why it
    /// was not sent.
    pub(crate) async fn request(
        self: &Arc<Self>,
        mut request: Value,
        route: Option<Route>,
        reply: Reply,
    ) -> Result<u64, Failure> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let method = jsonrpc::method(&request).unwrap_or_default().to_owned();
        if let Some(object) = request.as_object_mut() {
            object.insert("id".into(), id.into());
        }
        // The client's progress token is its own: the upstream gets one of
        // the link's, which says whose progress it is.
        let has_token = jsonrpc::meta(&request).is_some_and(|m| m.contains_key("progressToken"));
        let progress = match jsonrpc::meta_mut(&mut request).filter(|_| has_token) {
            Some(meta) => meta.insert("progressToken".into(), progress_token(id)),
            None => None,
        };
        self.note_handshake(&method, &request);
        let pending = Pending {
            method,
            route,
            progress,
            reply,
            generation: 0,
            sent: Instant::now(),
        };
        self.state().pending.insert(id, pending);
        // A connection found gone on sending (an HTTP session the server
        // no longer knows, a server restarted) did not take the request:
        // it is sent once more, on a new connection. An upstream that
        // serves sessions only, asked outside one, did not take it either:
        // the link opens one of its own and sends it again.
        let mut failure = String::new();
        let mut introduced = false;
        for _ in 0..3 {
            let connection = match self.connect().await {
                Ok(connection) => connection,
                Err(why) => {
                    failure = why;
                    break;
                }
            };
            let generation = self.generation.load(Ordering::Relaxed);
            if let Some(pending) = self.state().pending.get_mut(&id) {
                pending.generation = generation;
            }
            match connection.send(&request, Some(id)).await {
                Ok(()) => return Ok(id),
                Err(why) if connection.needs_session() && !introduced => {
                    introduced = true;
                    if let Err(e) = self.introduce(&connection).await {
                        failure = format!("{why}; opening one failed: {e}");
                        break;
                    }
                }
                Err(why) if !connection.alive() => {
                    // Not the gone connection's to fail.
                    if let Some(pending) = self.state().pending.get_mut(&id) {
                        pending.generation = 0;
                    }
                    failure = why;
                }
                Err(why) => {
                    failure = why;
                    break;
                }
            }
        }
        self.state().pending.remove(&id);
        Err(Failure::NotSent(failure))
    }

    /// Sends a request of the gateway's own and waits, at most `timeout`,
    /// for its response: its `result`, or its error's message.
    pub(crate) async fn call(
        self: &Arc<Self>,
        method: &str,
        mut params: Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        let meta = self.state().handshake.protocol_meta.clone();
        if !meta.is_empty()
            && let Some(params) = params.as_object_mut()
        {
            params.insert("_meta".into(), Value::Object(meta));
        }
        let (tx, rx) = oneshot::channel();
        let request = jsonrpc::request(Value::Null, method, params);
        let id = self
            .request(request, None, Reply::Gateway(tx))
            .await
            .map_err(|f| f.to_string())?;
        let answer = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => answer.map_err(|f| f.to_string())?,
            Ok(Err(_)) => return Err("the upstream connection went".into()),
            Err(_) => {
                self.cancel(id, "timed out").await;
                return Err(format!("no answer to `{method}` within {timeout:?}"));
            }
        };
        match (answer.get("result"), answer.get("error")) {
            (Some(result), _) => Ok(result.clone()),
            (None, Some(error)) => Err(error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("an error")
                .to_owned()),
            (None, None) => Err(format!("a response to `{method}` with no result")),
        }
    }

    /// Tells the upstream that request `id` is cancelled, and forgets it:
    /// no response will be passed on.
    pub(crate) async fn cancel(self: &Arc<Self>, id: u64, reason: &str) {
        self.state().pending.remove(&id);
        let cancelled = jsonrpc::notification(
            "notifications/cancelled",
            json!({"requestId": id, "reason": reason}),
        );
        self.notify(cancelled).await;
    }

    /// The upstream id of the request client `origin` sent as `id`, if it
    /// is in flight.
    pub(crate) fn upstream_id(&self, origin: u64, id: &Value) -> Option<u64> {
        let state = self.state();
        state.pending.iter().find_map(|(upstream, pending)| {
            let r = pending.route.as_ref()?;
            (r.origin == origin && r.id == *id).then_some(*upstream)
        })
    }

    /// Sends a client's notification up, as it came.
    pub(crate) async fn notify(self: &Arc<Self>, notification: Value) {
        if jsonrpc::method(&notification) == Some("notifications/initialized") {
            self.state().handshake.initialized = true;
        }
        match self.connect().await {
            Ok(connection) => {
                if let Err(e) = connection.send(&notification, None).await {
                    tracing::debug!(error = %e, "a notification could not be sent upstream");
                }
            }
            Err(e) => tracing::debug!(error = %e, "a notification found no upstream"),
        }
    }

    /// Sends a client's response to a request of the upstream's up.
    pub(crate) async fn respond(self: &Arc<Self>, response: Value) {
        if let Some(id) = jsonrpc::id(&response) {
            self.state().asked.remove(&id.to_string());
        }
        // A response belongs to the connection that asked: never to a new one.
        let connection = self.connection.lock().await.clone();
        match connection {
            Some(connection) if connection.alive() => {
                if let Err(e) = connection.send(&response, None).await {
                    tracing::debug!(error = %e, "a response could not be sent upstream");
                }
            }
            _ => tracing::debug!("a response to a connection that has gone is dropped"),
        }
    }

    /// Whether a request sent up waits for its answer.
    pub(crate) fn busy(&self) -> bool {
        !self.state().pending.is_empty()
    }

    /// Tells the link's own client `message`, if it has one.
    pub(crate) fn tell_client(&self, message: Value) {
        if let Some(client) = &self.client {
            client.deliver(message, None);
        }
    }

    /// Ends the connection (a child is killed, an HTTP session deleted).
    pub(crate) async fn close(&self) {
        if let Some(connection) = self.connection.lock().await.take() {
            connection.close().await;
        }
    }

    /// Remembers what sets up the client's session, to set up a new
    /// connection's.
    fn note_handshake(&self, method: &str, request: &Value) {
        self.state().handshake.note(method, request);
    }

    /// Remembers what a client's request says of its client on MCP
    /// 2026-07-28 (its protocol, capabilities and info in `_meta`), for the
    /// requests the gateway makes itself on its behalf: called as soon as
    /// a request comes, before the gateway lists the tools to answer it.
    pub(crate) fn note_client(&self, request: &Value) {
        self.state().handshake.note_client(request);
    }

    /// Opens a session of the link's own at an upstream that serves
    /// sessions only, for a client that opened none (a stateless client,
    /// or the gateway itself): an `initialize` made of what the client's
    /// requests say of it, which a new connection repeats.
    async fn introduce(self: &Arc<Self>, connection: &Connection) -> Result<(), String> {
        // Requests refused at once open one session between them.
        let _one_at_a_time = self.introducing.lock().await;
        if connection.has_session() {
            return Ok(());
        }
        self.state().handshake.initialize_for_the_client();
        tracing::info!(upstream = ?self.source, "the upstream serves sessions only: the gateway opens one for its stateless clients");
        self.replay_handshake(connection).await
    }

    /// The live connection, or a new one.
    async fn connect(self: &Arc<Self>) -> Result<Arc<Connection>, String> {
        let mut current = self.connection.lock().await;
        if let Some(live) = current.as_ref().filter(|c| c.alive()) {
            return Ok(live.clone());
        }
        let again = current.take().is_some();
        if again {
            tracing::warn!(upstream = ?self.source, "the connection to the upstream server has gone; connecting again");
            metrics::upstream_restarted();
        }
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let (inbox, mut inbound) = mpsc::unbounded_channel();
        let connection = Arc::new(self.start(inbox).await?);
        let link = self.clone();
        tokio::spawn(async move {
            while let Some(message) = inbound.recv().await {
                link.dispatch(message);
            }
            link.gone(generation);
        });
        if again {
            if let Err(e) = self.replay_handshake(&connection).await {
                connection.close().await;
                return Err(e);
            }
            self.changed.send_modify(|n| *n += 1);
        }
        *current = Some(connection.clone());
        Ok(connection)
    }

    async fn start(&self, inbox: Inbox) -> Result<Connection, String> {
        let protocol_version = self.protocol_version.clone();
        match &self.source {
            Source::Command(command) => Ok(Connection::Child(Box::new(child::Child::start(
                command, inbox,
            )?))),
            Source::Url(url) => Ok(Connection::Http(http::Http::new(
                url,
                inbox,
                protocol_version,
            )?)),
        }
    }

    /// Initializes a new connection as the client initialized the first.
    async fn replay_handshake(self: &Arc<Self>, connection: &Connection) -> Result<(), String> {
        let (params, initialized) = {
            let state = self.state();
            let handshake = &state.handshake;
            (handshake.initialize.clone(), handshake.initialized)
        };
        let Some(params) = params else {
            return Ok(());
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let pending = Pending {
            method: "initialize".into(),
            route: None,
            progress: None,
            reply: Reply::Gateway(tx),
            generation: self.generation.load(Ordering::Relaxed),
            sent: Instant::now(),
        };
        self.state().pending.insert(id, pending);
        let request = jsonrpc::request(id.into(), "initialize", params);
        connection.send(&request, Some(id)).await?;
        let answer = tokio::time::timeout(self.patience, rx).await;
        let answer = match answer {
            Ok(Ok(Ok(answer))) => answer,
            _ => return Err("the upstream server did not initialize again".into()),
        };
        if let Some(error) = answer.get("error") {
            return Err(format!(
                "the upstream server refused to initialize again: {error}"
            ));
        }
        if initialized {
            let done = jsonrpc::notification("notifications/initialized", json!({}));
            connection.send(&done, None).await?;
        }
        Ok(())
    }

    /// What a connection's readers hand the link, routed.
    fn dispatch(&self, inbound: Inbound) {
        match inbound {
            Inbound::Gone(id, why) => {
                let pending = self.state().pending.remove(&id);
                if let Some(pending) = pending {
                    fail(id, pending, Failure::Lost(why));
                }
            }
            Inbound::Message(message, on) => match jsonrpc::kind(&message) {
                Some(Kind::Response) => self.answered(message),
                Some(Kind::Request) => self.asked(message, on),
                Some(Kind::Notification) => self.told(message, on),
                None => tracing::debug!(%message, "the upstream sent what is not JSON-RPC"),
            },
        }
    }

    /// A response: to the request's client under its own id, or to the
    /// gateway.
    fn answered(&self, mut message: Value) {
        let Some(id) = jsonrpc::id(&message).and_then(Value::as_u64) else {
            tracing::debug!(%message, "a response to no request of the gateway's");
            return;
        };
        let Some(pending) = self.state().pending.remove(&id) else {
            return;
        };
        metrics::upstream_answered(&pending.method, pending.sent.elapsed());
        if pending.method == "initialize"
            && let Some(version) = message.pointer("/result/protocolVersion")
        {
            *self
                .protocol_version
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = version.as_str().map(str::to_owned);
        }
        match pending.reply {
            Reply::Gateway(tx) => {
                let _ = tx.send(Ok(message));
            }
            Reply::Client => {
                if let Some(route) = pending.route {
                    if let Some(object) = message.as_object_mut() {
                        object.insert("id".into(), route.id.clone());
                    }
                    route.sink.deliver(message, Some(&route.id));
                }
            }
        }
    }

    /// A request of the upstream's (sampling, elicitation, roots, ping):
    /// to the client of the request it came during, else to the link's
    /// client; with neither, answered that no client can take it.
    fn asked(&self, message: Value, on: Option<u64>) {
        let mut state = self.state();
        let clients = state.pending.values().filter(|p| p.route.is_some());
        let route = on
            .and_then(|id| state.pending.get(&id))
            .or_else(|| only_one(clients))
            .and_then(|p| p.route.clone());
        let (sink, related) = match (route, &self.client) {
            (Some(route), _) => (route.sink, Some(route.id)),
            (None, Some(client)) => (client.clone(), None),
            (None, None) => {
                drop(state);
                tracing::warn!(%message, "a request of the upstream's that no client can answer");
                return self.refuse(&message);
            }
        };
        if let Some(id) = jsonrpc::id(&message) {
            state.asked.insert(id.to_string(), sink.clone());
        }
        drop(state);
        sink.deliver(message, related.as_ref());
    }

    /// Answers the upstream's `request` with an error.
    fn refuse(&self, request: &Value) {
        let id = jsonrpc::id(request).cloned().unwrap_or(Value::Null);
        let error = jsonrpc::error(
            id,
            jsonrpc::code::INTERNAL_ERROR,
            "idem gateway: this request belongs to no client's session",
        );
        let connection = self.connection.try_lock().ok().and_then(|c| c.clone());
        match connection {
            Some(connection) => {
                tokio::spawn(async move {
                    let _ = connection.send(&error, None).await;
                });
            }
            None => tracing::debug!("the refusal found the connection being replaced"),
        }
    }

    /// A notification: to the client of the request it belongs to (its
    /// progress, a subscription's, one that came on its stream), else to
    /// the link's client.
    fn told(&self, mut message: Value, on: Option<u64>) {
        let method = jsonrpc::method(&message).unwrap_or_default().to_owned();
        if method == "notifications/tools/list_changed" {
            self.changed.send_modify(|n| *n += 1);
        }
        let (sink, related) = {
            let state = self.state();
            let belongs =
                |id: u64| -> Option<(&Pending, u64)> { Some((state.pending.get(&id)?, id)) };
            let params = jsonrpc::params(&message);
            let by_token = params
                .and_then(|p| p.get("progressToken"))
                .filter(|_| method == "notifications/progress")
                .and_then(token_id);
            let by_subscription = jsonrpc::meta(&message)
                .and_then(|m| m.get(SUBSCRIPTION_META))
                .and_then(Value::as_u64);
            let by_cancel = (method == "notifications/cancelled")
                .then(|| params.and_then(|p| p.get("requestId")))
                .flatten()
                .and_then(|id| state.asked.get(&id.to_string()).cloned());
            if let Some(sink) = by_cancel {
                (Some(sink), None)
            } else if let Some((pending, _)) = by_token.or(by_subscription).or(on).and_then(belongs)
            {
                let route = pending.route.clone();
                if let (Some(token), Some(_)) = (&pending.progress, by_token)
                    && let Some(params) = jsonrpc::params_mut(&mut message)
                {
                    params.insert("progressToken".into(), token.clone());
                }
                if let (Some(route), Some(_)) = (&route, by_subscription)
                    && let Some(meta) = jsonrpc::meta_mut(&mut message)
                {
                    meta.insert(SUBSCRIPTION_META.into(), route.id.clone());
                }
                match route {
                    Some(route) => (Some(route.sink), Some(route.id)),
                    None => (None, None),
                }
            } else {
                (self.client.clone(), None)
            }
        };
        match sink {
            Some(sink) => sink.deliver(message, related.as_ref()),
            None => tracing::debug!(%method, "a notification that belongs to no client is dropped"),
        }
    }

    /// Connection `generation` has gone: its requests fail.
    fn gone(&self, generation: u64) {
        let failed: Vec<(u64, Pending)> = {
            let mut state = self.state();
            let ids: Vec<u64> = state
                .pending
                .iter()
                .filter(|(_, p)| p.generation == generation)
                .map(|(id, _)| *id)
                .collect();
            ids.into_iter()
                .filter_map(|id| state.pending.remove(&id).map(|p| (id, p)))
                .collect()
        };
        for (id, pending) in failed {
            fail(
                id,
                pending,
                Failure::Lost("the connection to it went".into()),
            );
        }
    }
}

/// The one item of `items`, if there is exactly one.
fn only_one<'a>(mut items: impl Iterator<Item = &'a Pending>) -> Option<&'a Pending> {
    let first = items.next()?;
    items.next().is_none().then_some(first)
}

/// Tells whoever waits for request `id` that it failed.
fn fail(id: u64, pending: Pending, failure: Failure) {
    match pending.reply {
        Reply::Gateway(tx) => {
            let _ = tx.send(Err(failure));
        }
        Reply::Client => {
            if let Some(route) = pending.route {
                let answer = failed_answer(&pending.method, route.id.clone(), &failure);
                route.sink.deliver(answer, Some(&route.id));
            }
        }
    }
    tracing::debug!(id, "a request in flight failed");
}

/// What a client is answered for a request of `method` that failed: a
/// tool's error result, which the model reads, for `tools/call`; an
/// error for anything else.
pub(crate) fn failed_answer(method: &str, id: Value, failure: &Failure) -> Value {
    if method == "tools/call" {
        let text = format!("Error: {failure}");
        return jsonrpc::response(
            id,
            json!({"content": [{"type": "text", "text": text}], "isError": true}),
        );
    }
    jsonrpc::error(id, jsonrpc::code::INTERNAL_ERROR, &failure.to_string())
}
