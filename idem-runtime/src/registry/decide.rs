//! A person's decision on an operation that awaits their approval: approve
//! it (the next call of the very same arguments runs it, once) or refuse
//! it (every call of it is answered the refusal). Written with the token
//! that asked, so of two decisions at once one lands and the other is
//! told; a decision on anything but an awaiting record is refused.

use super::dispatch::Registry;
use super::entry::Terms;
use crate::engine::bounded;
use crate::error::{ResolveError, StoreError};
use crate::key::IdemKey;
use crate::seal::{PayloadKind, open, seal};
use crate::store::{About, ApprovalAsked, LeaseToken, Outcome, RecordInfo, RecordState, refusal};
use crate::tool::APPROVAL_WINDOW;

impl<S: Send + Sync + 'static> Registry<S> {
    /// Approves the operation under `key`, which awaits a person's
    /// approval: the next call of it (the same tool, tenant, run and
    /// arguments: the same key and fingerprint) runs the body, once, and
    /// later ones replay its result. `by` names the approver; the record
    /// keeps who approved and when in what it says of its operation (its
    /// about, sealed when the registry encrypts results). An approval not
    /// used within the tool's `approval_window` ([`APPROVAL_WINDOW`] by
    /// default; for a tool this registry does not hold, the window the
    /// awaiting record keeps) lapses.
    ///
    /// Refused, changing nothing, when the record does not await an
    /// approval ([`ResolveError::NotAwaiting`]: already decided, running,
    /// settled) or is gone ([`ResolveError::NotFound`]: never asked, or
    /// expired), when another decision came first
    /// ([`ResolveError::Raced`]), and when the record is sealed and this
    /// registry has not its keys ([`ResolveError::Store`]).
    pub async fn approve(&self, key: &IdemKey, by: &str) -> Result<(), ResolveError> {
        let (record, asked) = self.awaiting(key).await?;
        let shared = &self.inner.shared;
        let keys = shared.result_keys.as_deref();
        let about = match record.about.clone() {
            Some(text) => Some(open(keys, key, PayloadKind::About, text)?),
            None => None,
        };
        let about = About::approval(about.as_deref(), by);
        let about = seal(keys, key, PayloadKind::About, about);
        let window = match self.terms(&record) {
            Some(terms) => terms.approval_window,
            None => self.asked(key, &record)?.window.unwrap_or(APPROVAL_WINDOW),
        };
        let outcome = Outcome::Approved {
            about: &about,
            window,
        };
        self.decide(&record, &asked, outcome, "approved").await
    }

    /// Refuses the operation under `key`, which awaits a person's
    /// approval: it never runs, and every call of it is answered a
    /// permanent failure saying a person refused it, and why (`reason`),
    /// for the tool's TTL. Refused, changing nothing, as
    /// [`approve`](Self::approve) is.
    pub async fn deny(&self, key: &IdemKey, reason: &str) -> Result<(), ResolveError> {
        let (record, asked) = self.awaiting(key).await?;
        let shared = &self.inner.shared;
        let ttl = match self.terms(&record) {
            Some(terms) => terms.ttl,
            None => self.asked(key, &record)?.ttl.unwrap_or(shared.defaults.ttl),
        };
        let error = refusal(reason);
        let error = seal(
            shared.result_keys.as_deref(),
            key,
            PayloadKind::Error,
            error,
        );
        let outcome = Outcome::Failed { error: &error, ttl };
        self.decide(&record, &asked, outcome, "refused").await
    }

    /// The terms of the tool of `record`, if this registry holds it.
    fn terms(&self, record: &RecordInfo) -> Option<Terms> {
        let tool = record.tool.as_deref().unwrap_or_default();
        self.tool(tool).ok().and_then(|t| t.decision_terms())
    }

    /// What the awaiting `record` under `key` says of its asking (the
    /// terms kept for a registry that does not hold the tool); nothing
    /// when it keeps none.
    fn asked(&self, key: &IdemKey, record: &RecordInfo) -> Result<ApprovalAsked, ResolveError> {
        let keys = self.inner.shared.result_keys.as_deref();
        let nothing = ApprovalAsked::new(None, "");
        let Some(payload) = record.payload.clone() else {
            return Ok(nothing);
        };
        let payload = open(keys, key, PayloadKind::Error, payload)?;
        Ok(ApprovalAsked::parse(&payload).unwrap_or(nothing))
    }

    /// The record under `key` and the token that asked for its approval,
    /// or why it cannot be decided.
    async fn awaiting(&self, key: &IdemKey) -> Result<(RecordInfo, LeaseToken), ResolveError> {
        let shared = &self.inner.shared;
        let (meta, limit) = (&shared.store_meta, shared.store_timeout);
        let record = bounded(meta, limit, "inspect", shared.store.inspect(key))
            .await?
            .ok_or_else(|| ResolveError::NotFound {
                key: key.to_string(),
            })?;
        if record.state != RecordState::Awaiting {
            return Err(ResolveError::NotAwaiting {
                key: key.to_string(),
                state: record.state,
            });
        }
        let asked = record.holder.ok_or_else(|| {
            StoreError::corrupt(key.as_str(), "an awaiting record without its token")
        })?;
        Ok((record, asked))
    }

    /// Writes `outcome` over the awaiting `record` with the token that
    /// asked; `what` names the decision in the log.
    async fn decide(
        &self,
        record: &RecordInfo,
        asked: &LeaseToken,
        outcome: Outcome<'_>,
        what: &'static str,
    ) -> Result<(), ResolveError> {
        let shared = &self.inner.shared;
        let (meta, limit) = (&shared.store_meta, shared.store_timeout);
        let key = &record.key;
        let settled = shared.store.settle(key, asked, outcome);
        match bounded(meta, limit, "decide", settled).await {
            Ok(()) => {
                let tool = record.tool.as_deref().unwrap_or_default();
                tracing::info!(tool, key = %key, decision = what, "a person decided an operation awaiting approval");
                Ok(())
            }
            Err(StoreError::LeaseLost) => Err(ResolveError::Raced {
                key: key.to_string(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// `args`, the arguments of a call of tool `name`, as a person is
    /// shown them (an approver, an operator): the tool's hidden fields
    /// (`hide`) replaced by `"(hidden)"`. An unknown tool is
    /// [`ToolError::UnknownTool`](crate::ToolError::UnknownTool).
    pub fn shown_arguments(
        &self,
        name: &str,
        mut args: serde_json::Value,
    ) -> Result<serde_json::Value, crate::error::ToolError> {
        self.tool(name)?.hide(&mut args);
        Ok(args)
    }

    /// Whether the operations of tool `name` wait for a person's approval
    /// (`Never` for a read tool or an unknown one).
    #[cfg(feature = "mcp")]
    pub(crate) fn approval_of(&self, name: &str) -> crate::tool::Approval {
        self.tool(name)
            .map_or(crate::tool::Approval::Never, |tool| tool.approval())
    }
}
