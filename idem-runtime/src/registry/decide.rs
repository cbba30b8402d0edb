//! A person's decision on an operation that awaits their approval: approve
//! it (the next call of the very same arguments runs it, once) or refuse
//! it (every call of it is answered the refusal). Written with the token
//! that asked, so of two decisions at once one lands and the other is
//! told; a decision on anything but an awaiting record is refused.

use super::dispatch::Registry;
use crate::engine::bounded;
use crate::error::{ResolveError, StoreError};
use crate::key::IdemKey;
#[cfg(feature = "notify")]
use crate::notify::EventKind;
use crate::seal::{PayloadKind, open, seal};
use crate::store::{About, ApprovalAsked, LeaseToken, Outcome, RecordInfo, RecordState, Refusal};
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
        let (record, token) = self.decidable(key, RecordState::Awaiting).await?;
        let terms = self.terms(&record, self.asked(key, &record)?);
        let about = self.approval(&record, by, &terms)?;
        let outcome = Outcome::Approved {
            about: &about,
            window: terms.window.unwrap_or(APPROVAL_WINDOW),
        };
        self.decide(&record, &token, outcome, "approved").await?;
        #[cfg(feature = "notify")]
        self.tell(&record, EventKind::ApprovalApproved, |e| e.with("by", by));
        Ok(())
    }

    /// Refuses the operation under `key`, which awaits a person's
    /// approval: it never runs, and every call of it is answered
    /// [`ToolError::Denied`](crate::ToolError::Denied): who refused it
    /// (`by`) and why (`reason`), for the tool's TTL (for a tool this
    /// registry does not hold, the TTL the awaiting record keeps). The
    /// record keeps the [`Refusal`]. Refused, changing nothing, as
    /// [`approve`](Self::approve) is.
    pub async fn deny(&self, key: &IdemKey, by: &str, reason: &str) -> Result<(), ResolveError> {
        let (record, token) = self.decidable(key, RecordState::Awaiting).await?;
        let terms = self.terms(&record, self.asked(key, &record)?);
        let error = Refusal::new(by, reason).to_payload();
        let error = self.sealed(key, PayloadKind::Error, error);
        let ttl = terms.ttl.unwrap_or(self.inner.shared.defaults.ttl);
        let outcome = Outcome::Failed { error: &error, ttl };
        self.decide(&record, &token, outcome, "refused").await?;
        #[cfg(feature = "notify")]
        self.tell(&record, EventKind::ApprovalDenied, |e| {
            e.with("by", by).with("reason", reason)
        });
        Ok(())
    }

    /// Takes back the approval given to the operation under `key`, which
    /// no call has used yet: it awaits a person's decision again, as it
    /// did before it was approved (the next call of it is answered
    /// [`ToolError::ApprovalRequired`](crate::ToolError::ApprovalRequired)),
    /// and its record says who revoked it, and when
    /// ([`ApprovalAsked::revoked`]), beside who had approved it. It awaits
    /// for the tool's TTL (for a tool this registry does not hold, the
    /// terms the approval kept).
    ///
    /// Refused, changing nothing, when the record is not an approval
    /// still unused ([`ResolveError::NotApproved`], which says what it is:
    /// awaiting, already used and running or done, refused, lapsed), when
    /// it is gone ([`ResolveError::NotFound`]), when a call used the
    /// approval or another decision came first ([`ResolveError::Raced`]),
    /// and when the record is sealed and this registry has not its keys.
    pub async fn revoke(&self, key: &IdemKey, by: &str) -> Result<(), ResolveError> {
        let (record, token) = self.decidable(key, RecordState::Approved).await?;
        let about = self
            .opened_about(&record)?
            .as_deref()
            .and_then(About::parse);
        let (tenant, approved) = about.map_or((None, None), |a| (a.tenant, a.approved));
        let mut kept = ApprovalAsked::new(None, "");
        if let Some(approved) = approved {
            (kept.window, kept.ttl) = (approved.window, approved.ttl);
        }
        let terms = self.terms(&record, kept);
        let tool = record.tool.as_deref().unwrap_or_default();
        let (window, ttl) = (
            terms.window.unwrap_or(APPROVAL_WINDOW),
            terms.ttl.unwrap_or(self.inner.shared.defaults.ttl),
        );
        let request = ApprovalAsked::for_tool(tool, tenant.as_deref())
            .with_terms(window, ttl)
            .revoked_by(by);
        let request = self.sealed(key, PayloadKind::Error, request.to_payload());
        let outcome = Outcome::Awaiting {
            request: &request,
            ttl,
        };
        self.decide(&record, &token, outcome, "revoked").await
    }

    /// The terms a decision on `record` is written on: the tool's, if this
    /// registry holds it, else those the record kept (`kept`).
    fn terms(&self, record: &RecordInfo, kept: ApprovalAsked) -> ApprovalAsked {
        let tool = record.tool.as_deref().unwrap_or_default();
        match self.tool(tool).ok().and_then(|t| t.decision_terms()) {
            Some(terms) => kept.with_terms(terms.approval_window, terms.ttl),
            None => kept,
        }
    }

    /// The about an approval by `by` on `terms` writes over `record`'s,
    /// sealed as the record's was.
    fn approval(
        &self,
        record: &RecordInfo,
        by: &str,
        terms: &ApprovalAsked,
    ) -> Result<String, ResolveError> {
        let about = About::approval(self.opened_about(record)?.as_deref(), by, terms);
        Ok(self.sealed(&record.key, PayloadKind::About, about))
    }

    /// What `record` says of its operation, opened.
    pub(super) fn opened_about(&self, record: &RecordInfo) -> Result<Option<String>, ResolveError> {
        let keys = self.inner.shared.result_keys.as_deref();
        Ok(match record.about.clone() {
            Some(text) => Some(open(keys, &record.key, PayloadKind::About, text)?),
            None => None,
        })
    }

    /// `text`, sealed when the registry encrypts results.
    fn sealed(&self, key: &IdemKey, kind: PayloadKind, text: String) -> String {
        seal(self.inner.shared.result_keys.as_deref(), key, kind, text)
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

    /// The record under `key`, which must be in state `wanted` (awaiting
    /// for a decision, approved for a revocation), and the token that
    /// asked for its approval; or why it cannot be decided.
    async fn decidable(
        &self,
        key: &IdemKey,
        wanted: RecordState,
    ) -> Result<(RecordInfo, LeaseToken), ResolveError> {
        let shared = &self.inner.shared;
        let (meta, limit) = (&shared.store_meta, shared.store_timeout);
        let record = bounded(meta, limit, "inspect", shared.store.inspect(key))
            .await?
            .ok_or_else(|| ResolveError::NotFound {
                key: key.to_string(),
            })?;
        if record.state != wanted {
            let (key, state) = (key.to_string(), record.state);
            return Err(match wanted {
                RecordState::Approved => ResolveError::NotApproved { key, state },
                _ => ResolveError::NotAwaiting { key, state },
            });
        }
        let token = record.holder.ok_or_else(|| {
            StoreError::corrupt(
                key.as_str(),
                "a record awaiting a decision without its token",
            )
        })?;
        Ok((record, token))
    }

    /// Writes `outcome` over `record` with the token that asked; `what`
    /// names the decision in the log.
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
                self.announce(key).await;
                Ok(())
            }
            Err(StoreError::LeaseLost) => Err(ResolveError::Raced {
                key: key.to_string(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Tells the calls waiting on `key`, in every process, that a
    /// decision on it is written ([`IdemStore::announce`]). A failure is
    /// logged and no more: the decision stands, and they see it when they
    /// next look at the record.
    ///
    /// [`IdemStore::announce`]: crate::IdemStore::announce
    pub(super) async fn announce(&self, key: &IdemKey) {
        let shared = &self.inner.shared;
        let (meta, limit) = (&shared.store_meta, shared.store_timeout);
        if let Err(e) = bounded(meta, limit, "announce", shared.store.announce(key)).await {
            tracing::warn!(key = %key, error = %e, "could not announce a decision; the calls waiting on it see it when they next look");
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
