//! Why a webhook setting cannot be taken.

/// A [`Notify`](super::Notify) that cannot be taken; the message never quotes a secret
/// or a URL's path (a Slack URL's path is its secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotifyError {
    /// The URL does not parse, or is not `http` or `https`.
    #[error("the webhook URL {0}")]
    Url(String),
    /// The secret is not `whsec_` and base64 of 24 to 64 bytes.
    #[error("{0}")]
    Secret(String),
    /// Not a format idem sends.
    #[error(
        "unknown webhook format \"{0}\": it is \"standard\" (signed JSON events, the default) or \"slack\" (a Slack incoming webhook)"
    )]
    Format(String),
    /// A setting out of its bounds.
    #[error("{0}")]
    Setting(String),
}
