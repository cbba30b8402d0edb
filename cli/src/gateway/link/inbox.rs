//! What a link's connections hand it: the messages their readers take off
//! the wire (a child's stdout, an HTTP response stream), and where they
//! hand them.

use serde_json::Value;
use tokio::sync::mpsc;

/// What a connection's readers hand the link.
pub(super) enum Inbound {
    /// A message, and the id of the request on whose HTTP response stream
    /// it came, if it came on one.
    Message(Value, Option<u64>),
    /// The stream that was to carry the response to this request ended
    /// without it.
    Gone(u64, String),
}

/// Where the link hands what the upstream sends.
pub(super) type Inbox = mpsc::UnboundedSender<Inbound>;
