//! [`RedisStore`]: Redis and Redis Cluster (feature `redis`).
//!
//! Each record is one string under its key, ten fields joined by `|`
//! (format 3; records of formats 1 and 2 are read too, docs/spec.md):
//!
//! ```text
//! 3|<state>|<fingerprint>|<attempt>|<tool>|<life>|<n>|<about>|<token>|<payload>
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `3` | the format version |
//! | state | `running`, `released`, `done`, `failed` or `unknown` |
//! | fingerprint | the arguments' fingerprint, 64 hex digits |
//! | attempt | the holder's attempt number |
//! | tool | the tool whose call it is (empty in a record first written in format 1) |
//! | life | ms from when the record entered its state (its claim, for a running one) to its expiry: its age is `life − PTTL` |
//! | n, about | what the record says of its operation (`ClaimRequest::about`), `n` bytes of any text (`0` and nothing when it says nothing) |
//! | token | the lease token of the holder (running), or of the worker that settled it (released, done, failed, unknown; empty in records written before idem 0.2) |
//! | payload | the result, error or reason, verbatim (done / failed / unknown only; last, so it may hold `|`) |
//!
//! Time is the key's own expiry, kept by the server: a running record
//! expires [`CLAIM_RETENTION`] after its lease ends, so its lease is live
//! while its `PTTL` exceeds the retention. Every operation is over that one
//! key (cluster-safe):
//!
//! - a claim is `SET .. NX GET PX` of the running record (Redis 7.0 and
//!   later; `SET .. NX PX` on older servers), which takes a free key or
//!   answers what holds it in the same round trip: a recorded outcome is
//!   replayed from that answer, and only a running, released or
//!   unrecognised record goes on to the CLAIM script;
//! - a settle (complete, fail, release, renew) is the SETTLE script: when
//!   the key still holds the running record of the settling token, it
//!   writes the settled record the client built from the one its claim
//!   wrote; anything else it parses. On a server that compares and sets
//!   natively (`SET .. IFEQ`: Valkey 8.1 and later, Redis 8.4 and later,
//!   told by its `HELLO`) that usual case is one `SET .. IFEQ` of the
//!   settled record over the running one instead, and the script runs only
//!   when the key holds anything else;
//! - the other operations are one Lua script each (a `GET`, and a `PTTL`
//!   when a running record is found).

mod conn;
mod error;
mod options;
mod record;
mod scan;
mod scripts;
mod server;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, RedisError, ServerErrorKind, Value as RValue};

use self::conn::{Connections, Dialer, tcp_settings};
use self::error::{
    as_bytes, as_text, function_missing, refuses_functions, rejects_option, script_error,
    store_error,
};
pub use self::options::RedisOptions;
#[cfg(feature = "redis-tls")]
use self::options::install_crypto_provider;
use self::options::url_error;
use self::record::{RunningLine, State};
use self::scripts::{Script, scripts};
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};
use crate::store::hashing::PassThroughMap;
use crate::store::{
    BoxFuture, CLAIM_RETENTION, Claim, ClaimRequest, Entry, IdemStore, LeaseToken, Outcome,
    RecordInfo, ScanFilter, ScanPage,
};

/// A store on Redis or Redis Cluster: one multiplexed connection shared by
/// every task (commands from concurrent calls are pipelined on it),
/// replaced as soon as a command sent over it goes unanswered, atomic
/// single-key operations (`SET .. NX` for a new claim; on Valkey 8.1+ and
/// Redis 8.4+ `SET .. IFEQ` for a settle; Lua scripts otherwise),
/// server-side expiry.
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
    conns: Connections,
    /// `WAIT` after every write: replicas, and how long.
    wait: Option<(usize, Duration)>,
    /// The record format written ([`RedisOptions::record_format`]).
    format: u32,
    /// Whether a first claim asks `SET .. NX GET` (Redis 7.0 and later),
    /// which answers a taken key's record in the same round trip; cleared
    /// for good when the server rejects the form
    /// ([`RedisOptions::claim_reads_back`]).
    set_get: AtomicBool,
    /// Whether scripts run as functions of idem's library (`FCALL`,
    /// Redis 7.0 and later), loaded at connection and again wherever a
    /// node lacks it; cleared for good when the server refuses functions
    /// (an older server, or an ACL without `FCALL` and `FUNCTION LOAD`):
    /// scripts then run by EVALSHA.
    functions: AtomicBool,
    /// Whether a settle first tries `SET .. IFEQ` (Valkey 8.1 and later,
    /// Redis 8.4 and later): the settled record written over the running
    /// one its claim wrote, one plain command where SETTLE is a function
    /// reading and writing in Lua, several times a plain `SET`'s server
    /// time (BENCHMARKS.md). Set at connection when the server's `HELLO`
    /// names one of those; cleared for good when a node rejects the form.
    set_ifeq: AtomicBool,
    /// The running record each claim of this store wrote, by its token's
    /// id, until it is settled: a settle then sends the settled record
    /// whole, built from it, and the script writes it without parsing
    /// the key's (a settle's script is most of the server's work per
    /// call). Forgotten at a renewal; at most [`REMEMBERED`] at once.
    written: Mutex<PassThroughMap<u128, RunningLine>>,
}

/// How many running records a store remembers at most
/// (`RedisStore::written`): a few MB.
const REMEMBERED: usize = 1 << 15;

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.conns.is_cluster() {
            "cluster"
        } else {
            "single"
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
        let format = options.checked_format()?;
        let client = options.client(url)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(options.connection_timeout))
            .set_response_timeout(Some(options.response_timeout));
        let dialer = Dialer::Single { client, config };
        let store = RedisStore {
            conns: Connections::new(dialer, options.reconnect_retries),
            wait: options.wait_for_replicas,
            format,
            set_get: AtomicBool::new(options.claim_reads_back),
            functions: AtomicBool::new(true),
            set_ifeq: AtomicBool::new(false),
            written: Mutex::default(),
        };
        store.first_connection().await?;
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
        let format = options.checked_format()?;
        if options.wait_for_replicas.is_some() {
            return Err(StoreError::backend(
                "RedisOptions::wait_for_replicas is not supported with Redis Cluster",
            ));
        }
        let urls: Vec<String> = urls.into_iter().map(|u| u.as_ref().to_owned()).collect();
        #[cfg(feature = "redis-tls")]
        install_crypto_provider();
        let builder = ClusterClient::builder(urls.clone())
            .tcp_settings(tcp_settings())
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
        let store = RedisStore {
            conns: Connections::new(Dialer::Cluster(client), options.reconnect_retries),
            wait: None,
            format,
            set_get: AtomicBool::new(options.claim_reads_back),
            functions: AtomicBool::new(true),
            set_ifeq: AtomicBool::new(false),
            written: Mutex::default(),
        };
        store.first_connection().await?;
        Ok(store)
    }

    /// Makes the first connection, so that a store that cannot connect is
    /// an error at once, warns if Redis may evict records, and asks the
    /// server whether it compares and sets natively.
    async fn first_connection(&self) -> Result<(), StoreError> {
        self.conns.open().await.map_err(store_error)?;
        // Failing to load is not fatal: a node that lacks the library
        // loads it at its first call.
        if let Err(e) = self.load_library().await {
            tracing::debug!(error = %e, "loading idem's Redis functions");
        }
        self.check_eviction_policy().await;
        // `HELLO` without a protocol version changes nothing on the
        // connection. A server that refuses it (before 6.2, or an ACL
        // without it) is taken not to have `SET .. IFEQ`: a server is
        // asked for it only when it says it is one that has it.
        match self.query::<RValue>(&redis::cmd("HELLO")).await {
            Ok(hello) => {
                let native = server::compares_and_sets(&hello);
                tracing::debug!(native, "whether Redis takes `SET .. IFEQ` for a settle");
                self.set_ifeq.store(native, Ordering::Relaxed);
            }
            Err(e) => tracing::debug!(error = %e, "HELLO refused: settling by script"),
        }
        Ok(())
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

    /// Sends `cmd` ([`Connections::send`]: once more over a new
    /// connection if its own failed under it).
    async fn query<T: redis::FromRedisValue>(&self, cmd: &Cmd) -> Result<T, RedisError> {
        self.conns
            .send(async |mut conn| cmd.query_async(&mut conn).await)
            .await
    }

    /// Sends a write: as [`query`](Self::query), or with `wait` (the
    /// store's `wait_for_replicas`) followed by its `WAIT` on the same
    /// connection. Returns the reply and how many replicas acknowledged it
    /// (for [`replicated`](Self::replicated)). A write resent after a
    /// dropped connection writes again even when it finds itself applied,
    /// so the `WAIT` on the new connection covers it.
    async fn write(
        &self,
        cmd: &Cmd,
        wait: Option<(usize, Duration)>,
    ) -> Result<(RValue, usize), RedisError> {
        let Some((replicas, timeout)) = wait else {
            return Ok((self.query(cmd).await?, usize::MAX));
        };
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(millis(timeout));
        // `WAIT` counts the writes of its own connection: both go over
        // the same one. Only after the command succeeded: one the server
        // refused (a script it lacks, a full server) wrote nothing to
        // wait for, and waiting would spend the call's time.
        self.conns
            .send(async |mut conn| {
                let reply: RValue = cmd.query_async(&mut conn).await?;
                let acked: usize = wait.query_async(&mut conn).await?;
                Ok((reply, acked))
            })
            .await
    }

    /// Fails a write that fewer replicas acknowledged than asked for.
    fn replicated(&self, acked: usize) -> Result<(), StoreError> {
        match self.wait {
            Some((replicas, timeout)) if acked < replicas => Err(StoreError::busy(format!(
                "the write reached {acked} of {replicas} replicas within {timeout:?}"
            ))),
            _ => Ok(()),
        }
    }

    /// Runs `script` over `key` (see [`scripts`]): as a function while the
    /// server takes them, else EVALSHA, then EVAL if the node lacks it.
    /// Returns the reply and how many replicas acknowledged it (see
    /// [`write`](Self::write)).
    async fn eval(
        &self,
        script: &Script,
        key: &IdemKey,
        args: &[&[u8]],
    ) -> Result<(RValue, usize), StoreError> {
        self.eval_waiting(script, key, args, self.wait).await
    }

    /// [`eval`](Self::eval), waiting for replicas as `wait` says.
    async fn eval_waiting(
        &self,
        script: &Script,
        key: &IdemKey,
        args: &[&[u8]],
        wait: Option<(usize, Duration)>,
    ) -> Result<(RValue, usize), StoreError> {
        let call = ScriptCall {
            script,
            key,
            args,
            wait,
        };
        // Only the usual path is in this future: what follows a refusal,
        // and EVALSHA, are boxed, since their futures would enlarge every
        // call's (moved and allocated on each).
        if self.functions.load(Ordering::Relaxed) {
            let fcall = call.command("FCALL", &script.function);
            return match self.write(&fcall, wait).await {
                Err(e)
                    if function_missing(&e)
                        || refuses_functions(&e)
                        || !self.functions.load(Ordering::Relaxed) =>
                {
                    Box::pin(self.eval_after_refusal(call, &fcall, e)).await
                }
                sent => sent.map_err(|e| script_error(key, e)),
            };
        }
        Box::pin(self.eval_by_sha(call)).await
    }

    /// `fcall` failed with `e`: sent again once the library is loaded
    /// again (a server restarted without its data, a failover to a node
    /// that never had the library, a `FUNCTION FLUSH`), or, functions
    /// refused, the script run by EVALSHA.
    async fn eval_after_refusal(
        &self,
        call: ScriptCall<'_>,
        fcall: &Cmd,
        e: RedisError,
    ) -> Result<(RValue, usize), StoreError> {
        let mut sent = Err(e);
        if matches!(&sent, Err(e) if function_missing(e))
            && self.load_library().await.map_err(store_error)?
        {
            sent = self.write(fcall, call.wait).await;
        }
        match sent {
            Err(e) if refuses_functions(&e) => self.stop_functions(&e),
            // The library could not be loaded again: functions are
            // stopped, and this call runs by EVALSHA below.
            Err(_) if !self.functions.load(Ordering::Relaxed) => {}
            sent => return sent.map_err(|e| script_error(call.key, e)),
        }
        self.eval_by_sha(call).await
    }

    /// The script run by EVALSHA, or by EVAL when the server lacks it.
    async fn eval_by_sha(&self, call: ScriptCall<'_>) -> Result<(RValue, usize), StoreError> {
        let evalsha = call.command("EVALSHA", &call.script.sha);
        let sent = match self.write(&evalsha, call.wait).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let eval = call.command("EVAL", &call.script.body);
                self.write(&eval, call.wait).await
            }
            other => other,
        };
        sent.map_err(|e| script_error(call.key, e))
    }

    /// Loads the scripts' library (on a cluster, on every primary).
    /// `Ok(false)` when the server does not take it (before Redis 7.0, a
    /// user whose ACL refuses `FUNCTION LOAD`, or any other error reply: a
    /// server that cannot compile it): scripts are then run by EVALSHA
    /// from now on. A failure to reach the server is an error.
    async fn load_library(&self) -> Result<bool, RedisError> {
        let mut load = redis::cmd("FUNCTION");
        // REPLACE: loading is the same on every node whether or not it
        // has the library (a cluster answers for all primaries at once).
        load.arg("LOAD").arg("REPLACE").arg(&scripts().library);
        match self.query::<RValue>(&load).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.code(), Some("ERR" | "NOPERM")) => {
                self.stop_functions(&e);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Runs scripts by EVALSHA for good, the server having refused
    /// functions with `e`.
    fn stop_functions(&self, e: &RedisError) {
        if self.functions.swap(false, Ordering::Relaxed) {
            tracing::debug!(error = %e, "Redis refuses functions; running idem's scripts by EVALSHA");
        }
    }

    /// The verb and first argument that run `script`: `FCALL` and its
    /// function, or `EVALSHA` and its SHA-1.
    fn invocation<'s>(&self, script: &'s Script) -> (&'static str, &'s str) {
        if self.functions.load(Ordering::Relaxed) {
            ("FCALL", &script.function)
        } else {
            ("EVALSHA", &script.sha)
        }
    }

    /// Runs SETTLE: `op` on the record held with `token`, which is
    /// `State`'s name or `renew`, waiting for replicas as `wait` says (the
    /// store's `wait_for_replicas`, but for the release of a claim they
    /// did not acknowledge).
    async fn run_settle(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        op: &str,
        payload: &[u8],
        expiry: Duration,
        wait: Option<(usize, Duration)>,
    ) -> Result<(), StoreError> {
        let expiry_ms = millis(expiry);
        // A renewal rewrites the record, so it is forgotten either way.
        let written = self.forget(token);
        // The whole settled record when the claim's is known (SETTLE then
        // writes it as it is), else the payload alone. Nothing here is
        // allocated but that record: this is every call's path.
        let (record, head) = match (&written, State::parse(op)) {
            (Some(line), Some(state)) => line.settled(state, expiry_ms, payload),
            _ => (Vec::new(), 0),
        };
        let mut expiry_digits = itoa::Buffer::new();
        let expiry = expiry_digits.format(expiry_ms);
        if let Some(line) = &written
            && !record.is_empty()
            && self.set_ifeq.load(Ordering::Relaxed)
            && self
                .settle_in_place(key, line, &record, expiry, wait)
                .await?
        {
            return Ok(());
        }
        let sent = if record.is_empty() { payload } else { &record };
        let mut head_digits = itoa::Buffer::new();
        let head = head_digits.format(head);
        let id = token.id_hex_digits();
        let (reply, acked) = self
            .eval_waiting(
                &scripts().settle,
                key,
                &[
                    &id,
                    op.as_bytes(),
                    sent,
                    expiry.as_bytes(),
                    match self.format {
                        1 => b"1",
                        2 => b"2",
                        _ => b"3",
                    },
                    head.as_bytes(),
                ],
                wait,
            )
            .await?;
        match as_bytes(&reply) {
            Some(b"ok") => self.replicated(acked),
            Some(b"lost") => Err(StoreError::LeaseLost),
            _ => Err(StoreError::corrupt(
                key.as_str(),
                format!("unexpected reply from Redis to `{op}`: {reply:?}"),
            )),
        }
    }

    /// The usual settle on a server that compares and sets natively:
    /// `record` written over `line`, the running record the claim wrote, if
    /// the key holds exactly that (`SET .. IFEQ`), which is the case
    /// SETTLE's first branch writes the same record in. `Ok(false)` when
    /// the key holds anything else (a lost lease, a settle repeated after
    /// its reply was lost, a record of another writer) or the node rejects
    /// the form: SETTLE then decides, as it would have.
    async fn settle_in_place(
        &self,
        key: &IdemKey,
        line: &RunningLine,
        record: &[u8],
        expiry_ms: &str,
        wait: Option<(usize, Duration)>,
    ) -> Result<bool, StoreError> {
        let size = key.as_str().len() + record.len() + line.as_str().len() + 32;
        let mut set = redis::Cmd::with_capacity(7, size);
        set.arg("SET")
            .arg(key.as_str())
            .arg(record)
            .arg("IFEQ")
            .arg(line.as_str())
            .arg("PX")
            .arg(expiry_ms);
        match self.write(&set, wait).await {
            Ok((RValue::Okay, acked)) => self.replicated(acked).map(|()| true),
            Ok((RValue::Nil, _)) => Ok(false),
            Ok((other, _)) => Err(StoreError::corrupt(
                key.as_str(),
                format!("unexpected reply to SET IFEQ: {other:?}"),
            )),
            Err(e) if rejects_option(&e) => {
                tracing::info!(
                    error = %e,
                    "the Redis server does not take `SET .. IFEQ`: settling by script from now on"
                );
                self.set_ifeq.store(false, Ordering::Relaxed);
                Ok(false)
            }
            Err(e) => Err(script_error(key, e)),
        }
    }

    /// Remembers the running record `token`'s claim wrote, for its settle.
    /// A claim whose caller gave up before settling stays behind; when
    /// [`REMEMBERED`] are, the table starts again empty (the claims in
    /// flight then settle by parsing, as correctly).
    fn remember(&self, token: &LeaseToken, line: RunningLine) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.len() >= REMEMBERED {
            written.clear();
        }
        written.insert(token.id(), line);
    }

    /// The running record `token`'s claim wrote, if remembered, no longer
    /// remembered.
    fn forget(&self, token: &LeaseToken) -> Option<RunningLine> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.remove(&token.id())
    }
}

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
    async fn claim_new(
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
                    .acquired(key, token, line, acked, false)
                    .await
                    .map(Some),
                Ok((RValue::Nil, acked)) if with_get => self
                    .acquired(key, token, line, acked, false)
                    .await
                    .map(Some),
                Ok((RValue::Nil, _)) => Ok(None),
                Ok((RValue::BulkString(held), _)) if with_get => {
                    Ok(record::settled_entry(&held).map(Claim::Existing))
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
    fn running_line(
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
            token,
            about,
        )
    }

    /// A claim that took the key with `line`, once enough replicas have it.
    /// One that too few acknowledged is given up at once (released), so
    /// that every caller of the operation is told the same, rather than
    /// the next ones finding it in flight for a lease while nothing runs.
    async fn acquired(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        line: RunningLine,
        acked: usize,
        lapsed: bool,
    ) -> Result<Claim, StoreError> {
        self.remember(token, line);
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
        Ok(if lapsed {
            Claim::TakenOver(*token)
        } else {
            Claim::Acquired(*token)
        })
    }

    /// The CLAIM script, for a key that exists: claimed with `token` (at
    /// the attempt the record counts), or what holds it.
    async fn claim_existing(
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
            millis(CLAIM_RETENTION).to_string(),
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
            // The script wrote what a first claim at this attempt writes.
            let token = LeaseToken::from_parts(token.id(), attempt);
            let line = self.running_line(request, claim_life(request.lease), &token);
            let lapsed = parts.get(2).and_then(as_text).as_deref() == Some("lapsed");
            return self.acquired(key, &token, line, acked, lapsed).await;
        }
        parse_entry(key, &parts).map(Claim::Existing)
    }
}

/// One run of a script: which, on which key, with which arguments, and
/// how many replicas to wait for.
#[derive(Clone, Copy)]
struct ScriptCall<'a> {
    script: &'a Script,
    key: &'a IdemKey,
    args: &'a [&'a [u8]],
    wait: Option<(usize, Duration)>,
}

impl ScriptCall<'_> {
    /// The command that runs it: `verb` (FCALL, EVALSHA, EVAL) with
    /// `first` (the function's name, the script's hash or body). Sized up
    /// front: a command grown argument by argument reallocates its buffers
    /// several times, on every call's path.
    fn command(&self, verb: &str, first: &str) -> Cmd {
        let size = self.args.iter().map(|a| a.len()).sum::<usize>();
        let size = size + self.key.as_str().len() + first.len() + 16;
        let mut cmd = redis::Cmd::with_capacity(self.args.len() + 4, size);
        cmd.arg(verb).arg(first).arg(1).arg(self.key.as_str());
        for a in self.args {
            cmd.arg(*a);
        }
        cmd
    }
}

/// How long a running record lives: its lease, then the claim retention
/// (the CLAIM script reckons the same).
fn claim_life(lease: Duration) -> u64 {
    millis(lease).saturating_add(millis(CLAIM_RETENTION))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Parses `{'tag', fp, value}` replies of CLAIM and GET (`{'unknown', fp,
/// reason, attempt, age ms}` for an unknown record).
fn parse_entry(key: &IdemKey, parts: &[RValue]) -> Result<Entry, StoreError> {
    let corrupt = |why: &str| StoreError::corrupt(key.as_str(), why.to_owned());
    let field = |i: usize| parts.get(i).and_then(as_text);
    let fingerprint = field(1)
        .and_then(|f| Fingerprint::from_hex(&f))
        .ok_or_else(|| corrupt("bad fingerprint"))?;
    let value = field(2).ok_or_else(|| corrupt("missing value"))?;
    match field(0).as_deref().and_then(State::parse) {
        Some(State::Running) => Ok(Entry::Running {
            fingerprint,
            attempt: value.parse().map_err(|_| corrupt("bad attempt"))?,
        }),
        Some(State::Done) => Ok(Entry::Done {
            result: value,
            fingerprint,
        }),
        Some(State::Failed) => Ok(Entry::Failed {
            error: value,
            fingerprint,
        }),
        Some(State::Unknown) => {
            let number = |i: usize| -> Result<u64, StoreError> {
                field(i)
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| corrupt("bad number"))
            };
            Ok(Entry::Unknown {
                reason: value,
                fingerprint,
                attempt: u32::try_from(number(3)?).map_err(|_| corrupt("bad attempt"))?,
                age: Duration::from_millis(number(4)?),
            })
        }
        Some(State::Released) | None => Err(corrupt("unexpected reply")),
    }
}

impl IdemStore for RedisStore {
    fn backend(&self) -> &'static str {
        "redis"
    }

    fn claim<'a>(
        &'a self,
        key: &'a IdemKey,
        request: ClaimRequest<'a>,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            let tool = request.tool;
            if tool.contains('|') {
                return Err(StoreError::backend(format!(
                    "the tool name {tool:?} holds `|`, which a Redis record cannot"
                )));
            }
            let token = LeaseToken::generate(0);
            let life = claim_life(request.lease);
            if let Some(claim) = self.claim_new(key, &request, &token, life).await? {
                return Ok(claim);
            }
            // Boxed: the script's path is the rarer one (a running or
            // released record), and its future would enlarge every claim's.
            Box::pin(self.claim_existing(key, &request, &token)).await
        })
    }

    fn settle<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        outcome: Outcome<'a>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.run_settle(
            key,
            token,
            outcome.state().as_str(),
            outcome.payload().unwrap_or_default().as_bytes(),
            outcome.kept_for(),
            self.wait,
        ))
    }

    fn renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            // SETTLE's `renew` takes the lease as payload and the retention as
            // the expiry beyond it.
            let lease_ms = millis(lease).to_string();
            self.run_settle(
                key,
                token,
                "renew",
                lease_ms.as_bytes(),
                CLAIM_RETENTION,
                self.wait,
            )
            .await
        })
    }

    fn inspect<'a>(
        &'a self,
        key: &'a IdemKey,
    ) -> BoxFuture<'a, Result<Option<RecordInfo>, StoreError>> {
        Box::pin(async move { self.read_info(key, true).await })
    }

    fn scan<'a>(
        &'a self,
        filter: &'a ScanFilter,
        cursor: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<ScanPage, StoreError>> {
        Box::pin(async move { self.scan_page(filter, cursor, limit).await })
    }

    fn get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        Box::pin(async move {
            match self.eval(&scripts().get, key, &[]).await?.0 {
                RValue::Nil => Ok(None),
                RValue::Array(parts) => parse_entry(key, &parts).map(Some),
                _ => Err(StoreError::corrupt(key.as_str(), "unexpected reply to get")),
            }
        })
    }
}
