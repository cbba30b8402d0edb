//! `[notify]`: where webhooks go, as the gateway's TOML and the file that
//! `idem approve`, `deny` and `resolve` take with `--config` write it
//! (the gateway's own file serves), and what those commands tell.
//!
//! ```toml
//! [notify]
//! url = "https://hooks.example.com/idem"
//! secret_env = "IDEM_WEBHOOK_SECRET"   # or secret = "whsec_..."
//! format = "standard"                  # or "slack" (no secret: the URL is one)
//! console_url = "https://idem.internal.example.com"
//! ```

use std::time::Duration;

use idem::notify::{Event, EventKind, Format, Notify, WebhookSecret, Webhooks};
use idem::store::{About, RecordInfo};
use serde::Deserialize;

/// How long a command waits for its webhooks before it exits.
const PATIENCE: Duration = Duration::from_secs(30);

/// The `[notify]` table, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NotifyTable {
    url: Option<String>,
    secret: Option<String>,
    secret_env: Option<String>,
    format: Option<String>,
    console_url: Option<String>,
}

impl NotifyTable {
    /// Where and how to send, or what is wrong with the table (never
    /// quoting the secret or the URL, whose path may be one).
    pub(crate) fn notify(&self) -> Result<Notify, String> {
        let bad = |e: idem::notify::NotifyError| format!("[notify]: {e}");
        let url = self.url.as_deref().ok_or(
            "[notify] has no `url`: give the receiver's, e.g. url = \"https://hooks.example.com/idem\"",
        )?;
        let format = Format::parse(self.format.as_deref().unwrap_or("standard")).map_err(bad)?;
        let notify = match format {
            Format::Slack => {
                if self.secret.is_some() || self.secret_env.is_some() {
                    return Err("[notify] format = \"slack\" signs nothing (a Slack URL carries its own secret): remove `secret` and `secret_env`".into());
                }
                Notify::slack(url).map_err(bad)?
            }
            _ => Notify::standard(url, self.secret()?).map_err(bad)?,
        };
        match &self.console_url {
            Some(console) => notify.console_url(console).map_err(bad),
            None => Ok(notify),
        }
    }

    /// The secret, given or from its environment variable.
    fn secret(&self) -> Result<WebhookSecret, String> {
        let given = match (&self.secret, &self.secret_env) {
            (Some(_), Some(_)) => {
                return Err("[notify] gives both `secret` and `secret_env`: keep one".into());
            }
            (Some(secret), None) => secret.clone(),
            (None, Some(name)) => std::env::var(name)
                .map_err(|_| format!("[notify] takes its secret from ${name}, which is not set"))?,
            (None, None) => {
                return Err("[notify] signs its events and has no secret: give secret_env = \"VARIABLE\" (or secret = \"whsec_...\"); `idem webhook-secret` makes one".into());
            }
        };
        given.parse().map_err(|e| format!("[notify]: {e}"))
    }
}

/// Tells `webhooks`, if any, that `kind` happened to `record`'s
/// operation; `add` adds to what the event says.
pub(crate) fn tell(
    webhooks: Option<&Webhooks>,
    record: &RecordInfo,
    kind: EventKind,
    add: impl FnOnce(Event) -> Event,
) {
    let Some(webhooks) = webhooks else {
        return;
    };
    let about = record.about.as_deref().and_then(About::parse);
    let tool = record.tool.as_deref().unwrap_or_default();
    webhooks.send(add(Event::new(kind, &record.key, tool, about.as_ref())));
}

/// Waits for `webhooks`' events to be sent before the command exits, and
/// says so when some were not.
pub(crate) async fn flush(webhooks: Option<&Webhooks>) {
    if let Some(webhooks) = webhooks
        && !webhooks.flush(PATIENCE).await
    {
        eprintln!(
            "idem: the webhook was not delivered within {}s; the decision is recorded all the same",
            PATIENCE.as_secs()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<Notify, String> {
        toml::from_str::<NotifyTable>(text)
            .map_err(|e| e.to_string())?
            .notify()
    }

    #[test]
    fn a_bad_table_is_refused_with_what_to_write() {
        let secret = WebhookSecret::generate().to_string();
        let good = format!("url = \"https://h.example/x\"\nsecret = \"{secret}\"\n");
        assert!(table(&good).is_ok());
        assert!(
            table("url = \"https://hooks.slack.com/services/T/B/X\"\nformat = \"slack\"\n").is_ok()
        );
        for (text, says) in [
            ("secret = \"whsec_\"\n".to_owned(), "has no `url`"),
            (
                format!("url = \"ftp://h.example\"\nsecret = \"{secret}\"\n"),
                "must be http or https, not ftp",
            ),
            (
                "url = \"https://h.example\"\nsecret = \"s3cr3t\"\n".to_owned(),
                "starts with `whsec_`",
            ),
            ("url = \"https://h.example\"\n".to_owned(), "has no secret"),
            (
                format!("url = \"https://h.example\"\nsecret = \"{secret}\"\nformat = \"teams\"\n"),
                "unknown webhook format \"teams\"",
            ),
            (
                format!("url = \"https://h.example\"\nsecret = \"{secret}\"\nformat = \"slack\"\n"),
                "signs nothing",
            ),
            (
                "url = \"https://h.example\"\nsecret_env = \"IDEM_TEST_NO_SUCH_VARIABLE\"\n"
                    .to_owned(),
                "which is not set",
            ),
            (
                "url = \"https://h.example\"\nsecrets = \"x\"\n".to_owned(),
                "unknown field `secrets`",
            ),
        ] {
            let message = table(&text).expect_err(&text);
            assert!(message.contains(says), "{text}: {message}");
            assert!(!message.contains(&secret[6..]), "{message}");
        }
    }
}
