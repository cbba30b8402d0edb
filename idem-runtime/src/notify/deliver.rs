//! Delivery beside the calls: an event is put on a bounded queue (never
//! waited on: a full queue drops it), a worker started with the first
//! event sends each in a task of its own (at most [`IN_FLIGHT`] at once),
//! and a delivery that times out, cannot connect, or is answered 5xx or
//! 429 is sent again with the same `webhook-id`, 1 s later, then twice as
//! long each time (at most 30 s apart), until the notify's `retry_for`
//! has passed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, UNIX_EPOCH};

use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use super::config::{Format, Notify};
use super::error::NotifyError;
use super::event::{Event, EventKind};
use super::post::Client;

/// How many deliveries run at once: a slow receiver holds this many
/// tasks, and the queue holds the rest.
const IN_FLIGHT: usize = 16;
/// The first pause before a delivery is sent again, and the longest.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// Webhooks being sent as a [`Notify`] says: events go in with
/// [`send`](Self::send), never waiting; a worker (started with the first
/// event, in the Tokio runtime it is sent from) delivers them, and ends
/// once this is dropped and what it holds is sent.
pub struct Webhooks {
    delivery: Arc<Delivery>,
    /// The worker's queue, made with the first event (in a Tokio
    /// runtime); the worker ends once it is dropped and drained.
    queue: OnceLock<mpsc::Sender<Message>>,
}

/// What the worker and its deliveries share.
struct Delivery {
    notify: Notify,
    client: Client,
    /// Events queued or being delivered.
    pending: AtomicUsize,
    /// Told each time an event is delivered or given up.
    settled: tokio::sync::Notify,
}

/// One event, queued under the `webhook-id` every attempt sends.
struct Message {
    id: String,
    event: Event,
}

/// One event as it is sent, every attempt alike: made by the worker.
struct Sent<'a> {
    id: &'a str,
    kind: &'static str,
    timestamp: u64,
    body: Vec<u8>,
}

/// How an attempt went.
enum Attempt {
    Delivered,
    /// Worth another try: a timeout, a connection error, 5xx, 429.
    Again(String),
    /// Not: another 4xx, a redirect (never followed).
    Refused(String),
}

impl Webhooks {
    /// A notifier for `notify`, or why its HTTP client cannot be made.
    pub fn new(notify: Notify) -> Result<Webhooks, NotifyError> {
        let client = Client::new(notify.timeout)
            .map_err(|e| NotifyError::Setting(format!("cannot make the webhook client: {e}")))?;
        Ok(Webhooks {
            delivery: Arc::new(Delivery {
                notify,
                client,
                pending: AtomicUsize::new(0),
                settled: tokio::sync::Notify::new(),
            }),
            queue: OnceLock::new(),
        })
    }

    /// Queues `event` to be sent, at once: a full queue, or no Tokio
    /// runtime to send from, drops it (logged at `warn`, counted). Its
    /// body is made by the worker, beside the call.
    pub fn send(&self, event: Event) {
        self.send_made(event.kind, || event);
    }

    /// [`send`](Self::send) of the event `make` makes, made only when the
    /// queue has room for it: a call whose event would be dropped pays
    /// for nothing but the look.
    pub(crate) fn send_made(&self, kind: EventKind, make: impl FnOnce() -> Event) {
        let delivery = &self.delivery;
        let Some(queue) = self.queue() else {
            return delivery.gave_up(
                kind.as_str(),
                "-",
                "dropped",
                "no Tokio runtime to send it from",
            );
        };
        if queue.capacity() == 0 {
            return delivery.gave_up(kind.as_str(), "-", "dropped", "the webhook queue is full");
        }
        let message = Message {
            id: format!("msg_{:032x}", crate::unique::unique_id()),
            event: make(),
        };
        delivery.pending.fetch_add(1, Ordering::SeqCst);
        if let Err(refused) = queue.try_send(message) {
            let message = match refused {
                mpsc::error::TrySendError::Full(message)
                | mpsc::error::TrySendError::Closed(message) => message,
            };
            delivery.gave_up(
                kind.as_str(),
                &message.id,
                "dropped",
                "the webhook queue is full",
            );
            delivery.settle();
        }
    }

    /// The worker's queue, the worker started if it is not.
    fn queue(&self) -> Option<&mpsc::Sender<Message>> {
        if let Some(queue) = self.queue.get() {
            return Some(queue);
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(self.queue.get_or_init(|| {
            let (queue, events) = mpsc::channel(self.delivery.notify.queue);
            runtime.spawn(work(self.delivery.clone(), events));
            queue
        }))
    }

    /// Waits until every event queued so far is delivered or given up,
    /// for at most `within`; whether they all were.
    pub async fn flush(&self, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            let settled = self.delivery.settled.notified();
            if self.delivery.pending.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if tokio::time::timeout_at(until, settled).await.is_err() {
                return false;
            }
        }
    }
}

/// Takes events off the queue, each delivered in a task of its own, at
/// most [`IN_FLIGHT`] at once; ends when the queue is dropped and empty.
async fn work(delivery: Arc<Delivery>, mut events: mpsc::Receiver<Message>) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(message) = events.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let delivery = delivery.clone();
        tokio::spawn(async move {
            let notify = &delivery.notify;
            let event = &message.event;
            let sent = Sent {
                id: &message.id,
                kind: event.kind.as_str(),
                timestamp: event
                    .at
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                body: event.body(notify.format, notify.console_url.as_deref()),
            };
            delivery.deliver(&sent).await;
            delivery.settle();
            drop(slot);
        });
    }
}

impl Delivery {
    /// Sends `message` until it is delivered, refused, or `retry_for`
    /// has passed.
    async fn deliver(&self, message: &Sent<'_>) {
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        loop {
            match self.attempt(message).await {
                Attempt::Delivered => {
                    tracing::debug!(event = message.kind, id = %message.id, receiver = %self.notify.receiver(), "webhook delivered");
                    #[cfg(feature = "metrics")]
                    crate::metrics::notified(message.kind, "delivered");
                    return;
                }
                Attempt::Refused(why) => {
                    return self.gave_up(message.kind, message.id, "given_up", &why);
                }
                Attempt::Again(why) => {
                    if started.elapsed() + pause > self.notify.retry_for {
                        return self.gave_up(message.kind, message.id, "given_up", &why);
                    }
                    tracing::debug!(event = message.kind, id = %message.id, why = %why, "webhook not delivered; sending it again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(LONGEST_PAUSE);
                }
            }
        }
    }

    /// One POST of `message`.
    async fn attempt(&self, message: &Sent<'_>) -> Attempt {
        let notify = &self.notify;
        let mut headers = vec![
            ("content-type", "application/json".to_owned()),
            (
                "user-agent",
                concat!("idem/", env!("CARGO_PKG_VERSION")).to_owned(),
            ),
        ];
        if notify.format == Format::Standard {
            headers.push(("webhook-id", message.id.to_owned()));
            headers.push(("webhook-timestamp", message.timestamp.to_string()));
            if let Some(secret) = &notify.secret {
                let signature = secret.sign(message.id, message.timestamp, &message.body);
                headers.push(("webhook-signature", signature));
            }
        }
        match self
            .client
            .post(&notify.target, &headers, &message.body)
            .await
        {
            Ok(status) if (200..300).contains(&status) => Attempt::Delivered,
            Ok(status) if status >= 500 || status == 429 => {
                Attempt::Again(format!("answered {status}"))
            }
            Ok(status) => Attempt::Refused(format!("answered {status}")),
            // Never the URL: a Slack URL's path is its secret.
            Err(why) => Attempt::Again(why),
        }
    }

    /// Logs and counts an event of `kind` that will not be delivered:
    /// `what` is `dropped` (never sent) or `given_up` (sent, never
    /// delivered).
    fn gave_up(&self, kind: &'static str, id: &str, what: &'static str, why: &str) {
        tracing::warn!(
            event = kind,
            id,
            receiver = %self.notify.receiver(),
            delivery = what,
            why,
            "a webhook was not delivered: the receiver was not told (the store still holds the operation: `idem approvals`, `idem pending` list it)"
        );
        #[cfg(feature = "metrics")]
        crate::metrics::notified(kind, what);
    }

    /// One event fewer pending.
    fn settle(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
        self.settled.notify_waiters();
    }
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("notify", &self.delivery.notify)
            .field("pending", &self.delivery.pending.load(Ordering::SeqCst))
            .finish()
    }
}
