//! How a [`RedisStore`] claims a key, in its two steps: a first claim that
//! finds no record (or takes over a lapsed one) with one script, and a
//! claim that meets an existing record, answered from what it holds.

use std::sync::atomic::Ordering;

use redis::Value as RValue;

use super::error::{as_text, rejects_option, script_error};
use super::record::{self, RunningLine, State};
use super::scripts::scripts;
use super::{RedisStore, millis, parse_entry};
use crate::error::StoreError;
use crate::key::IdemKey;
use crate::store::{CLAIM_RETENTION, Claim, ClaimRequest, LeaseToken};

/// The two steps of a claim.
impl RedisStore {
    /// A key seen for the first time, the usual case, needs no script:
    /// `SET .. NX` writes the record CLAIM would write there (attempt 0).
    /// A script costs the server several times a plain SET, and the
    /// server is what bounds a fleet's throughput (BENCHMARKS.md).
    ///
    /// With `GET` (Redis 7.0 and later) a taken key answers its record in
    /// the same reply, so a duplicate of a finished operation, the traffic
    /// of a retry storm, is replayed without a script or a second round
    /// trip. The claim's record, or what holds the key when it is a
    /// recorded outcome; `None` when the CLAIM script must decide (the key
    /// is running, released, or not a record this reader recognises).
    pub(super) async fn claim_new(
        &self,
        key: &IdemKey,
        request: &ClaimRequest<'_>,
        token: &LeaseToken,
        life: u64,
    ) -> Result<Option<Claim>, StoreError> {
        let line = self.running_line(request, life, token);
        loop {
            let with_get = self.set_get.load(Ordering::Relaxed);
            let size = key.as_str().len() + line.as_str().len() + 24;
            let mut first = redis::Cmd::with_capacity(7, size);
            first
                .arg("SET")
                .arg(key.as_str())
                .arg(line.as_str())
                .arg("NX");
            if with_get {
                first.arg("GET");
            }
            first.arg("PX").arg(life);
            return match self.write(&first, self.wait).await {
                // Without GET a new key answers OK; with it, nil (there
                // was no old value), and a taken one its value.
                Ok((RValue::Okay, acked)) if !with_get => self
                    .acquired(key, token, Some(line), acked, Claim::Acquired)
                    .await
                    .map(Some),
                Ok((RValue::Nil, acked)) if with_get => self
                    .acquired(key, token, Some(line), acked, Claim::Acquired)
                    .await
                    .map(Some),
                Ok((RValue::Nil, _)) => Ok(None),
                Ok((RValue::BulkString(held), _)) if with_get => {
                    let ours = (line.fingerprint_hex(), request.fingerprint);
                    Ok(record::settled_entry(held, Some(ours)).map(Claim::Existing))
                }
                Ok((other, _)) => Err(StoreError::corrupt(
                    key.as_str(),
                    format!("unexpected reply to SET NX: {other:?}"),
                )),
                Err(e) if with_get && rejects_option(&e) => {
                    tracing::info!(
                        error = %e,
                        "the Redis server does not take `SET .. NX GET` (Redis 7.0+): claiming with `SET .. NX` and a script from now on"
                    );
                    self.set_get.store(false, Ordering::Relaxed);
                    continue;
                }
                Err(e) => Err(script_error(key, e)),
            };
        }
    }

    /// The record `request`'s claim with `token` writes, living `life` ms.
    pub(super) fn running_line(
        &self,
        request: &ClaimRequest<'_>,
        life: u64,
        token: &LeaseToken,
    ) -> RunningLine {
        let about = request.about.unwrap_or_default();
        RunningLine::new(
            self.format,
            request.fingerprint,
            request.tool,
            life,
            self.retention_ms(request),
            token,
            about,
        )
    }

    /// How long the record of `request`'s claim outlives its lease, in ms:
    /// what it asks, where the format written keeps it (4 and later);
    /// [`CLAIM_RETENTION`], which every reader of an earlier format
    /// assumes, where it does not.
    pub(super) fn retention_ms(&self, request: &ClaimRequest<'_>) -> u64 {
        millis(if self.format >= 4 {
            request.retention
        } else {
            CLAIM_RETENTION
        })
    }

    /// How long the record of `request`'s claim lives, in ms: its lease,
    /// then its retention (the CLAIM script reckons the same).
    pub(super) fn claim_life(&self, request: &ClaimRequest<'_>) -> u64 {
        millis(request.lease).saturating_add(self.retention_ms(request))
    }

    /// A claim that took the key with `line`, once enough replicas have it.
    /// One that too few acknowledged is given up at once (released), so
    /// that every caller of the operation is told the same, rather than
    /// the next ones finding it in flight for a lease while nothing runs.
    pub(super) async fn acquired(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        line: Option<RunningLine>,
        acked: usize,
        took: fn(LeaseToken) -> Claim,
    ) -> Result<Claim, StoreError> {
        if let Some(line) = line {
            self.remember(token, line);
        }
        if let Err(e) = self.replicated(acked) {
            // Without waiting for replicas again: the release only keeps
            // the primary from holding a claim nobody runs under.
            let released = State::Released.as_str();
            // Boxed: rare, and its future would enlarge every claim's.
            let release = self.run_settle(key, token, released, b"", CLAIM_RETENTION, None);
            if let Err(release) = Box::pin(release).await {
                tracing::debug!(key = %key, error = %release, "releasing a claim too few replicas acknowledged");
            }
            return Err(e);
        }
        Ok(took(*token))
    }

    /// The CLAIM script, for a key that exists: claimed with `token` (at
    /// the attempt the record counts), or what holds it.
    pub(super) async fn claim_existing(
        &self,
        key: &IdemKey,
        request: &ClaimRequest<'_>,
        token: &LeaseToken,
    ) -> Result<Claim, StoreError> {
        let mut fp = String::new();
        record::push_fingerprint(&mut fp, self.format, request.fingerprint);
        let id = token.id_hex();
        let (lease_ms, retention_ms, format) = (
            millis(request.lease).to_string(),
            self.retention_ms(request).to_string(),
            self.format.to_string(),
        );
        let (reply, acked) = self
            .eval(
                &scripts().claim,
                key,
                &[
                    fp.as_bytes(),
                    id.as_bytes(),
                    lease_ms.as_bytes(),
                    retention_ms.as_bytes(),
                    request.tool.as_bytes(),
                    format.as_bytes(),
                    request.about.unwrap_or_default().as_bytes(),
                ],
            )
            .await?;
        let RValue::Array(parts) = reply else {
            return Err(StoreError::corrupt(
                key.as_str(),
                "unexpected reply to claim",
            ));
        };
        if parts.first().and_then(as_text).as_deref() == Some("acquired") {
            let attempt = parts
                .get(1)
                .and_then(as_text)
                .and_then(|a| a.parse().ok())
                .ok_or_else(|| StoreError::corrupt(key.as_str(), "bad attempt"))?;
            // The script wrote what a first claim at this attempt writes,
            // but for the about of an approval it used up, which this
            // store does not know: that record's settle parses it.
            let token = LeaseToken::from_parts(token.id(), attempt);
            let line = self.running_line(request, self.claim_life(request), &token);
            let (line, took): (_, fn(LeaseToken) -> Claim) =
                match parts.get(2).and_then(as_text).as_deref() {
                    Some("lapsed") => (Some(line), Claim::TakenOver),
                    Some("approved") => (None, Claim::Approved),
                    _ => (Some(line), Claim::Acquired),
                };
            return self.acquired(key, &token, line, acked, took).await;
        }
        parse_entry(key, &parts).map(Claim::Existing)
    }
}
