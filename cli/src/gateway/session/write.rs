//! A client's write through the registry: bound to its run, tenant and
//! operation key, claimed, made upstream once (the proxied tool), recorded,
//! replayed to its duplicates; where its operation awaits an approval the
//! person at the client may give, they are asked first (`approval.rs`).

use std::cell::RefCell;
use std::sync::Arc;

use idem::mcp::{BoundCall, Caller};
use idem::{Answer, Approval, ToolError, Waiting};
use serde_json::{Value, json};

use super::Session;
use crate::gateway::answer::{Replay, error_result, mark_replayed, tool_result};
use crate::gateway::ask;
use crate::gateway::catalog::Catalog;
use crate::gateway::jsonrpc::{self, code};
use crate::gateway::link::Route;
use crate::gateway::progress::Progress;
use crate::gateway::proxy::{Asked, CALL, Call, Unrecorded};
use crate::gateway::repeat;

impl Session {
    /// A write, through the registry in the run, tenant and operation key
    /// the binding gives it; where its operation awaits an approval the
    /// person at the client may give (`approval = "ask"`), asked first.
    pub(super) async fn write(
        &self,
        catalog: Arc<Catalog>,
        name: String,
        mut message: Value,
        route: Route,
        caller: Caller,
        asked: &Arc<Asked>,
    ) {
        let (sink, id) = (route.sink.clone(), route.id.clone());
        if asked.cancelled() {
            // Cancelled before anything ran: nothing to answer or record.
            return self.forget(&route);
        }
        // An answer to a question of the gateway's never goes upstream.
        let brought = ask::take_brought(&mut message);
        let modern = jsonrpc::since_2026(&message);
        let (bound, args, repeat) = match self.bind(&catalog, &name, &mut message, &caller) {
            Ok(bound) => bound,
            Err(text) => {
                self.forget(&route);
                let refused = jsonrpc::completed(error_result(id.clone(), &text), modern);
                return sink.deliver(refused, Some(&id));
            }
        };
        let offered = catalog.repeats.contains(&name);
        let write = Write {
            catalog: &catalog,
            name: &name,
            bound: &bound,
            route: &route,
            asked,
        };
        // Kept for a second call only where the person may be asked.
        let asks = self.shared.settings.config.tool(&name).approval() == Approval::Ask;
        let kept = asks.then(|| (message.clone(), args.clone()));
        // Kept to find the record of a replay only where its note says when.
        let noted = self.shared.note_replays.then(|| args.clone());
        // Where the person may be asked, they are asked first, and the
        // tool's wait (`approval_wait`) is for when they were not.
        let waits = !asks;
        let (mut answer, mut unrecorded) =
            self.through_registry(&write, message, args, waits).await;
        if let (Err(ToolError::ApprovalRequired { key, .. }), Some((message, args))) =
            (&answer.result, kept)
        {
            match self
                .ask_person(&write, (&message, &args), key.as_str(), brought)
                .await
            {
                ask::Person::Answered | ask::Person::Waits => {
                    (answer, unrecorded) = self.through_registry(&write, message, args, true).await;
                }
                ask::Person::Asks(result) => {
                    self.forget(&route);
                    return sink.deliver(jsonrpc::response(id.clone(), result), Some(&id));
                }
            }
        }
        self.forget(&route);
        // A request the client cancelled gets no response.
        if !asked.cancelled() {
            let replay = match answer.replayed {
                true => {
                    let registry = &catalog.registry;
                    let call = (bound.context(), name.as_str());
                    Some(Replay::of(registry, call, noted, repeat, offered).await)
                }
                false => None,
            };
            let response = self.answered(id.clone(), answer, unrecorded, replay);
            sink.deliver(jsonrpc::completed(response, modern), Some(&id));
        }
    }

    /// The client's write `message` of tool `name` bound to its run,
    /// tenant and operation key, its arguments (what the operation is
    /// keyed on) and the repeat it asks for, taken out of the message
    /// (`idem_repeat` never goes upstream); or why it cannot be made.
    fn bind(
        &self,
        catalog: &Catalog,
        name: &str,
        message: &mut Value,
        caller: &Caller,
    ) -> Result<(BoundCall, Value, u64), String> {
        let run_scoped = catalog.run_scoped.contains(name);
        let meta = jsonrpc::operation_meta(message);
        let bound = self
            .binding
            .bind_parts(name, meta.as_ref(), caller, run_scoped)?;
        let mut args = jsonrpc::params(message)
            .and_then(|p| p.get("arguments"))
            .cloned()
            .unwrap_or(Value::Null);
        let repeat = match catalog.repeats.contains(name) {
            true => repeat::take(message, &mut args)?,
            false => 1,
        };
        Ok((bound, args, repeat))
    }

    /// The registry's answer to `write` (the client's request `message`,
    /// as it goes upstream, with `args`), and what the upstream answered
    /// that is not recorded. Where the tool waits for a person (and
    /// `waits`), the client that gave a progress token is told so now and
    /// then, and its cancellation ends the wait.
    async fn through_registry(
        &self,
        write: &Write<'_>,
        message: Value,
        args: Value,
        waits: bool,
    ) -> (Answer, Option<Unrecorded>) {
        let token = jsonrpc::meta(&message)
            .and_then(|m| m.get("progressToken"))
            .cloned();
        let told = Progress::new(token, write.route);
        let told = |waiting: &Waiting<'_>| told.as_ref().map_or((), |p| p.tell(waiting));
        let cancelled = || write.asked.stops_waiting();
        let mut context = write
            .bound
            .context()
            .on_wait(&told)
            .stop_waiting_when(&cancelled);
        if !waits {
            context = context.without_waiting();
        }
        let call = Call {
            link: self.link.clone(),
            request: message,
            route: write.route.clone(),
            cancelled: write.asked.clone(),
            drain: self.shared.drain.clone(),
            unrecorded: RefCell::new(None),
        };
        let registry = &write.catalog.registry;
        CALL.scope(call, async {
            let answer = registry.answer(context, write.name, args).await;
            let unrecorded = CALL.with(|call| call.unrecorded.borrow_mut().take());
            (answer, unrecorded)
        })
        .await
    }

    /// The response to a write: the upstream's result as it came (marked
    /// when replayed), its JSON-RPC error, or idem's own error as a result
    /// the model reads.
    fn answered(
        &self,
        id: Value,
        answer: Answer,
        unrecorded: Option<Unrecorded>,
        replay: Option<Replay>,
    ) -> Value {
        match (answer.result, unrecorded) {
            (Ok(result), _) => {
                let mut result = tool_result(result);
                if let Some(replay) = replay {
                    mark_replayed(&mut result, replay);
                }
                jsonrpc::response(id, result)
            }
            (Err(ToolError::Failed { .. }), Some(Unrecorded::Result(result))) => {
                jsonrpc::response(id, result)
            }
            (Err(ToolError::Failed { .. }), Some(Unrecorded::Refused(error))) => {
                json!({"jsonrpc": "2.0", "id": id, "error": error})
            }
            (Err(ToolError::UnknownTool { name }), _) => {
                jsonrpc::error(id, code::INVALID_PARAMS, &format!("unknown tool `{name}`"))
            }
            (Err(e), _) => {
                let mut answer = error_result(id, &e.model_message());
                if let Some(meta) = idem::mcp::error_meta(&e) {
                    answer["result"]["_meta"] = meta;
                }
                answer
            }
        }
    }
}

/// A client's write, as the registry is called for it.
pub(super) struct Write<'a> {
    pub(super) catalog: &'a Catalog,
    pub(super) name: &'a str,
    pub(super) bound: &'a BoundCall,
    pub(super) route: &'a Route,
    pub(super) asked: &'a Arc<Asked>,
}
