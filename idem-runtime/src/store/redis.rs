//! [`RedisStore`]: Redis and Redis Cluster (feature `redis`).
//!
//! Each record is one string under its key, six fields joined by `|`:
//!
//! ```text
//! 1|<state>|<fingerprint>|<attempt>|<token>|<payload>
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `1` | the format version |
//! | state | `running`, `released`, `done` or `failed` |
//! | fingerprint | the arguments' fingerprint, 64 hex digits |
//! | attempt | the holder's attempt number |
//! | token | the lease token of the holder (running), or of the worker that settled it (released, done, failed; empty in records written before idem 0.2) |
//! | payload | the result or error, verbatim (done / failed only; last, so it may hold `|`) |
//!
//! Time is the key's own expiry, kept by the server: a running record
//! expires [`CLAIM_RETENTION`] after its lease ends, so its lease is live
//! while its `PTTL` exceeds the retention. Every operation is over that one
//! key (cluster-safe): a claim is a `SET .. NX PX` of the running record,
//! and only when the key exists a Lua script; the other operations are one
//! Lua script each (a `GET`, one `SET .. PX`, and a `PTTL` when a running
//! record is found).

use std::sync::OnceLock;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, RedisError, ServerErrorKind, Value as RValue};

use super::{CLAIM_RETENTION, Claim, Entry, IdemStore, LeaseToken};
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};

/// Shared preamble: reading a record with its fields checked, and writing
/// one with its expiry.
const PRELUDE: &str = r#"
-- Returns the record, nil when absent, or raises 'corrupt: ..'. A key of
-- another type fails the GET (WRONGTYPE).
local function load(key)
  local raw = redis.call('GET', key)
  if not raw then return nil end
  local v, state, fp, attempt, token, payload =
    string.match(raw, '^(%d+)|(%l+)|(%x*)|(%d*)|(%x*)|(.*)$')
  if not v then return error('corrupt: the value is not an idem record') end
  if v ~= '1' then return error('corrupt: unknown record format version ' .. v) end
  if #fp ~= 64 then return error('corrupt: bad fingerprint') end
  local rec = { state = state, fp = fp, attempt = tonumber(attempt), token = token, payload = payload }
  if state == 'running' then
    if not rec.attempt or #token ~= 32 then return error('corrupt: incomplete running record') end
  elseif state == 'released' then
    if not rec.attempt then return error('corrupt: incomplete released record') end
  elseif state ~= 'done' and state ~= 'failed' then
    return error('corrupt: unknown state ' .. state)
  end
  return rec
end
local function store(key, state, fp, attempt, token, payload, px)
  redis.call('SET', key, '1|' .. state .. '|' .. fp .. '|' .. string.format('%d', attempt) .. '|' .. token .. '|'
    .. payload, 'PX', string.format('%d', px))
end
"#;

/// KEYS[1]; ARGV: fingerprint, token, lease ms, retention ms.
/// Returns {'acquired', attempt} | {'running', fp, attempt} |
/// {'done', fp, result} | {'failed', fp, error}.
const CLAIM: &str = r#"
local rec = load(KEYS[1])
local retention = tonumber(ARGV[4])
local attempt = 0
if rec then
  if rec.state == 'running' and rec.token == ARGV[2] then
    -- Our own claim, sent again after its reply was lost. Written again so
    -- that a WAIT after it covers it.
    redis.call('SET', KEYS[1], redis.call('GET', KEYS[1]), 'KEEPTTL')
    return {'acquired', tostring(rec.attempt)}
  elseif rec.state == 'running' then
    -- The lease is live while more than the retention is left.
    if redis.call('PTTL', KEYS[1]) > retention then return {'running', rec.fp, tostring(rec.attempt)} end
    attempt = rec.attempt + 1
  elseif rec.state == 'released' then
    attempt = rec.attempt + 1
  else
    return {rec.state, rec.fp, rec.payload}
  end
end
store(KEYS[1], 'running', ARGV[1], attempt, ARGV[2], '', tonumber(ARGV[3]) + retention)
return {'acquired', string.format('%d', attempt)}
"#;

/// KEYS[1]; ARGV: token, op ('done' | 'failed' | 'released' | 'renew'),
/// payload (result, error, or lease ms), ms to keep the record (for renew:
/// the retention after the lease).
/// Returns 'ok' or 'lost'.
const SETTLE: &str = r#"
-- The usual case, the running record held with this token
-- ('1|running|' fp '|' attempt '|' token '|'), is settled without parsing
-- it into a table: a fifth of the server's work per call.
local raw = redis.call('GET', KEYS[1])
local held = raw and string.sub(raw, 1, 10) == '1|running|'
  and string.sub(raw, -34) == '|' .. ARGV[1] .. '|' and string.sub(raw, 11, -35)
if held and string.sub(held, 65, 65) == '|' and string.find(held, '^%x+|%d+$') then
  -- held = fp '|' attempt, both checked.
  local op = ARGV[2]
  if op == 'renew' then
    redis.call('SET', KEYS[1], raw, 'PX', string.format('%d', tonumber(ARGV[3]) + tonumber(ARGV[4])))
  else
    -- A settled record keeps the token that settled it.
    redis.call('SET', KEYS[1], '1|' .. op .. '|' .. held .. '|' .. ARGV[1] .. '|' .. ARGV[3], 'PX', ARGV[4])
  end
  return 'ok'
end
-- Anything else: a repeat, lost, or corrupt.
local rec = load(KEYS[1])
local op = ARGV[2]
if rec and rec.token == ARGV[1] and rec.state == op and (op == 'released' or rec.payload == ARGV[3]) then
  -- This very settle took effect already; its reply was lost. Written
  -- again so that a WAIT after it covers it.
  redis.call('SET', KEYS[1], redis.call('GET', KEYS[1]), 'KEEPTTL')
  return 'ok'
end
if not rec or rec.state ~= 'running' or rec.token ~= ARGV[1] then return 'lost' end
if op == 'renew' then
  store(KEYS[1], 'running', rec.fp, rec.attempt, rec.token, '', tonumber(ARGV[3]) + tonumber(ARGV[4]))
else
  store(KEYS[1], op, rec.fp, rec.attempt, rec.token, ARGV[3], tonumber(ARGV[4]))
end
return 'ok'
"#;

/// KEYS[1]. Returns nil | {'running', fp, attempt} | {'done', fp, result} |
/// {'failed', fp, error}; a released record reads as nil.
const GET: &str = r#"
local rec = load(KEYS[1])
if not rec or rec.state == 'released' then return nil end
if rec.state == 'running' then return {'running', rec.fp, tostring(rec.attempt)} end
return {rec.state, rec.fp, rec.payload}
"#;

/// A Lua script and its SHA-1, run with EVALSHA and, on `NOSCRIPT`, with
/// EVAL (which also loads it on that node, so this works per cluster shard).
struct Script {
    body: String,
    sha: String,
}

impl Script {
    fn new(body: &str) -> Script {
        let body = format!("{PRELUDE}\n{body}");
        let sha = redis::Script::new(&body).get_hash().to_owned();
        Script { body, sha }
    }
}

fn scripts() -> &'static [Script; 3] {
    static SCRIPTS: OnceLock<[Script; 3]> = OnceLock::new();
    SCRIPTS.get_or_init(|| [Script::new(CLAIM), Script::new(SETTLE), Script::new(GET)])
}

/// How [`RedisStore`] connects.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisOptions {
    /// Bound on connecting (and reconnecting) to a node: 1 s.
    pub connection_timeout: Duration,
    /// Bound on one command's answer: 1 s.
    pub response_timeout: Duration,
    /// How often a lost connection is retried before commands fail: 2.
    pub reconnect_retries: usize,
    /// Wait for this many replicas to acknowledge every write, up to the
    /// duration (`WAIT`): `None` by default. See
    /// [`wait_for_replicas`](Self::wait_for_replicas).
    pub wait_for_replicas: Option<(usize, Duration)>,
    /// For `rediss://`: the PEM certificate(s) of the CA that signed the
    /// server's certificate, instead of the platform's roots.
    #[cfg(feature = "redis-tls")]
    pub tls_root_ca: Option<Vec<u8>>,
}

impl RedisOptions {
    /// The defaults: 1 s timeouts, 2 reconnection attempts.
    pub fn new() -> RedisOptions {
        RedisOptions::default()
    }

    /// Sets [`connection_timeout`](Self::connection_timeout).
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Sets [`response_timeout`](Self::response_timeout).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// After every write (a claim, a recorded outcome, a renewal), waits up
    /// to `timeout` for `replicas` replicas to acknowledge it (`WAIT`), so
    /// that a failover to a replica loses neither claims nor results.
    ///
    /// A write not acknowledged in time fails as
    /// [`StoreError::Unavailable`]: a claim then runs nothing (its record
    /// holds the key for one lease), and recording an outcome is retried
    /// as after any store failure. Without it, a failover can lose the
    /// writes of the last moments before it (replication is asynchronous),
    /// and an operation whose claim or result was lost runs again.
    ///
    /// Single servers only: [`RedisStore::connect_cluster_with`] refuses
    /// it, since a cluster connection does not keep a `WAIT` on the
    /// connection of the write before it.
    pub fn wait_for_replicas(mut self, replicas: usize, timeout: Duration) -> Self {
        self.wait_for_replicas = Some((replicas, timeout));
        self
    }

    /// Sets [`reconnect_retries`](Self::reconnect_retries).
    pub fn reconnect_retries(mut self, retries: usize) -> Self {
        self.reconnect_retries = retries;
        self
    }

    /// Sets [`tls_root_ca`](Self::tls_root_ca): trust the CA in this PEM
    /// for `rediss://` servers.
    #[cfg(feature = "redis-tls")]
    pub fn tls_root_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_ca = Some(pem.into());
        self
    }

    fn client(&self, url: &str) -> Result<redis::Client, StoreError> {
        #[cfg(feature = "redis-tls")]
        install_crypto_provider();
        #[cfg(feature = "redis-tls")]
        if let Some(ca) = &self.tls_root_ca {
            let certs = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(ca.clone()),
            };
            return redis::Client::build_with_tls(url, certs).map_err(|e| url_error(url, e));
        }
        if url.starts_with("rediss://") && !cfg!(feature = "redis-tls") {
            return Err(StoreError::backend(
                "rediss:// (TLS) URLs need idem's `redis-tls` feature",
            ));
        }
        redis::Client::open(url).map_err(|e| url_error(url, e))
    }
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            connection_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            reconnect_retries: 2,
            wait_for_replicas: None,
            #[cfg(feature = "redis-tls")]
            tls_root_ca: None,
        }
    }
}

/// rustls needs a process-wide crypto provider; choose *ring* unless the
/// application already chose one.
#[cfg(feature = "redis-tls")]
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Fails only if another thread installed one first: fine either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// A store on Redis or Redis Cluster: one reconnecting, multiplexed
/// connection shared by every task (commands from concurrent calls are
/// pipelined on it), atomic single-key operations (`SET .. NX` for a new
/// claim, Lua scripts otherwise), server-side expiry.
///
/// # What the guarantees need from Redis
///
/// - `maxmemory-policy noeviction` (or no `maxmemory`): every record has a
///   TTL, so `volatile-*` and `allkeys-*` policies may evict a claim or a
///   result and let a duplicate run. [`connect`](Self::connect) warns when
///   the policy can evict.
/// - AOF with `appendfsync always` (or `everysec`, accepting up to a second
///   of lost records on a crash), or synchronous replication (`WAIT`), for
///   the records to survive a crash of Redis itself. Without persistence a
///   Redis restart forgets every claim and result; the downstream
///   idempotency key (`ctx.idem_key()`) is then the last line of defence.
pub struct RedisStore {
    conn: Conn,
    /// `WAIT` after every write: replicas, and how long.
    wait: Option<(usize, Duration)>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.conn {
            Conn::Single(_) => "single",
            Conn::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisStore").field("mode", &kind).finish()
    }
}

impl RedisStore {
    /// Connects to one Redis server: `redis://[user:password@]host:port[/db]`,
    /// or `rediss://..` for TLS (feature `redis-tls`).
    pub async fn connect(url: &str) -> Result<RedisStore, StoreError> {
        Self::connect_with(url, RedisOptions::default()).await
    }

    /// [`connect`](Self::connect) with explicit timeouts.
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<RedisStore, StoreError> {
        let client = options.client(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connection_timeout))
            .set_response_timeout(Some(options.response_timeout))
            .set_number_of_retries(options.reconnect_retries)
            .set_max_delay(Duration::from_millis(500));
        let manager = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(store_error)?;
        let store = RedisStore {
            conn: Conn::Single(manager),
            wait: options.wait_for_replicas,
        };
        store.check_eviction_policy().await;
        Ok(store)
    }

    /// Connects to a Redis Cluster through any of its nodes' URLs.
    pub async fn connect_cluster<I, U>(urls: I) -> Result<RedisStore, StoreError>
    where
        I: IntoIterator<Item = U>,
        U: AsRef<str>,
    {
        Self::connect_cluster_with(urls, RedisOptions::default()).await
    }

    /// [`connect_cluster`](Self::connect_cluster) with explicit timeouts.
    pub async fn connect_cluster_with<I, U>(
        urls: I,
        options: RedisOptions,
    ) -> Result<RedisStore, StoreError>
    where
        I: IntoIterator<Item = U>,
        U: AsRef<str>,
    {
        if options.wait_for_replicas.is_some() {
            return Err(StoreError::backend(
                "RedisOptions::wait_for_replicas is not supported with Redis Cluster",
            ));
        }
        let urls: Vec<String> = urls.into_iter().map(|u| u.as_ref().to_owned()).collect();
        #[cfg(feature = "redis-tls")]
        install_crypto_provider();
        let builder = ClusterClient::builder(urls.clone())
            .connection_timeout(options.connection_timeout)
            .response_timeout(options.response_timeout)
            .retries(options.reconnect_retries as u32);
        #[cfg(feature = "redis-tls")]
        let builder = match &options.tls_root_ca {
            Some(ca) => builder.certs(redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(ca.clone()),
            }),
            None => builder,
        };
        let client = builder.build().map_err(|e| url_error(&urls.join(","), e))?;
        let conn = client.get_async_connection().await.map_err(store_error)?;
        let store = RedisStore {
            conn: Conn::Cluster(conn),
            wait: None,
        };
        store.check_eviction_policy().await;
        Ok(store)
    }

    /// Warns when Redis may evict our keys.
    async fn check_eviction_policy(&self) {
        match self.evicting_policy().await {
            Ok(Some(policy)) => tracing::warn!(
                policy,
                "Redis maxmemory-policy can evict idempotency records, letting duplicates run: set `maxmemory-policy noeviction`"
            ),
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "could not read maxmemory-policy"),
        }
    }

    /// The server's `maxmemory-policy` if it can evict records (anything
    /// but `noeviction`), for health checks. An error when `CONFIG GET` is
    /// not allowed, as on some managed services.
    pub async fn evicting_policy(&self) -> Result<Option<String>, StoreError> {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg("maxmemory-policy");
        // A cluster answers from one node; all nodes should agree.
        let pair: Vec<String> = self.query(&cmd).await.map_err(store_error)?;
        Ok(pair.get(1).filter(|p| *p != "noeviction").cloned())
    }

    /// Sends `cmd`; if its connection dropped, sends it once more over a
    /// new one. Safe for every command this store sends: a claim that
    /// took effect recognises its own token, a settle repeated by its token
    /// succeeds, and the rest only read.
    async fn query<T: redis::FromRedisValue>(&self, cmd: &Cmd) -> Result<T, RedisError> {
        match self.query_once(cmd).await {
            Err(e) if connection_lost(&e) => {
                tracing::debug!(error = %e, "Redis connection lost; sending once more");
                self.query_once(cmd).await
            }
            other => other,
        }
    }

    async fn query_once<T: redis::FromRedisValue>(&self, cmd: &Cmd) -> Result<T, RedisError> {
        match &self.conn {
            Conn::Single(c) => cmd.query_async(&mut c.clone()).await,
            Conn::Cluster(c) => cmd.query_async(&mut c.clone()).await,
        }
    }

    /// Sends a write: as [`query`](Self::query), or with `wait_for_replicas`
    /// set, pipelined with its `WAIT` on the same connection. Returns the
    /// reply and how many replicas acknowledged it (for
    /// [`replicated`](Self::replicated)). A write resent after a dropped
    /// connection writes again even when it finds itself applied, so the
    /// `WAIT` on the new connection covers it.
    async fn write(&self, cmd: &Cmd) -> Result<(RValue, usize), RedisError> {
        let Some((replicas, timeout)) = self.wait else {
            return Ok((self.query(cmd).await?, usize::MAX));
        };
        let mut pipe = redis::pipe();
        pipe.add_command(cmd.clone())
            .cmd("WAIT")
            .arg(replicas)
            .arg(millis(timeout));
        let send = async || match &self.conn {
            Conn::Single(c) => pipe.query_async(&mut c.clone()).await,
            Conn::Cluster(c) => pipe.query_async(&mut c.clone()).await,
        };
        match send().await {
            Err(e) if connection_lost(&e) => send().await,
            other => other,
        }
    }

    /// Fails a write that fewer replicas acknowledged than asked for.
    fn replicated(&self, acked: usize) -> Result<(), StoreError> {
        match self.wait {
            Some((replicas, timeout)) if acked < replicas => Err(StoreError::unavailable(format!(
                "the write reached {acked} of {replicas} replicas within {timeout:?}"
            ))),
            _ => Ok(()),
        }
    }

    /// Runs `script` over `key`: EVALSHA, then EVAL if the node lacks it.
    /// Returns the reply and how many replicas acknowledged it (see
    /// [`write`](Self::write)).
    async fn eval(
        &self,
        script: &Script,
        key: &IdemKey,
        args: &[&[u8]],
    ) -> Result<(RValue, usize), StoreError> {
        let build = |verb: &str, first: &str| {
            let mut cmd = redis::cmd(verb);
            cmd.arg(first).arg(1).arg(key.as_str());
            for a in args {
                cmd.arg(*a);
            }
            cmd
        };
        let sent = match self.write(&build("EVALSHA", &script.sha)).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.write(&build("EVAL", &script.body)).await
            }
            other => other,
        };
        sent.map_err(|e| script_error(key, e))
    }

    /// Runs SETTLE: `op` on the record held with `token`.
    async fn settle(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        op: &str,
        payload: &[u8],
        expiry: Duration,
    ) -> Result<(), StoreError> {
        let token = token.id_hex();
        let expiry = millis(expiry).to_string();
        let (reply, acked) = self
            .eval(
                &scripts()[1],
                key,
                &[token.as_bytes(), op.as_bytes(), payload, expiry.as_bytes()],
            )
            .await?;
        match as_text(&reply).as_deref() {
            Some("ok") => self.replicated(acked),
            Some("lost") => Err(StoreError::LeaseLost),
            _ => Err(StoreError::corrupt(
                key.as_str(),
                format!("unexpected reply from Redis to `{op}`: {reply:?}"),
            )),
        }
    }
}

fn as_text(v: &RValue) -> Option<String> {
    match v {
        RValue::BulkString(b) => String::from_utf8(b.clone()).ok(),
        RValue::SimpleString(s) => Some(s.clone()),
        RValue::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn url_error(url: &str, e: RedisError) -> StoreError {
    // Never echo a password back: show the scheme and host only.
    let shown = url
        .split_once("://")
        .map(|(scheme, rest)| format!("{scheme}://{}", rest.rsplit('@').next().unwrap_or(rest)))
        .unwrap_or_else(|| "<unparsable>".to_owned());
    StoreError::backend(format!("invalid Redis URL {shown}: {e}"))
}

/// Whether `e` means the connection broke under the command (closed by the
/// server, reset, a restart), so that it may not have been sent or
/// answered: worth sending once more over a new connection.
fn connection_lost(e: &RedisError) -> bool {
    e.is_connection_dropped() || e.is_io_error() || e.is_unrecoverable_error()
}

/// Replies with which a server says it cannot serve now but will soon:
/// loading its data after a restart, running a long script, a replica not
/// yet promoted or resyncing, a cluster reconfiguring.
const NOT_NOW: &[&str] = &[
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "MASTERDOWN",
    "READONLY",
    "CLUSTERDOWN",
];

/// Connection-level failures and a server that cannot serve now are
/// `Unavailable` (retry later); the rest are the backend's own errors.
fn store_error(e: RedisError) -> StoreError {
    if e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || e.is_cluster_error()
        || e.code().is_some_and(|code| NOT_NOW.contains(&code))
    {
        StoreError::unavailable(e)
    } else {
        StoreError::backend(e)
    }
}

/// A script's own `error('corrupt: ..')` or a `WRONGTYPE` is a corrupt
/// record; anything else as [`store_error`].
fn script_error(key: &IdemKey, e: RedisError) -> StoreError {
    let message = e.to_string();
    if let Some(i) = message.find("corrupt: ") {
        let reason = message[i + "corrupt: ".len()..]
            .split(" script:")
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        return StoreError::corrupt(key.as_str(), reason);
    }
    if e.code() == Some("WRONGTYPE") {
        return StoreError::corrupt(key.as_str(), "the key holds another Redis type");
    }
    store_error(e)
}

/// Parses `{'tag', fp, value}` replies of CLAIM and GET.
fn parse_entry(key: &IdemKey, parts: &[RValue]) -> Result<Entry, StoreError> {
    let corrupt = |why: &str| StoreError::corrupt(key.as_str(), why.to_owned());
    let field = |i: usize| parts.get(i).and_then(as_text);
    let fingerprint = field(1)
        .and_then(|f| Fingerprint::from_hex(&f))
        .ok_or_else(|| corrupt("bad fingerprint"))?;
    let value = field(2).ok_or_else(|| corrupt("missing value"))?;
    match field(0).as_deref() {
        Some("running") => Ok(Entry::Running {
            fingerprint,
            attempt: value.parse().map_err(|_| corrupt("bad attempt"))?,
        }),
        Some("done") => Ok(Entry::Done {
            result: value,
            fingerprint,
        }),
        Some("failed") => Ok(Entry::Failed {
            error: value,
            fingerprint,
        }),
        _ => Err(corrupt("unexpected reply")),
    }
}

impl IdemStore for RedisStore {
    async fn claim(
        &self,
        key: &IdemKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let token = LeaseToken::generate(0);
        let (fp, id) = (fingerprint.to_hex(), token.id_hex());
        // A key seen for the first time, the usual case, needs no script:
        // `SET .. NX` writes the record CLAIM would write there (attempt 0).
        // A script costs the server several times a plain SET, and the
        // server is what bounds a fleet's throughput (BENCHMARKS.md).
        let mut first = redis::cmd("SET");
        first
            .arg(key.as_str())
            .arg(format!("1|running|{fp}|0|{id}|"))
            .arg("NX")
            .arg("PX")
            .arg(millis(lease).saturating_add(millis(CLAIM_RETENTION)));
        match self.write(&first).await {
            Ok((RValue::Okay, acked)) => {
                self.replicated(acked)?;
                return Ok(Claim::Acquired(token));
            }
            // Taken (or of another type): the script sorts out which.
            Ok((RValue::Nil, _)) => {}
            Ok((other, _)) => {
                return Err(StoreError::corrupt(
                    key.as_str(),
                    format!("unexpected reply to SET NX: {other:?}"),
                ));
            }
            Err(e) => return Err(script_error(key, e)),
        }
        let (lease_ms, retention_ms) = (
            millis(lease).to_string(),
            millis(CLAIM_RETENTION).to_string(),
        );
        let (reply, acked) = self
            .eval(
                &scripts()[0],
                key,
                &[
                    fp.as_bytes(),
                    id.as_bytes(),
                    lease_ms.as_bytes(),
                    retention_ms.as_bytes(),
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
            self.replicated(acked)?;
            return Ok(Claim::Acquired(LeaseToken::from_parts(token.id(), attempt)));
        }
        parse_entry(key, &parts).map(Claim::Existing)
    }

    async fn complete(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        result: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.settle(key, token, "done", result.as_bytes(), ttl)
            .await
    }

    async fn release(&self, key: &IdemKey, token: &LeaseToken) -> Result<(), StoreError> {
        self.settle(key, token, "released", b"", CLAIM_RETENTION)
            .await
    }

    async fn fail(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        error: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.settle(key, token, "failed", error.as_bytes(), ttl)
            .await
    }

    async fn renew(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        // SETTLE's `renew` takes the lease as payload and the retention as
        // the expiry beyond it.
        let lease_ms = millis(lease).to_string();
        self.settle(key, token, "renew", lease_ms.as_bytes(), CLAIM_RETENTION)
            .await
    }

    async fn get(&self, key: &IdemKey) -> Result<Option<Entry>, StoreError> {
        match self.eval(&scripts()[2], key, &[]).await?.0 {
            RValue::Nil => Ok(None),
            RValue::Array(parts) => parse_entry(key, &parts).map(Some),
            _ => Err(StoreError::corrupt(key.as_str(), "unexpected reply to get")),
        }
    }
}
