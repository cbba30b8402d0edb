//! The person at the client asked about a write's operation that awaits
//! their approval (`approval = "ask"`), and their answer recorded.

use idem::IdemKey;
use idem::mcp::{ApprovalAnswer, approval_question};
use serde_json::Value;

use super::Session;
use super::write::Write;
use crate::gateway::ask::{self, Asking};

impl Session {
    /// Asks the person at the client about the operation under `key`,
    /// which awaits their approval, unless the call `brought` the answer
    /// to that very question; records the answer.
    pub(super) async fn ask_person(
        &self,
        write: &Write<'_>,
        (message, args): (&Value, &Value),
        key: &str,
        brought: Option<(Option<String>, ApprovalAnswer)>,
    ) -> ask::Person {
        let reply = match brought {
            Some((state, reply)) if state.as_deref() == Some(key) => reply,
            _ => {
                let asking = self.questions.asking(message);
                if let Asking::Cannot = asking {
                    return ask::Person::Waits;
                }
                let (registry, tools) = (&write.catalog.registry, &write.catalog.upstream_tools);
                let shown = registry.shown_arguments(write.name, args.clone());
                let shown = shown.unwrap_or_else(|_| args.clone());
                let description = ask::description(tools, write.name);
                let question = approval_question(write.name, description, &shown);
                match asking {
                    Asking::Cannot => return ask::Person::Waits,
                    Asking::InputRequired => {
                        return ask::Person::Asks(ask::input_required(question, key));
                    }
                    Asking::Session => {
                        let (route, asked) = (write.route, write.asked);
                        self.questions.elicit(route, asked, key, question).await
                    }
                }
            }
        };
        let key = IdemKey::from_raw(key);
        let client = ask::client_name(&self.questions, message);
        let recorded = reply.record(&write.catalog.registry, &key, client.as_deref());
        let Some(decided) = recorded.await else {
            return ask::Person::Waits;
        };
        if let Err(e) = decided {
            // Decided elsewhere first, or expired: the call is answered
            // what the record says now.
            tracing::info!(key = %key, error = %e, "the answer of the person at the client was not recorded");
        }
        ask::Person::Answered
    }
}
