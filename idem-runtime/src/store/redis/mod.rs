//! [`RedisStore`]: Redis and Redis Cluster (feature `redis`).
//!
//! Each record is one string under its key, eleven fields joined by `|`
//! (format 4; records of formats 1 to 3 are read too, docs/spec.md):
//!
//! ```text
//! 4|<state>|<fingerprint>|<attempt>|<tool>|<life>|<retention>|<n>|<about>|<token>|<payload>
//! ```
//!
//! | field | meaning |
//! |---|---|
//! | `4` | the format version |
//! | state | `running`, `released`, `done`, `failed` or `unknown` |
//! | fingerprint | the arguments' fingerprint, 64 hex digits |
//! | attempt | the holder's attempt number |
//! | tool | the tool whose call it is (empty in a record first written in format 1) |
//! | life | ms from when the record entered its state (its claim, for a running one) to its expiry: its age is `life − PTTL` |
//! | retention | ms a running record outlives its lease: its claim's (`ClaimRequest::retention`), kept by a renewal and a settle; [`CLAIM_RETENTION`](crate::store::CLAIM_RETENTION) for a record of an earlier format |
//! | n, about | what the record says of its operation (`ClaimRequest::about`), `n` bytes of any text (`0` and nothing when it says nothing) |
//! | token | the lease token of the holder (running), or of the worker that settled it (released, done, failed, unknown; empty in records written before idem 0.2) |
//! | payload | the result, error or reason, verbatim (done / failed / unknown only; last, so it may hold `|`) |
//!
//! Time is the key's own expiry, kept by the server: a running record
//! expires its retention after its lease ends, so its lease is live while
//! its `PTTL` exceeds the retention it holds. Every operation is over that one
//! key (cluster-safe):
//!
//! - a claim is `SET .. NX GET PX` of the running record (Redis 7.0 and
//!   later; `SET .. NX PX` on older servers), which takes a free key or
//!   answers what holds it in the same round trip: a recorded outcome is
//!   replayed from that answer, and only a running, released or
//!   unrecognised record goes on to the CLAIM script;
//! - a settle (done, failed, released or unknown, or a renewal) is the SETTLE script: when
//!   the key still holds the running record of the settling token, it
//!   writes the settled record the client built from the one its claim
//!   wrote; anything else it parses. On a server that compares and sets
//!   natively (`SET .. IFEQ`: Valkey 8.1 and later, Redis 8.4 and later,
//!   told by its `HELLO`) that usual case is one `SET .. IFEQ` of the
//!   settled record over the running one instead, and the script runs only
//!   when the key holds anything else;
//! - the other operations are one Lua script each (a `GET`, and a `PTTL`
//!   when a running record is found).
//!
//! The folder has the files every backend has: `connection.rs` (the
//! connections), `error.rs`, `options.rs`, `scripts.rs` (the scripts),
//! `record.rs` (the record format); and `dispatch.rs` (how a script is
//! run), `claim.rs` (a claim's two steps), `scan.rs` (inspect and scan)
//! and `server.rs` (what the server supports).

mod claim;
mod connection;
mod dispatch;
mod error;
mod news;
mod options;
mod record;
mod scan;
mod scripts;
mod server;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::{AsyncConnectionConfig, Cmd, RedisError, Value as RValue};

use self::connection::{Connections, Dialer, tcp_settings};
use self::error::{as_bytes, as_text, rejects_option, script_error, store_error};
pub use self::options::RedisOptions;
use self::options::url_error;
use self::record::{RunningLine, State};
use self::scripts::scripts;
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};
use crate::store::contract::boxed;
use crate::store::hashing::PassThroughMap;
use crate::store::news::News;
use crate::store::{
    BoxFuture, Claim, ClaimRequest, Entry, IdemStore, LeaseToken, Outcome, RecordInfo, ScanFilter,
    ScanPage,
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
    /// The announcements heard ([`IdemStore::watch`]).
    news: News,
    /// What makes the connection that listens for them: the server's
    /// client, or a client of each node a cluster was reached through,
    /// tried in turn.
    listeners: Arc<[redis::Client]>,
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
        let listeners = Arc::from([client.clone()]);
        // No response timeout on the connection: each command is given its
        // own when it needs one (`Connections::send_on`).
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(options.connection_timeout))
            .set_response_timeout(None);
        let dialer = Dialer::Single {
            client,
            config,
            response_timeout: options.response_timeout,
        };
        let store = RedisStore {
            conns: Connections::new(dialer, options.reconnect_retries),
            wait: options.wait_for_replicas,
            format,
            set_get: AtomicBool::new(options.claim_reads_back),
            functions: AtomicBool::new(true),
            set_ifeq: AtomicBool::new(false),
            written: Mutex::default(),
            news: News::new(),
            listeners,
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
        let listeners = urls
            .iter()
            .map(|url| options.client(url))
            .collect::<Result<_, _>>()?;
        #[cfg(feature = "redis-tls")]
        crate::crypto::install_crypto_provider();
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
            news: News::new(),
            listeners,
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
        match wait {
            None => Ok((self.query(cmd).await?, usize::MAX)),
            // Boxed: waiting for replicas is a deployment's choice, and its
            // future would enlarge every write's (a claim's would no longer
            // fit the allocator's per-thread cache).
            Some((replicas, timeout)) => Box::pin(self.write_waiting(cmd, replicas, timeout)).await,
        }
    }

    /// [`write`](Self::write), then `WAIT` for `replicas` within `timeout`.
    async fn write_waiting(
        &self,
        cmd: &Cmd,
        replicas: usize,
        timeout: Duration,
    ) -> Result<(RValue, usize), RedisError> {
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

    /// Runs SETTLE: `op` on the record held with `token`, which is
    /// `State`'s name or `renew`, waiting for replicas as `wait` says (the
    /// store's `wait_for_replicas`, but for the release of a claim they
    /// did not acknowledge).
    ///
    /// An `async` block, not an `async fn` (which would hold its arguments
    /// twice), and what the script's arguments are read from is dropped
    /// before it is sent: this future is allocated on every settle, and so
    /// stays within the allocator's per-thread cache (1,032 bytes).
    #[expect(
        clippy::manual_async_fn,
        reason = "an async fn holds its arguments twice"
    )]
    fn run_settle<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        op: &'a str,
        payload: &'a [u8],
        expiry: Duration,
        wait: Option<(usize, Duration)>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'a {
        async move {
            let settle = {
                let expiry_ms = millis(expiry);
                // A renewal rewrites the record, so it is forgotten either way.
                let written = self.forget(token);
                // The whole settled record when the claim's is known (SETTLE
                // then writes it as it is), else the payload alone. Nothing
                // here is allocated but that record: this is every call's
                // path. An approval's payload is the about it writes, which
                // the record its claim wrote has elsewhere: the script
                // writes that one.
                let (record, head) = match (&written, State::parse(op)) {
                    (Some(line), Some(state)) if state != State::Approved => {
                        line.settled(state, expiry_ms, payload)
                    }
                    _ => (Vec::new(), 0),
                };
                if let Some(line) = &written
                    && !record.is_empty()
                    && self.set_ifeq.load(Ordering::Relaxed)
                    && self
                        .settle_in_place(key, line, &record, expiry_ms, wait)
                        .await?
                {
                    return Ok(());
                }
                let sent = if record.is_empty() { payload } else { &record };
                let mut expiry_digits = itoa::Buffer::new();
                let mut head_digits = itoa::Buffer::new();
                let id = token.id_hex_digits();
                self.eval_waiting(
                    &scripts().settle,
                    key,
                    &[
                        &id,
                        op.as_bytes(),
                        sent,
                        expiry_digits.format(expiry_ms).as_bytes(),
                        match self.format {
                            1 => b"1",
                            2 => b"2",
                            3 => b"3",
                            _ => b"4",
                        },
                        head_digits.format(head).as_bytes(),
                    ],
                    wait,
                )
            };
            let (reply, acked) = settle.await?;
            match as_bytes(&reply) {
                Some(b"ok") => self.replicated(acked),
                Some(b"lost") => Err(StoreError::LeaseLost),
                _ => Err(StoreError::corrupt(
                    key.as_str(),
                    format!("unexpected reply from Redis to `{op}`: {reply:?}"),
                )),
            }
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
        expiry_ms: u64,
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

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Parses `{'tag', fp, value}` replies of CLAIM and GET (`{'unknown', fp,
/// reason, attempt, age ms}` for an unknown record, `{'awaiting', fp,
/// request, age ms}` for an awaiting one).
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
        Some(State::Awaiting) => Ok(Entry::Awaiting {
            request: value,
            fingerprint,
            age: Duration::from_millis(
                field(3)
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| corrupt("bad age"))?,
            ),
        }),
        Some(State::Approved) => Ok(Entry::Approved { fingerprint }),
        Some(State::Released) | None => Err(corrupt("unexpected reply")),
    }
}

impl IdemStore for RedisStore {
    fn backend(&self) -> &'static str {
        "redis"
    }

    /// `PUBLISH`, heard by the stores of every process that watch.
    fn announce<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let _heard_by: i64 = self.query(&news::publish(key)).await.map_err(store_error)?;
            Ok(())
        })
    }

    /// Heard on a pub/sub connection made at the first watch: to the
    /// server, or to one of the nodes a cluster was reached through (the
    /// next one each time a connection ends: a cluster's `PUBLISH`
    /// reaches every node).
    fn watch<'a>(&'a self, key: &'a IdemKey, within: Duration) -> BoxFuture<'a, ()> {
        self.news.listen("redis", || {
            let (clients, turn) = (self.listeners.clone(), AtomicUsize::new(0));
            move |teller| {
                let next = turn.fetch_add(1, Ordering::Relaxed) % clients.len();
                news::listen(clients[next].clone(), teller)
            }
        });
        Box::pin(self.news.watch(key, within))
    }

    fn claim<'a>(
        &'a self,
        key: &'a IdemKey,
        request: ClaimRequest<'a>,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        boxed!(async move {
            let tool = request.tool;
            if tool.contains('|') {
                return Err(StoreError::backend(format!(
                    "the tool name {tool:?} holds `|`, which a Redis record cannot"
                )));
            }
            let token = LeaseToken::generate(0);
            let life = self.claim_life(&request);
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
        boxed!(
            self.run_settle(
                key,
                token,
                outcome.state().as_str(),
                // SETTLE takes an approval's about where the others' payload goes.
                outcome
                    .about()
                    .or(outcome.payload())
                    .unwrap_or_default()
                    .as_bytes(),
                outcome.kept_for(),
                self.wait,
            ),
        )
    }

    fn renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            // SETTLE's `renew` takes the lease as payload and keeps the
            // record's retention beyond it: its expiry argument is unused.
            let lease_ms = millis(lease).to_string();
            self.run_settle(
                key,
                token,
                "renew",
                lease_ms.as_bytes(),
                Duration::ZERO,
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
