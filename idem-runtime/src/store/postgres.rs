//! [`PostgresStore`]: PostgreSQL (feature `postgres`).
//!
//! One table (default `idem_records`), one row per key. Every operation is
//! one statement, prepared once per pooled connection: a claim is an
//! `INSERT .. ON CONFLICT DO UPDATE .. WHERE` that takes over an expired,
//! released or lapsed row, reading back in the same statement the row it did
//! not take; complete, fail, release and renew are one compare-and-set
//! `UPDATE` each. Every time is the database's `now()`.

use std::sync::Arc;
use std::time::Duration;

use bb8::{ManageConnection, Pool, RunError};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Statement};

use super::{CLAIM_RETENTION, Claim, Entry, IdemStore, LeaseToken, fenced};
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};

/// The schema version this code writes.
pub const SCHEMA_VERSION: i32 = 1;

/// How [`PostgresStore`] connects and where it keeps its table.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// The schema of the table; `None` for the connection's `search_path`.
    pub schema: Option<String>,
    /// The table: `idem_records`. Its version lives in `<table>_schema`.
    pub table: String,
    /// Connections in the pool: 16.
    pub pool_size: u32,
    /// Bound on getting a connection (connecting included): 1 s.
    pub connect_timeout: Duration,
    /// Create the table when missing (the default); when off, run
    /// [`PostgresStore::schema_sql`] as a migration yourself.
    pub create_schema: bool,
    /// How often a background task deletes expired rows (1 min); `None`
    /// to leave it to [`PostgresStore::purge_expired`] on a schedule of
    /// your own. The task stops when the store is dropped.
    pub purge_interval: Option<Duration>,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: None,
            table: "idem_records".to_owned(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(1),
            create_schema: true,
            purge_interval: Some(Duration::from_secs(60)),
        }
    }
}

impl PostgresOptions {
    /// The defaults.
    pub fn new() -> PostgresOptions {
        PostgresOptions::default()
    }

    /// Sets [`schema`](Self::schema).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Sets [`table`](Self::table).
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// Sets [`pool_size`](Self::pool_size).
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size;
        self
    }

    /// Sets [`connect_timeout`](Self::connect_timeout).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`create_schema`](Self::create_schema).
    pub fn create_schema(mut self, create: bool) -> Self {
        self.create_schema = create;
        self
    }

    /// Sets [`purge_interval`](Self::purge_interval).
    pub fn purge_interval(mut self, interval: Option<Duration>) -> Self {
        self.purge_interval = interval;
        self
    }

    /// The qualified table name, after checking both identifiers.
    fn qualified(&self) -> Result<String, StoreError> {
        let check = |what: &str, id: &str| {
            let ok = !id.is_empty()
                && id.len() <= 55
                && id.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                && id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if ok {
                Ok(())
            } else {
                Err(StoreError::backend(format!(
                    "invalid {what} name {id:?}: use lowercase letters, digits and `_`, at most 55"
                )))
            }
        };
        check("table", &self.table)?;
        match &self.schema {
            Some(schema) => {
                check("schema", schema)?;
                Ok(format!("{schema}.{}", self.table))
            }
            None => Ok(self.table.clone()),
        }
    }
}

/// The statements, for one table.
struct Sql {
    claim: String,
    read: String,
    settle: String,
    renew: String,
    purge: String,
}

impl Sql {
    fn new(t: &str) -> Sql {
        Sql {
            // Takes the row over when it may, else reads it back. In a race
            // with a concurrent first insert the read (from the statement's
            // snapshot) can miss the row the insert conflicted with: then
            // nothing comes back and the claim asks again.
            // A recorded outcome is read without a lock (replays do not
            // queue on the row); otherwise the row is taken over when it
            // may be, else read back.
            // A recorded outcome is read without a lock (replays do not
            // queue on the row); otherwise the row is taken over when it
            // may be (expired, released, its lease lapsed, or running with
            // this very token: our own claim sent again), else read back.
            // The read-back comes from the statement's snapshot, which in a
            // race with a concurrent claim can be older than the row the
            // insert conflicted with: missing, released or lapsed. Then the
            // claim asks again (see `PostgresStore::claim`).
            claim: format!(
                "WITH done AS (
                     SELECT state, fingerprint, attempt, payload, NULL::boolean AS lease_live FROM {t}
                     WHERE key = $1 AND state IN ('done', 'failed') AND expires_at > now()
                 ), taken AS (
                     INSERT INTO {t} AS r (key, state, fingerprint, attempt, token, lease_until, payload, expires_at)
                     SELECT $1, 'running', $2, 0, $3,
                            now() + $4::float8 * interval '1 millisecond', NULL,
                            now() + ($4::float8 + $5::float8) * interval '1 millisecond'
                     WHERE NOT EXISTS (SELECT 1 FROM done)
                     ON CONFLICT (key) DO UPDATE SET
                         state = 'running', fingerprint = EXCLUDED.fingerprint, token = EXCLUDED.token,
                         lease_until = EXCLUDED.lease_until, payload = NULL, expires_at = EXCLUDED.expires_at,
                         attempt = CASE WHEN r.state = 'running' AND r.token = EXCLUDED.token THEN r.attempt
                                        WHEN r.expires_at <= now() THEN 0
                                        ELSE r.attempt + 1 END
                     WHERE r.expires_at <= now() OR r.state = 'released'
                        OR (r.state = 'running' AND (r.lease_until <= now() OR r.token = EXCLUDED.token))
                     RETURNING r.attempt
                 )
                 SELECT 'acquired'::text, NULL::bytea, attempt, NULL::text, NULL::boolean FROM taken
                 UNION ALL
                 SELECT state, fingerprint, attempt, payload, lease_live FROM done
                 UNION ALL
                 SELECT state, fingerprint, attempt, payload, lease_until > now() FROM {t}
                 WHERE key = $1 AND expires_at > now()
                   AND NOT EXISTS (SELECT 1 FROM taken) AND NOT EXISTS (SELECT 1 FROM done)"
            ),
            read: format!(
                "SELECT state, fingerprint, attempt, payload, lease_until > now() FROM {t}
                 WHERE key = $1 AND expires_at > now()"
            ),
            // A settled row keeps the token that settled it, so the very
            // same settle repeated (its first reply lost: same token, state
            // and payload) matches and changes nothing.
            settle: format!(
                "UPDATE {t} SET
                     payload = CASE WHEN state = 'running' THEN $4 ELSE payload END,
                     expires_at = CASE WHEN state = 'running'
                         THEN now() + $5::float8 * interval '1 millisecond' ELSE expires_at END,
                     lease_until = NULL, state = $3
                 WHERE key = $1 AND token = $2 AND expires_at > now()
                   AND (state = 'running' OR (state = $3 AND payload IS NOT DISTINCT FROM $4))"
            ),
            renew: format!(
                "UPDATE {t} SET lease_until = now() + $3::float8 * interval '1 millisecond',
                     expires_at = now() + ($3::float8 + $4::float8) * interval '1 millisecond'
                 WHERE key = $1 AND state = 'running' AND token = $2 AND expires_at > now()"
            ),
            purge: format!("DELETE FROM {t} WHERE expires_at <= now()"),
        }
    }
}

/// A pooled connection with every statement prepared.
struct PgConn {
    client: Client,
    /// An operation found the connection broken: the pool drops it.
    broken: std::sync::atomic::AtomicBool,
    claim: Statement,
    read: Statement,
    settle: Statement,
    renew: Statement,
}

/// Connects, and prepares the statements on each new connection.
struct PgManager {
    config: Config,
    sql: Arc<Sql>,
}

impl ManageConnection for PgManager {
    type Connection = PgConn;
    type Error = StoreError;

    async fn connect(&self) -> Result<PgConn, StoreError> {
        let client = connect(&self.config).await.map_err(sql_error)?;
        let prepare = async |sql: &str| client.prepare(sql).await.map_err(sql_error);
        Ok(PgConn {
            claim: prepare(&self.sql.claim).await?,
            read: prepare(&self.sql.read).await?,
            settle: prepare(&self.sql.settle).await?,
            renew: prepare(&self.sql.renew).await?,
            client,
            broken: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Run at every checkout: a connection whose server end is gone (a
    /// terminated backend, a restarted server, an idle timeout) is never
    /// handed to an operation. No round trip: the connection task has
    /// already seen the socket close.
    async fn is_valid(&self, conn: &mut PgConn) -> Result<(), StoreError> {
        if conn.client.is_closed() {
            Err(StoreError::unavailable(
                "the pooled PostgreSQL connection was closed",
            ))
        } else {
            Ok(())
        }
    }

    fn has_broken(&self, conn: &mut PgConn) -> bool {
        conn.client.is_closed() || *conn.broken.get_mut()
    }
}

async fn connect(config: &Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "PostgreSQL connection closed");
        }
    });
    Ok(client)
}

/// A store in PostgreSQL: a pool of connections with prepared statements,
/// one statement per operation, expiry by the database's clock.
pub struct PostgresStore {
    pool: Pool<PgManager>,
    sql: Arc<Sql>,
    table: String,
    /// Stops the purge task when the store goes.
    _purger: Option<PurgeTask>,
}

struct PurgeTask(tokio::task::JoinHandle<()>);

impl Drop for PurgeTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// Runs `$op` (which uses the pooled connection `$conn`) and, if the
/// connection broke under it, once more on a new connection, made for the
/// purpose and then given to the pool: the other pooled connections may
/// have died with it (a restart, a failover), unnoticed yet. Safe for every
/// statement of this store: a claim that took effect recognises its own
/// token, a settle repeated by its token succeeds, and the rest only read.
/// (A macro: an async closure's future would not be known to be `Send`.)
macro_rules! with_conn {
    ($store:expr, |$conn:ident| $op:expr) => {{
        let $conn = $store.pool.get().await.map_err(pg_error)?;
        match $op.await {
            Err(e) if connection_lost(&e) => {
                tracing::debug!(error = %e, "PostgreSQL connection lost; sending once more on a new one");
                $conn.broken.store(true, std::sync::atomic::Ordering::Relaxed);
                drop($conn);
                let fresh = $store.pool.dedicated_connection().await?;
                let out = {
                    let $conn = &fresh;
                    $op.await.map_err(sql_error)
                };
                // The pool may be full again: then the connection just closes.
                let _ = $store.pool.add(fresh);
                out
            }
            other => other.map_err(sql_error),
        }
    }};
}

impl PostgresStore {
    /// Connects to `postgres://user:password@host:port/database` and
    /// creates the table if missing.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// [`connect`](Self::connect) with explicit options.
    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        let table = options.qualified()?;
        let mut config: Config = url
            .parse()
            .map_err(|e| StoreError::backend(format!("invalid PostgreSQL URL: {e}")))?;
        config.connect_timeout(options.connect_timeout);
        // The table must exist before pooled connections prepare their
        // statements: set it up on a connection of its own.
        let mut setup = connect(&config).await.map_err(sql_error)?;
        if options.create_schema {
            migrate(&mut setup, &table, &options).await?;
        }
        check_version(&setup, &table).await?;
        drop(setup);
        let sql = Arc::new(Sql::new(&table));
        let manager = PgManager {
            config,
            sql: sql.clone(),
        };
        let pool = Pool::builder()
            .max_size(options.pool_size.max(1))
            .connection_timeout(options.connect_timeout)
            .test_on_check_out(true)
            .build(manager)
            .await?;
        let purger = options.purge_interval.map(|every| {
            let (pool, sql) = (pool.clone(), sql.clone());
            PurgeTask(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let purged = match pool.get().await {
                        Ok(conn) => conn
                            .client
                            .execute(&sql.purge, &[])
                            .await
                            .map_err(sql_error),
                        Err(e) => Err(pg_error(e)),
                    };
                    match purged {
                        Ok(n) if n > 0 => tracing::debug!(rows = n, "purged expired records"),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "purging expired records failed"),
                    }
                }
            }))
        });
        Ok(PostgresStore {
            pool,
            sql,
            table,
            _purger: purger,
        })
    }

    /// The SQL that creates the table of `options`, for running as a
    /// migration of your own (with `create_schema(false)`).
    pub fn schema_sql(options: &PostgresOptions) -> Result<String, StoreError> {
        let t = options.qualified()?;
        let index = format!("{}_expires_at", options.table);
        Ok(format!(
            "CREATE TABLE IF NOT EXISTS {t} (
    key         text PRIMARY KEY,
    state       text NOT NULL,        -- running | released | done | failed
    fingerprint bytea NOT NULL,       -- 32 bytes
    attempt     integer NOT NULL,
    token       bytea,                -- 16 bytes: the holder's (running) or the settler's
    lease_until timestamptz,          -- running only
    payload     text,                 -- result (done) or error (failed)
    expires_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS {index} ON {t} (expires_at);
CREATE TABLE IF NOT EXISTS {t}_schema (version integer NOT NULL);
INSERT INTO {t}_schema (version) SELECT {SCHEMA_VERSION} WHERE NOT EXISTS (SELECT 1 FROM {t}_schema);
"
        ))
    }

    /// Deletes every expired record now; returns how many. Run it from a
    /// periodic job: expired rows are ignored, but they take space until
    /// purged or reclaimed by a new claim of the same key.
    pub async fn purge_expired(&self) -> Result<u64, StoreError> {
        let conn = self.pool.get().await.map_err(pg_error)?;
        conn.client
            .execute(&self.sql.purge, &[])
            .await
            .map_err(sql_error)
    }

    /// Runs raw SQL on a pooled connection (to plant a malformed record in a
    /// test, say). `{table}` in `sql` is replaced by the store's table.
    #[cfg(feature = "test-util")]
    pub async fn execute_raw(&self, sql: &str) -> Result<u64, StoreError> {
        let conn = self.pool.get().await.map_err(pg_error)?;
        conn.client
            .execute(&sql.replace("{table}", &self.table), &[])
            .await
            .map_err(sql_error)
    }

    /// complete / fail / release: one compare-and-set `UPDATE`.
    async fn settle(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        state: &str,
        payload: Option<&str>,
        keep: Duration,
    ) -> Result<(), StoreError> {
        let token = token.id().to_be_bytes().to_vec();
        let params: [&(dyn ToSql + Sync); 5] =
            [&key.as_str(), &token, &state, &payload, &millis(keep)];
        let changed = with_conn!(self, |conn| conn.client.execute(&conn.settle, &params))?;
        fenced(changed)
    }
}

/// Creates the table if missing, serialising concurrent first starts
/// (`CREATE .. IF NOT EXISTS` races) with an advisory lock.
async fn migrate(
    client: &mut Client,
    table: &str,
    options: &PostgresOptions,
) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(sql_error)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1))",
        &[&format!("idem:{table}")],
    )
    .await
    .map_err(sql_error)?;
    tx.batch_execute(&PostgresStore::schema_sql(options)?)
        .await
        .map_err(sql_error)?;
    tx.commit().await.map_err(sql_error)
}

async fn check_version(client: &Client, table: &str) -> Result<(), StoreError> {
    let row = client
        .query_opt(&format!("SELECT max(version) FROM {table}_schema"), &[])
        .await
        .map_err(|e| {
            StoreError::backend(format!(
                "cannot read the idem schema version of {table} (run PostgresStore::schema_sql as a migration?): {e}"
            ))
        })?;
    let version: Option<i32> = row.and_then(|r| r.get(0));
    match version {
        Some(SCHEMA_VERSION) => Ok(()),
        Some(newer) if newer > SCHEMA_VERSION => Err(StoreError::backend(format!(
            "the table {table} has idem schema version {newer}, newer than this idem understands ({SCHEMA_VERSION}); upgrade idem"
        ))),
        other => Err(StoreError::backend(format!(
            "the table {table} has an unknown idem schema version ({other:?})"
        ))),
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Lost connections, and the server shutting a session down (SQLSTATE
/// class 08, 57P01-57P03: a terminated backend, a restart, a failover)
/// are `Unavailable`; other database errors the backend's own.
fn sql_error(e: tokio_postgres::Error) -> StoreError {
    if connection_lost(&e) {
        StoreError::unavailable(e)
    } else {
        StoreError::backend(e)
    }
}

/// Whether `e` means the connection broke under the statement, so that it
/// is worth sending once more over another connection.
fn connection_lost(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        None => true,
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
    }
}

fn pg_error(e: RunError<StoreError>) -> StoreError {
    match e {
        RunError::User(e) => e,
        RunError::TimedOut => {
            StoreError::unavailable("timed out waiting for a PostgreSQL connection")
        }
    }
}

/// What a row read back means.
enum Read {
    /// A record a caller can be shown.
    Entry(Entry),
    /// Running, but its lease has lapsed: claimable.
    Lapsed(Entry),
    /// Released after a transient failure: claimable.
    Released,
}

/// Reads a row of (state, fingerprint, attempt, payload, lease live).
fn read_row(key: &IdemKey, row: &tokio_postgres::Row) -> Result<Read, StoreError> {
    let corrupt = |why: String| StoreError::corrupt(key.as_str(), why);
    let state: String = row.try_get(0).map_err(|e| corrupt(e.to_string()))?;
    let fp: Vec<u8> = row.try_get(1).map_err(|e| corrupt(e.to_string()))?;
    let attempt: i32 = row.try_get(2).map_err(|e| corrupt(e.to_string()))?;
    let payload: Option<String> = row.try_get(3).map_err(|e| corrupt(e.to_string()))?;
    let lease_live: Option<bool> = row.try_get(4).map_err(|e| corrupt(e.to_string()))?;
    let fingerprint = <[u8; 32]>::try_from(fp.as_slice())
        .map(Fingerprint::from_bytes)
        .map_err(|_| corrupt("the fingerprint is not 32 bytes".into()))?;
    let attempt = u32::try_from(attempt).map_err(|_| corrupt("bad attempt".into()))?;
    match (state.as_str(), payload) {
        ("running", _) => {
            let running = Entry::Running {
                fingerprint,
                attempt,
            };
            match lease_live {
                Some(true) => Ok(Read::Entry(running)),
                Some(false) => Ok(Read::Lapsed(running)),
                None => Err(corrupt("a running record without a lease".into())),
            }
        }
        ("released", _) => Ok(Read::Released),
        ("done", Some(result)) => Ok(Read::Entry(Entry::Done {
            result,
            fingerprint,
        })),
        ("failed", Some(error)) => Ok(Read::Entry(Entry::Failed { error, fingerprint })),
        (state, _) => Err(corrupt(format!("unreadable {state:?} record"))),
    }
}

/// How often a claim asks again when its read-back was overtaken by a
/// concurrent claim (see `Sql::claim`); each retry sees a newer snapshot.
const CLAIM_TRIES: usize = 5;

impl IdemStore for PostgresStore {
    async fn claim(
        &self,
        key: &IdemKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let token = LeaseToken::generate(0);
        let token_bytes = token.id().to_be_bytes().to_vec();
        let fp = fingerprint.as_bytes().to_vec();
        let (lease_ms, retention_ms) = (millis(lease), millis(CLAIM_RETENTION));
        let params: [&(dyn ToSql + Sync); 5] =
            [&key.as_str(), &fp, &token_bytes, &lease_ms, &retention_ms];
        let corrupt = |why: String| StoreError::corrupt(key.as_str(), why);
        for _ in 0..CLAIM_TRIES {
            let row = with_conn!(self, |conn| conn.client.query_opt(&conn.claim, &params))?;
            // No row, or a claimable one: overtaken by a concurrent claim.
            let Some(row) = row else { continue };
            let state: String = row.try_get(0).map_err(|e| corrupt(e.to_string()))?;
            if state == "acquired" {
                let attempt: i32 = row.try_get(2).map_err(|e| corrupt(e.to_string()))?;
                let attempt = u32::try_from(attempt).map_err(|_| corrupt("bad attempt".into()))?;
                return Ok(Claim::Acquired(LeaseToken::from_parts(token.id(), attempt)));
            }
            match read_row(key, &row)? {
                Read::Entry(entry) => return Ok(Claim::Existing(entry)),
                Read::Lapsed(_) | Read::Released => continue,
            }
        }
        Err(StoreError::unavailable(format!(
            "the record changed under {CLAIM_TRIES} claims in a row"
        )))
    }

    async fn complete(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        result: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.settle(key, token, "done", Some(result), ttl).await
    }

    async fn release(&self, key: &IdemKey, token: &LeaseToken) -> Result<(), StoreError> {
        self.settle(key, token, "released", None, CLAIM_RETENTION)
            .await
    }

    async fn fail(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        error: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.settle(key, token, "failed", Some(error), ttl).await
    }

    async fn renew(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        let token = token.id().to_be_bytes().to_vec();
        let (lease_ms, retention_ms) = (millis(lease), millis(CLAIM_RETENTION));
        let params: [&(dyn ToSql + Sync); 4] = [&key.as_str(), &token, &lease_ms, &retention_ms];
        let changed = with_conn!(self, |conn| conn.client.execute(&conn.renew, &params))?;
        fenced(changed)
    }

    async fn purge_expired(&self) -> Result<u64, StoreError> {
        PostgresStore::purge_expired(self).await
    }

    async fn get(&self, key: &IdemKey) -> Result<Option<Entry>, StoreError> {
        let row = with_conn!(self, |conn| conn
            .client
            .query_opt(&conn.read, &[&key.as_str()]))?;
        match row.map(|row| read_row(key, &row)).transpose()? {
            None | Some(Read::Released) => Ok(None),
            Some(Read::Entry(entry) | Read::Lapsed(entry)) => Ok(Some(entry)),
        }
    }
}
