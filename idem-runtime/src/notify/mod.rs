//! Webhooks (feature `notify`): a registry told where
//! ([`RegistryBuilder::notify`](crate::RegistryBuilder::notify)) POSTs an
//! event when an operation comes to await a person's approval, when a
//! person approves or refuses it, when an outcome becomes unknown, and
//! when a person resolves one, so that whoever decides is told instead of
//! having to look.
//!
//! | event | when | `data` beyond `key`, `tool`, `tenant`, `run`, `arguments` |
//! |---|---|---|
//! | `approval.requested` | an operation starts to await approval | `approval_window_secs` |
//! | `approval.approved` | a person approved it | `by` |
//! | `approval.denied` | a person refused it | `by`, `reason` |
//! | `outcome.unknown` | an outcome became unknown (`on_uncertain = "refuse"`) | `attempt`, `reason` |
//! | `outcome.resolved` | a person resolved one | `resolution` (`done`, `failed`, `rerun`) |
//!
//! [`Format::Standard`] (the default) posts
//! `{"type": .., "timestamp": RFC 3339, "data": {..}}` signed as
//! [Standard Webhooks](https://www.standardwebhooks.com) signs: headers
//! `webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,` and
//! base64 of HMAC-SHA256 of `id.timestamp.body` under the
//! [`WebhookSecret`]), so that any Standard Webhooks library verifies it.
//! `arguments` are shown as the records show them: hidden fields replaced.
//! [`Format::Slack`] posts a Slack incoming-webhook message instead: what
//! waits, its arguments, the `idem approve` / `idem resolve` line, and a
//! link to the console when [`Notify::console_url`] is given.
//!
//! Delivery never costs a call anything: an event is put on a bounded
//! queue and sent beside the calls. A receiver that is down, slow or
//! failing delays and fails no call. A delivery is retried with backoff
//! (1 s, doubling, at most 30 s apart) on a timeout, a connection error,
//! a 5xx or a 429, with the same `webhook-id`, for about a minute
//! ([`Notify::retry_for`]); another 4xx is not retried. What is dropped
//! (the queue is full) or given up is logged at `warn` and counted
//! (feature `metrics`: `idem.notify.events`).
//!
//! A registry sends through [`Webhooks`] of its own; a process that
//! records decisions without one (an operator's tool, a console) sends
//! the same [`Event`]s through one it makes from the same [`Notify`].
//!
//! The store stays the truth: an event queued in a process that then
//! crashes is not sent again, and a receiver that was down for longer
//! than the retries misses it. `idem approvals` and `idem pending` list
//! what waits, whatever was sent.

mod config;
mod deliver;
mod error;
mod event;
mod post;
mod sign;

pub use self::config::{Format, Notify};
pub use self::deliver::Webhooks;
pub use self::error::NotifyError;
pub use self::event::{Event, EventKind};
pub use self::sign::WebhookSecret;
