//! What the gateway sends its HTTP clients as server-sent events: each
//! POST's answer stream, kept until its requests are answered (and a while
//! after) so that a client whose connection dropped loses nothing, and a
//! session's standalone stream.
//!
//! An answer stream's events carry ids, `STREAM-N` for its Nth event (the
//! priming event, with no data, is `STREAM-0`): a GET with `Last-Event-ID:
//! STREAM-N` resumes it after the Nth event, with what came since and
//! what is still to come (SEP-1699). Once every request of a stream is
//! answered, what still comes for them goes to the standalone stream.
//!
//! A POST outside any session cannot be resumed: a client that closes its
//! answer stream abandons its requests still unanswered (the stateless
//! protocol's cancellation: [`Abandoned`]).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use super::super::jsonrpc::{self, Kind};
use super::super::link::Downstream;
use crate::guard::{json_text, refusal};

/// How many answered streams a session keeps for a client to resume, and
/// how large they may be in all: results carry files and images.
const KEPT: usize = 64;
const KEPT_BYTES: usize = 16 << 20;

/// How long a client is asked to wait before it reconnects, in ms.
const RETRY_MS: u32 = 1000;

/// A session's standalone stream, once the client opened it.
#[derive(Default)]
pub(super) struct Standalone(Mutex<Option<mpsc::UnboundedSender<Value>>>);

impl Downstream for Standalone {
    fn deliver(&self, message: Value, _related: Option<&Value>) {
        let sender = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match sender.as_ref() {
            Some(sender) if sender.send(message).is_ok() => {}
            _ => tracing::debug!("a message for a client with no standalone stream is dropped"),
        }
    }
}

impl Standalone {
    /// A GET: the standalone stream, instead of any opened before.
    pub(super) fn open(&self) -> Response {
        let (sender, receiver) = mpsc::unbounded_channel::<Value>();
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(sender);
        let stream = received(receiver)
            .map(|message| Ok::<_, Infallible>(event(None, &message.to_string())));
        events(Body::from_stream(stream))
    }
}

/// The answer stream of one POST's requests.
pub(super) struct AnswerStream {
    /// Its number in the session.
    number: u64,
    state: Mutex<AnswerState>,
    /// Where what comes once it is answered goes (a session's).
    standalone: Option<Arc<Standalone>>,
}

struct AnswerState {
    /// Every event so far.
    sent: Vec<Sent>,
    /// The size of their text, in all.
    bytes: usize,
    /// The ids of the requests not answered yet.
    awaited: Vec<Value>,
    /// The client reading it now, if one is.
    reader: Option<mpsc::UnboundedSender<(usize, Sent)>>,
}

/// One event of an answer stream: its message as JSON text, made once
/// and shared by whoever reads it.
#[derive(Clone)]
struct Sent {
    text: Arc<str>,
    /// Whether it answers a request (what a JSON answer holds).
    response: bool,
}

impl AnswerStream {
    /// The stream of a POST whose requests are `awaited`.
    pub(super) fn new(
        number: u64,
        awaited: Vec<Value>,
        standalone: Option<Arc<Standalone>>,
    ) -> AnswerStream {
        AnswerStream {
            number,
            state: Mutex::new(AnswerState {
                sent: Vec::new(),
                bytes: 0,
                awaited,
                reader: None,
            }),
            standalone,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, AnswerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn answered(&self) -> bool {
        self.state().awaited.is_empty()
    }

    /// The size of what it has kept.
    fn bytes(&self) -> usize {
        self.state().bytes
    }

    /// The events after the first `from`, then those still to come: for a
    /// new reader, who replaces any earlier one.
    fn read_from(&self, from: usize) -> mpsc::UnboundedReceiver<(usize, Sent)> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut state = self.state();
        for (n, sent) in state.sent.iter().enumerate().skip(from) {
            let _ = sender.send((n + 1, sent.clone()));
        }
        state.reader = (!state.awaited.is_empty()).then_some(sender);
        receiver
    }

    /// The answer as server-sent events from after event `from`, primed
    /// (an event with an id and no data, and the retry) where `prime`;
    /// `abandoned` is dropped with the stream.
    pub(super) fn events(
        &self,
        from: usize,
        prime: bool,
        abandoned: Option<Abandoned>,
    ) -> Response {
        let number = self.number;
        let priming = prime.then(|| {
            let text = format!("id: {number}-0\nretry: {RETRY_MS}\ndata: \n\n");
            Ok::<_, Infallible>(Bytes::from(text))
        });
        let rest = received(self.read_from(from)).map(move |(n, sent)| {
            let _kept = &abandoned;
            Ok(event(Some(&format!("{number}-{n}")), &sent.text))
        });
        events(Body::from_stream(
            futures_util::stream::iter(priming).chain(rest),
        ))
    }

    /// The responses, as JSON, for a client that takes no events (what else
    /// comes is dropped).
    pub(super) async fn json(&self) -> Response {
        let mut receiver = self.read_from(0);
        let mut responses = Vec::new();
        while let Some((_, sent)) = receiver.recv().await {
            if sent.response {
                responses.push(sent.text);
            }
        }
        match responses.as_slice() {
            [one] => json_text(StatusCode::OK, one.to_string()),
            all => json_text(StatusCode::OK, format!("[{}]", all.join(","))),
        }
    }
}

impl Downstream for AnswerStream {
    fn deliver(&self, message: Value, related: Option<&Value>) {
        let mut state = self.state();
        if state.awaited.is_empty() {
            drop(state);
            if let Some(standalone) = &self.standalone {
                standalone.deliver(message, related);
            }
            return;
        }
        let response = jsonrpc::kind(&message) == Some(Kind::Response);
        if response {
            state.awaited.retain(|id| Some(id) != jsonrpc::id(&message));
        }
        let sent = Sent {
            text: message.to_string().into(),
            response,
        };
        state.bytes += sent.text.len();
        state.sent.push(sent.clone());
        let n = state.sent.len();
        if let Some(reader) = &state.reader {
            // A reader gone leaves the event kept, for the next.
            let _ = reader.send((n, sent));
        }
        if state.awaited.is_empty() {
            // The stream ends once its reader has the rest.
            state.reader = None;
        }
    }
}

/// What tells of the requests of an answer stream still unanswered when
/// it is dropped: the client closed the stream of a POST that cannot be
/// resumed. Held by the stream's body, or by the handler that awaits
/// its JSON.
pub(super) struct Abandoned {
    stream: Arc<AnswerStream>,
    cancel: Option<Box<dyn FnOnce(Vec<Value>) + Send + Sync>>,
}

impl Abandoned {
    /// Calls `cancel` with the ids of `stream`'s requests still
    /// unanswered when this is dropped, if any are.
    pub(super) fn new(
        stream: Arc<AnswerStream>,
        cancel: impl FnOnce(Vec<Value>) + Send + Sync + 'static,
    ) -> Abandoned {
        Abandoned {
            stream,
            cancel: Some(Box::new(cancel)),
        }
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let awaited = self.stream.state().awaited.clone();
        if let Some(cancel) = self.cancel.take()
            && !awaited.is_empty()
        {
            cancel(awaited);
        }
    }
}

/// A session's answer streams, by number, kept for resuming.
#[derive(Default)]
pub(super) struct Streams(Mutex<StreamsState>);

#[derive(Default)]
struct StreamsState {
    next: u64,
    kept: HashMap<u64, Arc<AnswerStream>>,
    /// The numbers kept, oldest first.
    order: VecDeque<u64>,
}

impl Streams {
    /// A new answer stream of the session's, for requests `awaited`; the
    /// oldest answered ones beyond [`KEPT`] streams or [`KEPT_BYTES`] are
    /// let go.
    pub(super) fn open(
        &self,
        awaited: Vec<Value>,
        standalone: Option<Arc<Standalone>>,
    ) -> Arc<AnswerStream> {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        state.next += 1;
        let stream = Arc::new(AnswerStream::new(state.next, awaited, standalone));
        state.kept.insert(stream.number, stream.clone());
        state.order.push_back(stream.number);
        let answered_bytes = |state: &StreamsState| -> usize {
            let answered = state.kept.values().filter(|s| s.answered());
            answered.map(|s| s.bytes()).sum()
        };
        while state.order.len() > KEPT || answered_bytes(&state) > KEPT_BYTES {
            let Some(at) = state
                .order
                .iter()
                .position(|n| state.kept.get(n).is_none_or(|s| s.answered()))
            else {
                break;
            };
            if let Some(number) = state.order.remove(at) {
                state.kept.remove(&number);
            }
        }
        stream
    }

    /// A GET with `Last-Event-ID: last`: the rest of that stream, or why
    /// it cannot be resumed.
    pub(super) fn resume(&self, last: &str) -> Response {
        let found = last.split_once('-').and_then(|(number, n)| {
            let number: u64 = number.parse().ok()?;
            let n: usize = n.parse().ok()?;
            let state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            Some((state.kept.get(&number)?.clone(), n))
        });
        match found {
            Some((stream, n)) => stream.events(n, false, None),
            None => refusal(
                StatusCode::NOT_FOUND,
                &format!("no answer stream of this session's to resume after event `{last}`"),
            ),
        }
    }
}

/// A plain-text response of `status`, saying `why`.
pub(super) fn status(status: StatusCode, why: &str) -> Response {
    (status, why.to_owned()).into_response()
}

/// What comes on `receiver`, as a stream.
fn received<T: Send + 'static>(
    receiver: mpsc::UnboundedReceiver<T>,
) -> impl futures_util::Stream<Item = T> {
    futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}

/// An event of `message` (JSON text), with `id` if it has one.
fn event(id: Option<&str>, message: &str) -> Bytes {
    match id {
        Some(id) => Bytes::from(format!("id: {id}\nevent: message\ndata: {message}\n\n")),
        None => Bytes::from(format!("event: message\ndata: {message}\n\n")),
    }
}

/// `body`, a stream of events, as the response.
fn events(body: Body) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap_or_else(|e| status(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reader_that_comes_back_gets_what_it_missed_and_what_follows() {
        let stream = AnswerStream::new(7, vec![json!(1), json!(2)], None);
        let mut first = stream.read_from(0);
        stream.deliver(
            json!({"jsonrpc": "2.0", "method": "notifications/progress"}),
            None,
        );
        stream.deliver(json!({"jsonrpc": "2.0", "id": 1, "result": {}}), None);
        assert_eq!(first.try_recv().map(|(n, _)| n).ok(), Some(1));
        drop(first);
        // The reader went after the first event; the second came meanwhile.
        let mut again = stream.read_from(1);
        let (n, sent) = again.try_recv().expect("the event it missed");
        let message: Value = serde_json::from_str(&sent.text).expect("JSON");
        assert_eq!((n, message["id"].clone()), (2, json!(1)));
        stream.deliver(json!({"jsonrpc": "2.0", "id": 2, "result": {}}), None);
        assert_eq!(again.try_recv().map(|(n, _)| n).ok(), Some(3));
        assert!(stream.answered());
        // Answered, the stream ends once read.
        assert!(matches!(
            again.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        let mut late = stream.read_from(0);
        assert_eq!(std::iter::from_fn(|| late.try_recv().ok()).count(), 3);
    }

    #[test]
    fn answered_streams_beyond_the_kept_are_let_go_and_unanswered_ones_never() {
        let streams = Streams::default();
        let waiting = streams.open(vec![json!(1)], None);
        for _ in 0..KEPT + 10 {
            streams.open(Vec::new(), None);
        }
        let state = streams.0.lock().expect("a lock");
        assert_eq!(state.kept.len(), KEPT);
        assert!(state.kept.contains_key(&waiting.number));
    }

    #[test]
    fn answered_streams_beyond_the_kept_bytes_are_let_go() {
        let streams = Streams::default();
        let large = "x".repeat(KEPT_BYTES / 3);
        for n in 0..5 {
            let stream = streams.open(vec![json!(n)], None);
            stream.deliver(json!({"jsonrpc": "2.0", "id": n, "result": large}), None);
        }
        let waiting = streams.open(vec![json!("w")], None);
        let state = streams.0.lock().expect("a lock");
        let kept: usize = state.kept.values().map(|s| s.bytes()).sum();
        assert!(kept <= KEPT_BYTES, "{kept} bytes kept");
        assert_eq!(
            state.kept.len(),
            3,
            "the two latest answered, and the waiting one"
        );
        assert!(state.kept.contains_key(&waiting.number));
        assert!(state.kept.contains_key(&5), "the latest answered is kept");
    }
}
