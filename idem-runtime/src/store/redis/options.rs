//! [`RedisOptions`]: how a [`RedisStore`](super::RedisStore) connects
//! (timeouts, reconnection, replicas to wait for, TLS roots).

use std::time::Duration;

use redis::{IntoConnectionInfo, RedisError};

use crate::error::StoreError;

/// How [`RedisStore`](super::RedisStore) connects.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisOptions {
    pub(crate) connection_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) reconnect_retries: usize,
    pub(crate) wait_for_replicas: Option<(usize, Duration)>,
    pub(crate) record_format: u32,
    pub(crate) claim_reads_back: bool,
    #[cfg(feature = "redis-tls")]
    pub(crate) tls_root_ca: Option<Vec<u8>>,
}

impl RedisOptions {
    /// The defaults: 1 s timeouts, 2 reconnection attempts.
    pub fn new() -> RedisOptions {
        RedisOptions::default()
    }

    /// Bound on connecting (and reconnecting) to a node: 1 s.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Bound on one command's answer: 1 s. A command sent for a registry
    /// whose store timeout is no longer is bounded by that timeout alone
    /// (it always ends the wait first), so this matters there only when
    /// it is the shorter: a command that gets no answer within it is sent
    /// once more within the same store timeout, over a new connection if
    /// its own answered nothing since.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// After every write (a claim, a recorded outcome, a renewal), waits up
    /// to `timeout` for `replicas` replicas to acknowledge it (`WAIT`), so
    /// that a failover to a replica loses neither claims nor results.
    ///
    /// A write not acknowledged in time fails as [`StoreError::Busy`]: a
    /// claim then runs nothing and is released at once (so every caller
    /// is told so, none finds it in flight), and recording an outcome is
    /// retried as after any store failure. Without it, a failover can lose the
    /// writes of the last moments before it (replication is asynchronous),
    /// and an operation whose claim or result was lost runs again.
    ///
    /// Single servers only: [`RedisStore::connect_cluster_with`](super::RedisStore::connect_cluster_with) refuses
    /// it, since a cluster connection does not keep a `WAIT` on the
    /// connection of the write before it.
    pub fn wait_for_replicas(mut self, replicas: usize, timeout: Duration) -> Self {
        self.wait_for_replicas = Some((replicas, timeout));
        self
    }

    /// Writes records in format `version` (docs/spec.md, "Record
    /// formats"): 4 by default; 3 while workers of idem 0.3 share the
    /// store, which read formats 1 to 3; 2 while workers of idem 0.2 do,
    /// which read formats 1 and 2 only; 1 while workers of idem 0.1 do,
    /// which read only format 1.
    ///
    /// Every version reads every earlier format, so a fleet is upgraded
    /// without stopping it in two steps: deploy this version with
    /// `record_format` set to what the oldest worker reads; once no older
    /// worker is left, deploy it without. Records written in format 1 do
    /// not name their tool or their age (`idem show` and `idem list` print
    /// `-`); records in format 1 and 2 do not say what their operation is
    /// (its arguments, tenant and run); records before format 4 do not
    /// keep their claim's retention, so a lapsed claim is remembered for
    /// [`CLAIM_RETENTION`](crate::store::CLAIM_RETENTION) whatever the
    /// claim asked (`ClaimRequest::retention`). [`connect`](super::RedisStore::connect_with)
    /// refuses a format it does not know.
    pub fn record_format(mut self, version: u32) -> Self {
        self.record_format = version;
        self
    }

    /// Whether a claim learns what holds a taken key in the same round
    /// trip, `SET .. NX GET` (Redis 7.0 and later): on by default, so that
    /// a duplicate of a finished operation costs one round trip and no
    /// script. A server that rejects the form (Redis before 7.0 answers
    /// `ERR syntax error`) is detected at the first claim, which the store
    /// logs at `INFO`, and from then on a claim sends `SET .. NX` and, for
    /// a taken key, runs its script: two round trips for a duplicate, as
    /// in idem 0.1. `false` sends the older form from the start (the tests
    /// use it to run that path on any server).
    #[doc(hidden)]
    pub fn claim_reads_back(mut self, on: bool) -> Self {
        self.claim_reads_back = on;
        self
    }

    /// The format to write, if this version writes it.
    pub(super) fn checked_format(&self) -> Result<u32, StoreError> {
        match self.record_format {
            1..=4 => Ok(self.record_format),
            other => Err(StoreError::backend(format!(
                "RedisOptions::record_format({other}): this idem writes Redis record formats 1 to 4"
            ))),
        }
    }

    /// How often a lost connection is retried before commands fail: 2.
    pub fn reconnect_retries(mut self, retries: usize) -> Self {
        self.reconnect_retries = retries;
        self
    }

    /// trust the CA in this PEM
    /// for `rediss://` servers.
    #[cfg(feature = "redis-tls")]
    pub fn tls_root_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_ca = Some(pem.into());
        self
    }

    /// The client for `url`, its sockets set up by
    /// [`tcp_settings`](super::connection::tcp_settings).
    pub(super) fn client(&self, url: &str) -> Result<redis::Client, StoreError> {
        if url.starts_with("rediss://") && !cfg!(feature = "redis-tls") {
            return Err(StoreError::backend(
                "rediss:// (TLS) URLs need idem's `redis-tls` feature",
            ));
        }
        let info = url
            .into_connection_info()
            .map_err(|e| url_error(url, e))?
            .set_tcp_settings(super::connection::tcp_settings());
        #[cfg(feature = "redis-tls")]
        crate::crypto::install_crypto_provider();
        #[cfg(feature = "redis-tls")]
        if let Some(ca) = &self.tls_root_ca {
            let certs = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(ca.clone()),
            };
            return redis::Client::build_with_tls(info, certs).map_err(|e| url_error(url, e));
        }
        redis::Client::open(info).map_err(|e| url_error(url, e))
    }
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            connection_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            reconnect_retries: 2,
            wait_for_replicas: None,
            record_format: 4,
            claim_reads_back: true,
            #[cfg(feature = "redis-tls")]
            tls_root_ca: None,
        }
    }
}

/// An invalid URL, shown without its password.
pub(super) fn url_error(url: &str, e: RedisError) -> StoreError {
    // Never echo a password back: show the scheme and host only.
    let shown = url
        .split_once("://")
        .map(|(scheme, rest)| format!("{scheme}://{}", rest.rsplit('@').next().unwrap_or(rest)))
        .unwrap_or_else(|| "<unparsable>".to_owned());
    StoreError::backend(format!("invalid Redis URL {shown}: {e}"))
}
