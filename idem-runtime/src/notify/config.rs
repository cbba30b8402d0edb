//! Where and how webhooks are sent: the receiver's URL, the body's
//! format, the secret, and the bounds of delivery.

use std::fmt;
use std::time::Duration;

use super::error::NotifyError;
use super::post::Target;
use super::sign::WebhookSecret;

/// Where and how a registry sends its webhooks; see the
/// [module docs](super).
///
/// ```
/// use idem_runtime::notify::{Notify, WebhookSecret};
///
/// let secret: WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".parse()?;
/// let notify = Notify::standard("https://hooks.example.com/idem", secret)?
///     .console_url("https://idem.internal.example.com")?;
/// let slack = Notify::slack("https://hooks.slack.com/services/T000/B000/XXXX")?;
/// assert!(Notify::slack("ftp://example.com").is_err());
/// # drop((notify, slack));
/// # Ok::<(), idem_runtime::notify::NotifyError>(())
/// ```
#[derive(Clone)]
pub struct Notify {
    pub(crate) target: Target,
    pub(crate) format: Format,
    pub(crate) secret: Option<WebhookSecret>,
    pub(crate) console_url: Option<String>,
    pub(crate) queue: usize,
    pub(crate) retry_for: Duration,
    pub(crate) timeout: Duration,
}

/// What a webhook's body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Format {
    /// A JSON event signed as Standard Webhooks signs (the default).
    #[default]
    Standard,
    /// A Slack incoming-webhook message (`{"text": ..}`); the URL carries
    /// Slack's secret, so nothing is signed.
    Slack,
}

impl Format {
    /// `"standard"` or `"slack"`.
    pub fn parse(given: &str) -> Result<Format, NotifyError> {
        match given {
            "standard" => Ok(Format::Standard),
            "slack" => Ok(Format::Slack),
            _ => Err(NotifyError::Format(given.to_owned())),
        }
    }
}

/// The URL `given`, which must be `http` or `https`.
fn web_url(given: &str) -> Result<Target, NotifyError> {
    Target::parse(given).map_err(NotifyError::Url)
}

impl Notify {
    /// Signed JSON events ([`Format::Standard`]) to `url`, under `secret`.
    pub fn standard(url: &str, secret: WebhookSecret) -> Result<Notify, NotifyError> {
        Ok(Notify::new(web_url(url)?, Format::Standard, Some(secret)))
    }

    /// Slack incoming-webhook messages ([`Format::Slack`]) to `url`.
    pub fn slack(url: &str) -> Result<Notify, NotifyError> {
        Ok(Notify::new(web_url(url)?, Format::Slack, None))
    }

    fn new(target: Target, format: Format, secret: Option<WebhookSecret>) -> Notify {
        Notify {
            target,
            format,
            secret,
            console_url: None,
            queue: 1024,
            retry_for: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
        }
    }

    /// Where `idem console` is served: a Slack message links to the
    /// operation there (`<console_url>/operations/<key>`), and an event's
    /// `data` carries the link as `console`.
    pub fn console_url(mut self, url: &str) -> Result<Notify, NotifyError> {
        web_url(url)?;
        self.console_url = Some(url.trim().trim_end_matches('/').to_owned());
        Ok(self)
    }

    /// How many events may wait to be sent (1024; at least 1): past it,
    /// an event is dropped, logged and counted, and the call goes on.
    pub fn queue(mut self, events: usize) -> Result<Notify, NotifyError> {
        if events == 0 {
            return Err(NotifyError::Setting(
                "the webhook queue must hold at least one event".into(),
            ));
        }
        self.queue = events;
        Ok(self)
    }

    /// For how long a delivery is retried (about a minute by default).
    pub fn retry_for(mut self, retry_for: Duration) -> Notify {
        self.retry_for = retry_for;
        self
    }

    /// How long one attempt may take (10 s; more than zero).
    pub fn timeout(mut self, timeout: Duration) -> Result<Notify, NotifyError> {
        if timeout.is_zero() {
            return Err(NotifyError::Setting(
                "a webhook's timeout must be more than zero".into(),
            ));
        }
        self.timeout = timeout;
        Ok(self)
    }

    /// The URL's scheme, host and port, which logs may show (its path
    /// may be a secret).
    pub(crate) fn receiver(&self) -> String {
        self.target.receiver()
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notify")
            .field("receiver", &self.receiver())
            .field("format", &self.format)
            .field("signed", &self.secret.is_some())
            .field("console_url", &self.console_url)
            .finish_non_exhaustive()
    }
}
