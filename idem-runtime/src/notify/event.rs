//! An event and its two bodies: the JSON a Standard Webhooks receiver
//! reads, and the message a Slack incoming webhook shows.

use std::time::SystemTime;

use serde_json::{Map, Value, json};

use super::config::Format;
use crate::key::IdemKey;
use crate::store::About;
use crate::utc::utc;

/// What happened to an operation: an event's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// `approval.requested`: it came to await a person's approval.
    ApprovalRequested,
    /// `approval.approved`: a person approved it (`by`).
    ApprovalApproved,
    /// `approval.denied`: a person refused it (`by`, `reason`).
    ApprovalDenied,
    /// `outcome.unknown`: nobody knows whether it took effect
    /// (`attempt`, `reason`).
    OutcomeUnknown,
    /// `outcome.resolved`: a person said what happened (`resolution`).
    OutcomeResolved,
}

impl EventKind {
    /// The event's `type`, as its body says it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ApprovalRequested => "approval.requested",
            EventKind::ApprovalApproved => "approval.approved",
            EventKind::ApprovalDenied => "approval.denied",
            EventKind::OutcomeUnknown => "outcome.unknown",
            EventKind::OutcomeResolved => "outcome.resolved",
        }
    }
}

/// One event: what happened, when, and to which operation, with what
/// its record says of it; sent through [`Webhooks::send`](super::Webhooks::send).
///
/// ```
/// use idem_runtime::IdemKey;
/// use idem_runtime::notify::{Event, EventKind};
///
/// let key = IdemKey::from_raw("shop:idem:4f2a");
/// let event = Event::new(EventKind::ApprovalApproved, &key, "refund", None).with("by", "ana");
/// assert_eq!(event.kind(), EventKind::ApprovalApproved);
/// ```
#[derive(Debug, Clone)]
pub struct Event {
    pub(crate) kind: EventKind,
    pub(crate) at: SystemTime,
    data: Map<String, Value>,
}

impl Event {
    /// `kind` happened to the operation under `key`, of `tool`; `about` is
    /// what its record says of it (tenant, run, arguments as operators
    /// see them), when that can be read.
    pub fn new(kind: EventKind, key: &IdemKey, tool: &str, about: Option<&About>) -> Event {
        let mut data = Map::new();
        data.insert("key".into(), key.as_str().into());
        data.insert("tool".into(), tool.into());
        let (tenant, run, arguments) = match about {
            Some(about) => (
                about.tenant.clone().map(Value::from),
                about.run.clone().map(Value::from),
                about.arguments.clone(),
            ),
            None => (None, None, Value::Null),
        };
        data.insert("tenant".into(), tenant.unwrap_or(Value::Null));
        data.insert("run".into(), run.unwrap_or(Value::Null));
        data.insert("arguments".into(), arguments);
        Event {
            kind,
            at: SystemTime::now(),
            data,
        }
    }

    /// The event with `name` set to `value` in its data.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Event {
        self.data.insert(name.to_owned(), value.into());
        self
    }

    /// What happened.
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    fn text(&self, name: &str) -> &str {
        self.data.get(name).and_then(Value::as_str).unwrap_or("")
    }

    /// The body `format` posts; `console` is where the console is served.
    pub(crate) fn body(&self, format: Format, console: Option<&str>) -> Vec<u8> {
        let link = console.map(|console| format!("{console}/operations/{}", self.text("key")));
        let body = match format {
            Format::Slack => json!({ "text": self.slack_text(link.as_deref()) }),
            _ => {
                let mut data = self.data.clone();
                if let Some(link) = link {
                    data.insert("console".into(), link.into());
                }
                json!({
                    "type": self.kind.as_str(),
                    "timestamp": utc(self.at),
                    "data": data,
                })
            }
        };
        body.to_string().into_bytes()
    }

    /// What a Slack message says: what happened, to what, with which
    /// arguments, and what a person can do about it.
    fn slack_text(&self, link: Option<&str>) -> String {
        let (tool, key) = (self.text("tool"), self.text("key"));
        let headline = match self.kind {
            EventKind::ApprovalRequested => {
                format!(":raised_hand: *{tool}* waits for a person's approval")
            }
            EventKind::ApprovalApproved => format!(
                ":white_check_mark: *{tool}* was approved by {}",
                self.text("by")
            ),
            EventKind::ApprovalDenied => format!(
                ":no_entry: *{tool}* was refused by {}: {}",
                self.text("by"),
                self.text("reason")
            ),
            EventKind::OutcomeUnknown => format!(
                ":warning: *{tool}*: nobody knows whether it took effect ({})",
                self.text("reason")
            ),
            EventKind::OutcomeResolved => format!(
                ":ballot_box_with_check: *{tool}* was resolved: {}",
                self.text("resolution")
            ),
        };
        let arguments = serde_json::to_string_pretty(&self.data["arguments"]).unwrap_or_default();
        let mut text = format!("{headline}\n```{arguments}```\n");
        let act = match self.kind {
            EventKind::ApprovalRequested => format!(
                "Approve: `idem approve {key} --by YOU`\nRefuse: `idem deny {key} --by YOU --reason WHY`\n"
            ),
            EventKind::OutcomeUnknown => format!(
                "Resolve: `idem resolve {key} --done RESULT_JSON` (it happened), `--failed WHY` or `--rerun` (it did not)\n"
            ),
            _ => format!("Operation `{key}`\n"),
        };
        text.push_str(&act);
        if let Some(link) = link {
            text.push_str(&format!("<{link}|Open it in the console>\n"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind) -> Event {
        let about = About::new(
            Some("acme"),
            Some("run-7"),
            json!({ "order": 42, "card": "(hidden)" }),
        );
        Event::new(
            kind,
            &IdemKey::from_raw("ns:idem:ab12"),
            "refund",
            Some(&about),
        )
    }

    #[test]
    fn a_standard_body_is_the_type_time_and_what_the_record_shows() {
        let body = event(EventKind::ApprovalDenied)
            .with("by", "ana")
            .with("reason", "too large")
            .body(Format::Standard, Some("https://idem.example.com"));
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["type"], "approval.denied");
        assert!(body["timestamp"].as_str().unwrap().ends_with('Z'), "{body}");
        assert_eq!(
            body["data"],
            json!({
                "key": "ns:idem:ab12", "tool": "refund", "tenant": "acme", "run": "run-7",
                "arguments": { "order": 42, "card": "(hidden)" },
                "by": "ana", "reason": "too large",
                "console": "https://idem.example.com/operations/ns:idem:ab12",
            })
        );
    }

    #[test]
    fn a_slack_message_says_what_waits_and_how_to_decide() {
        let body =
            event(EventKind::ApprovalRequested).body(Format::Slack, Some("https://c.example"));
        let body: Value = serde_json::from_slice(&body).unwrap();
        let text = body["text"].as_str().unwrap();
        for said in [
            "*refund* waits for a person's approval",
            "\"order\": 42",
            "idem approve ns:idem:ab12 --by YOU",
            "idem deny ns:idem:ab12",
            "<https://c.example/operations/ns:idem:ab12|",
        ] {
            assert!(text.contains(said), "{said} in {text}");
        }
        let unknown = event(EventKind::OutcomeUnknown).with("reason", "timed out");
        let body: Value = serde_json::from_slice(&unknown.body(Format::Slack, None)).unwrap();
        assert!(
            body["text"]
                .as_str()
                .unwrap()
                .contains("idem resolve ns:idem:ab12")
        );
    }
}
