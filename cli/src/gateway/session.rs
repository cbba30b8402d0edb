//! One client's session with the gateway: what it sends is relayed to its
//! upstream link as it came, but for the few requests idem owns:
//!
//! - `tools/list`: the upstream's list, each write tool carrying the
//!   contract the gateway enforces (docs/gateway.md, "What clients see");
//! - `tools/call` of a write: bound to its run and tenant, then through the
//!   registry (claimed, made upstream once, recorded, replayed);
//! - `notifications/cancelled` of a write in flight: the write's outcome is
//!   uncertain (the upstream is told to stop; whether it had done the
//!   operation is not known), and the tool's `on_uncertain` decides.
//!
//! A write's path lives in `session/write.rs`, asking the person at the
//! client in `session/approval.rs`.
//!
//! Which tools are writes comes from the session's own upstream listing,
//! made when a call first needs it and again whenever the upstream's tools
//! may have changed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idem::mcp::{Binding, Caller};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::answer::error_result;
use super::ask;
use super::catalog::{self, Catalog, Settings, list_all_tools};
use super::drain::{Drain, SHUTTING_DOWN};
use super::jsonrpc::{self, Kind, code};
use super::link::{self, Link, Reply, Route, Sink};
use super::metrics;
use super::proxy::Asked;
use super::start;

mod approval;
mod write;

/// The key of request `id` of client `origin` among a session's asked.
fn asked_key(origin: u64, id: &Value) -> String {
    format!("{origin}:{id}")
}

/// A call counted in a session's `in_flight`, until dropped.
struct InFlight(watch::Sender<usize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// Gives each client (a session, a stateless request) a number of its own.
pub(crate) fn new_origin() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What every session of a gateway shares.
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    /// How long the upstream has to start, and to answer the gateway's own
    /// requests.
    pub(crate) patience: Duration,
    /// Replayed results end with a text saying so (`--note-replays`).
    pub(crate) note_replays: bool,
    /// The gateway's stopping (HTTP: on SIGTERM).
    pub(crate) drain: Arc<Drain>,
}

/// One session: see the module docs.
pub(crate) struct Session {
    shared: Arc<Shared>,
    link: Arc<Link>,
    /// How this session's calls are bound to runs and tenants.
    binding: Binding,
    /// The number of the session's client; a stateless request's own
    /// number comes with it.
    origin: u64,
    changes: watch::Receiver<u64>,
    /// The catalog, and the count of changes it was listed at.
    catalog: tokio::sync::Mutex<Option<(u64, Arc<Catalog>)>>,
    /// The client's requests not sent up yet, and its writes until they
    /// are answered, by [`asked_key`]: what the client's cancellation of
    /// one is told to.
    asked: Mutex<HashMap<String, Arc<Asked>>>,
    /// How many calls may be writes in flight: counted from when a
    /// `tools/call` is read until it is known to be a read, or its write
    /// is answered.
    in_flight: watch::Sender<usize>,
    /// The questions `approval = "ask"` puts to the client.
    questions: ask::Questions,
    /// Counted among the open sessions while it lives.
    _open: metrics::Open,
}

impl Session {
    /// A session of `link`'s, its calls bound by `binding`.
    pub(crate) fn new(shared: Arc<Shared>, link: Arc<Link>, binding: Binding) -> Arc<Session> {
        Arc::new(Session {
            shared,
            changes: link.changes(),
            link,
            binding,
            origin: new_origin(),
            catalog: tokio::sync::Mutex::new(None),
            asked: Mutex::new(HashMap::new()),
            in_flight: watch::Sender::new(0),
            questions: ask::Questions::default(),
            _open: metrics::Open::session(),
        })
    }

    /// The session's own number, for the requests of its client.
    pub(crate) fn origin(&self) -> u64 {
        self.origin
    }

    /// Relays one message of the client's (`origin`: its number, `sink`:
    /// where what answers it goes). A request is sent up before this
    /// returns, and answered later.
    pub(crate) async fn handle(
        self: &Arc<Self>,
        message: Value,
        origin: u64,
        sink: Sink,
        caller: Caller,
    ) {
        match jsonrpc::kind(&message) {
            Some(Kind::Response) => {
                if let Some(theirs) = self.questions.answered(message) {
                    self.link.respond(theirs).await;
                }
            }
            Some(Kind::Notification) => self.notified(message, origin).await,
            Some(Kind::Request) => {
                self.link.note_client(&message);
                let route = Route {
                    sink,
                    origin,
                    id: jsonrpc::id(&message).cloned().unwrap_or(Value::Null),
                };
                // The handshake goes up before anything that follows it.
                if jsonrpc::method(&message) == Some("initialize") {
                    self.questions.initialized(&message);
                    self.forward(message, route).await;
                    return;
                }
                let call = (jsonrpc::method(&message) == Some("tools/call")).then(|| self.call());
                let asked = Arc::new(Asked::default());
                let key = asked_key(origin, &route.id);
                self.lock_asked().insert(key, asked.clone());
                let session = self.clone();
                tokio::spawn(async move {
                    session.requested(message, route, caller, call, asked).await;
                });
            }
            None => {
                let id = jsonrpc::id(&message).cloned().unwrap_or(Value::Null);
                let refused = jsonrpc::error(
                    id,
                    code::INVALID_REQUEST,
                    "not a JSON-RPC request, notification or response",
                );
                sink.deliver(refused, None);
            }
        }
    }

    /// The client's first request, on a link not connected yet (stdio):
    /// the gateway's check at start, made on the one upstream connection
    /// the session then uses. The tools are listed (with what the request
    /// says of its client) and must fit the configuration before the
    /// request is handled; the client's `initialize` is sent up first, as
    /// it came, and answered only once they do. Why the gateway cannot
    /// serve, once the client has been told.
    pub(crate) async fn first_request(
        self: &Arc<Self>,
        message: Value,
        sink: Sink,
        caller: Caller,
    ) -> Result<(), String> {
        let id = jsonrpc::id(&message).cloned().unwrap_or(Value::Null);
        let refuse = |why: String| {
            let refused = jsonrpc::error(id.clone(), code::INTERNAL_ERROR, &why);
            sink.deliver(refused, Some(&id));
            Err(why)
        };
        self.link.note_client(&message);
        let every = start::declares_every_capability(&message);
        if jsonrpc::method(&message) != Some("initialize") {
            if let Err(why) = self.check(every).await {
                return refuse(why);
            }
            self.handle(message, self.origin, sink.clone(), caller)
                .await;
            return Ok(());
        }
        self.questions.initialized(&message);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.link.request(message, None, Reply::Gateway(tx)).await;
        let patience = self.shared.patience;
        let answer = match sent {
            Ok(_) => match tokio::time::timeout(patience, rx).await {
                Ok(Ok(answer)) => answer.map_err(|failure| failure.to_string()),
                Ok(Err(_)) => Err("the connection to it went".to_owned()),
                Err(_) => Err(format!("no answer within {patience:?}")),
            },
            Err(failure) => Err(failure.to_string()),
        };
        let name = start::upstream_name(self.link.source());
        let mut answer = match answer {
            Ok(answer) => answer,
            Err(why) => {
                return refuse(format!(
                    "the upstream server {name} did not initialize: {why}"
                ));
            }
        };
        if let Some(error) = answer.get("error") {
            let why = format!("the upstream server {name} refused to initialize: {error}");
            answer["id"] = id.clone();
            sink.deliver(answer, Some(&id));
            return Err(why);
        }
        let done = jsonrpc::notification("notifications/initialized", json!({}));
        self.link.notify(done).await;
        if let Err(why) = self.check(every).await {
            return refuse(why);
        }
        answer["id"] = id.clone();
        sink.deliver(answer, Some(&id));
        Ok(())
    }

    /// Whether the upstream's tools, as this session's client is shown
    /// them, can be served with the configuration, as the gateway checks
    /// at start. A table for a tool not listed is refused; where the
    /// client does not declare `every` capability (sampling, elicitation,
    /// roots), the upstream is asked again as a client that does, on a
    /// connection of the gateway's own (a server may list a tool only to
    /// such clients), and the table refused only if it does not list it
    /// then either. The tools taken as writes for want of an annotation
    /// are said.
    async fn check(&self, every: bool) -> Result<(), String> {
        let catalog = self.catalog().await?;
        let settings = &self.shared.settings;
        let source = self.link.source();
        match catalog.unlisted(&settings.config) {
            None => start::warn_unannotated(&catalog.upstream_tools, &settings.config, source),
            Some(unfit) if every => return Err(unfit),
            Some(unfit) => {
                start::probe(source, settings, self.shared.patience).await?;
                tracing::warn!(
                    "{unfit}: it lists them to a client that declares sampling, elicitation and roots, which this one does not"
                );
            }
        }
        Ok(())
    }

    /// Whether the session waits for an answer of the upstream's.
    pub(crate) fn busy(&self) -> bool {
        *self.in_flight.borrow() > 0 || self.link.busy()
    }

    /// Ends the session: waits for its writes in flight to be answered
    /// and recorded, then ends its upstream connection.
    pub(crate) async fn close(&self) {
        self.settled().await;
        self.link.close().await;
    }

    /// Ends the upstream connection now, whatever is in flight.
    pub(crate) async fn close_now(&self) {
        self.link.close().await;
    }

    /// How many of its calls may be writes in flight (see `in_flight`).
    pub(crate) fn writes_in_flight(&self) -> usize {
        *self.in_flight.borrow()
    }

    /// Returns once no write is in flight.
    pub(crate) async fn settled(&self) {
        let mut in_flight = self.in_flight.subscribe();
        let _ = in_flight.wait_for(|n| *n == 0).await;
    }

    /// A client's notification: the cancellation of a request not sent up
    /// yet, or of a write, is the gateway's; any other cancellation names
    /// the request by its upstream id; the rest goes up as it came.
    async fn notified(&self, mut message: Value, origin: u64) {
        if jsonrpc::method(&message) == Some("notifications/cancelled") {
            let id = jsonrpc::params(&message)
                .and_then(|p| p.get("requestId"))
                .cloned()
                .unwrap_or(Value::Null);
            let asked = self.lock_asked().get(&asked_key(origin, &id)).cloned();
            if let Some(asked) = asked {
                asked.cancel();
                return;
            }
            let Some(upstream) = self.link.upstream_id(origin, &id) else {
                tracing::debug!(%id, "a cancellation of no request in flight");
                return;
            };
            if let Some(params) = jsonrpc::params_mut(&mut message) {
                params.insert("requestId".into(), upstream.into());
            }
        }
        self.link.notify(message).await;
    }

    /// The answers of the client `origin`'s requests `ids` are read by
    /// nobody any more (their stream closed): their waits for a person
    /// end; what runs goes on, so that its result is recorded.
    pub(crate) fn abandoned(&self, origin: u64, ids: &[Value]) {
        let asked = self.lock_asked();
        for id in ids {
            if let Some(asked) = asked.get(&asked_key(origin, id)) {
                tracing::debug!(%id, "nobody reads the answer of a request any more: a wait for a person ends");
                asked.abandon();
            }
        }
    }

    fn lock_asked(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Asked>>> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the client's request `route.id`: its cancellation now
    /// goes up.
    fn forget(&self, route: &Route) {
        self.lock_asked()
            .remove(&asked_key(route.origin, &route.id));
    }

    /// Counts a call that may be a write in flight, until it is dropped.
    fn call(&self) -> InFlight {
        self.in_flight.send_modify(|n| *n += 1);
        InFlight(self.in_flight.clone())
    }

    /// A client's request; `call` counts a `tools/call`; `asked` is told
    /// of its cancellation.
    async fn requested(
        self: Arc<Self>,
        message: Value,
        route: Route,
        caller: Caller,
        call: Option<InFlight>,
        asked: Arc<Asked>,
    ) {
        match jsonrpc::method(&message) {
            Some("tools/list") => self.list_tools(message, route, &asked).await,
            Some("tools/call") => {
                let name = jsonrpc::params(&message)
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                match self.catalog().await {
                    Ok(catalog) if catalog.writes.contains(&name) => {
                        if self.shared.drain.draining() {
                            self.refuse(&route, &message, SHUTTING_DOWN);
                        } else {
                            self.write(catalog, name, message, route, caller, &asked)
                                .await;
                        }
                        drop(call);
                    }
                    Ok(catalog) => {
                        drop(call);
                        metrics::read(&name, catalog.lists(&name));
                        self.relay(message, route, &asked).await;
                    }
                    Err(why) => {
                        let text = format!(
                            "Error: the gateway cannot tell whether `{name}` changes things, \
                             so it did not call it: {why}"
                        );
                        self.refuse(&route, &message, &text);
                    }
                }
            }
            _ => self.relay(message, route, &asked).await,
        }
    }

    /// Answers the client's call `message` a tool error saying `text`,
    /// without making it.
    fn refuse(&self, route: &Route, message: &Value, text: &str) {
        self.forget(route);
        let refused = error_result(route.id.clone(), text);
        let refused = jsonrpc::completed(refused, jsonrpc::since_2026(message));
        route.sink.deliver(refused, Some(&route.id));
    }

    /// Sends the client's request up unless it was cancelled first; if it
    /// is cancelled while being sent, the upstream is told.
    async fn relay(&self, message: Value, route: Route, asked: &Asked) {
        if asked.cancelled() {
            return self.forget(&route);
        }
        let key = route.clone();
        let sent = self.forward(message, route).await;
        self.forget(&key);
        if let Some(id) = sent.filter(|_| asked.cancelled()) {
            self.link
                .cancel(id, "the client cancelled the request")
                .await;
        }
    }

    /// Sends the client's request up, its response back to it: the id it
    /// was sent under.
    async fn forward(&self, message: Value, route: Route) -> Option<u64> {
        let method = jsonrpc::method(&message).unwrap_or_default().to_owned();
        let (sink, id) = (route.sink.clone(), route.id.clone());
        match self.link.request(message, Some(route), Reply::Client).await {
            Ok(sent) => Some(sent),
            Err(failure) => {
                let answer = link::failed_answer(&method, id.clone(), &failure);
                sink.deliver(answer, Some(&id));
                None
            }
        }
    }

    /// `tools/list`: the upstream's page, its write tools carrying their
    /// contract.
    async fn list_tools(&self, message: Value, route: Route, asked: &Asked) {
        self.forget(&route);
        if asked.cancelled() {
            return;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (sink, id) = (route.sink.clone(), route.id.clone());
        let sent = self.link.request(message, Some(route), Reply::Gateway(tx));
        let answer = match sent.await {
            Ok(_) => rx
                .await
                .unwrap_or_else(|_| Err(link::Failure::Lost("the connection to it went".into()))),
            Err(failure) => Err(failure),
        };
        let mut answer = match answer {
            Ok(answer) => answer,
            Err(failure) => {
                return sink.deliver(
                    link::failed_answer("tools/list", id.clone(), &failure),
                    Some(&id),
                );
            }
        };
        if let Some(tools) = answer
            .pointer_mut("/result/tools")
            .and_then(Value::as_array_mut)
        {
            let config = &self.shared.settings.config;
            for tool in tools.iter_mut() {
                *tool = catalog::served(tool.take(), config);
            }
        }
        if let Some(object) = answer.as_object_mut() {
            object.insert("id".into(), id.clone());
        }
        sink.deliver(answer, Some(&id));
    }

    /// The catalog of the upstream's tools as they are now: listed again
    /// if they may have changed since. A new list that cannot be served
    /// leaves the old one served, and says why.
    async fn catalog(&self) -> Result<Arc<Catalog>, String> {
        let mut slot = self.catalog.lock().await;
        let changes = *self.changes.borrow();
        if let Some((listed_at, catalog)) = slot.as_ref()
            && *listed_at == changes
        {
            return Ok(catalog.clone());
        }
        let built = list_all_tools(&self.link, self.shared.patience)
            .await
            .and_then(|tools| Catalog::build(&tools, &self.shared.settings));
        match (built, slot.as_ref()) {
            (Ok(catalog), old) => {
                // The upstream's tools changed since the gateway started:
                // settings that no longer fit are said, not fatal.
                if let Some(unfit) = catalog.unlisted(&self.shared.settings.config) {
                    tracing::warn!("{unfit}");
                }
                // A restarted upstream says nothing of its tools: its
                // client is told, if they are not the ones it listed.
                if old.is_some_and(|(_, old)| old.upstream_tools != catalog.upstream_tools) {
                    let changed =
                        jsonrpc::notification("notifications/tools/list_changed", json!({}));
                    self.link.tell_client(changed);
                }
                let catalog = Arc::new(catalog);
                *slot = Some((changes, catalog.clone()));
                Ok(catalog)
            }
            (Err(e), Some((_, old))) => {
                tracing::error!(error = %e, "the upstream's new tools are not served");
                Ok(old.clone())
            }
            (Err(e), None) => Err(e),
        }
    }
}
