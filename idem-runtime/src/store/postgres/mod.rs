//! [`PostgresStore`]: PostgreSQL (feature `postgres`).
//!
//! One table (default `idem_records`), one row per key. Every operation is
//! one statement, prepared once per pooled connection: a claim is an
//! `INSERT .. ON CONFLICT DO UPDATE .. WHERE` that takes over an expired,
//! released or lapsed row, reading back in the same statement the row it did
//! not take; a settle (done, failed, released, unknown) and a renewal are
//! one compare-and-set `UPDATE` each. Every time is the database's `now()`.

mod connection;
mod error;
mod options;
mod sql;
#[cfg(feature = "postgres-tls")]
mod tls;
mod url;

use std::sync::Arc;
use std::time::Duration;

use bb8::Pool;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config};

use self::connection::{InFlight, NEWS_CHANNEL, PgManager, Silence, Tls, connect, listen};
use self::error::{PgError, connection_lost, pg_error, sql_error};
pub use self::options::PostgresOptions;
use self::sql::Sql;
use crate::error::StoreError;
use crate::key::IdemKey;
use crate::store::contract::fenced;
use crate::store::keepalive;
use crate::store::news::News;
use crate::store::record::{self, InfoRow, Live, Row, State, keyset_page};
use crate::store::{
    BoxFuture, Claim, ClaimRequest, Entry, IdemStore, LeaseToken, Outcome, RecordInfo, ScanFilter,
    ScanPage,
};

/// A store in PostgreSQL: a pool of connections with prepared statements,
/// one statement per operation, expiry by the database's clock.
pub struct PostgresStore {
    pool: Pool<PgManager>,
    /// Which of the pool's connections are retired.
    silence: Arc<Silence>,
    sql: Arc<Sql>,
    table: String,
    /// Stops the purge task when the store goes.
    _purger: Option<PurgeTask>,
    /// How the connection that listens for announcements is made, and
    /// how long its opening may take.
    dial: (Config, Tls, Duration),
    /// The announcements heard ([`IdemStore::watch`]).
    news: News,
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

/// Runs `$op` (which uses the pooled connection `$conn`; if it is dropped
/// before its answer, the pool's silent connections are retired:
/// [`Silence`])
/// and, if the connection broke under it, once more on a new connection, made for the
/// purpose and then given to the pool: the other pooled connections may
/// have died with it (a restart, a failover), unnoticed yet. Safe for every
/// statement of this store: a claim that took effect recognises its own
/// token, a settle repeated by its token succeeds, and the rest only read.
/// (A macro: an async closure's future would not be known to be `Send`.)
macro_rules! with_conn {
    ($store:expr, |$conn:ident| $op:expr) => {{
        let $conn = $store.pool.get().await.map_err(pg_error)?;
        let flight = InFlight::new(&$store.silence, &$conn);
        let answer = $op.await;
        flight.answered();
        match answer {
            Err(e) if connection_lost(&e) => {
                tracing::debug!(error = %e, "PostgreSQL connection lost; sending once more on a new one");
                $conn.broken.store(true, std::sync::atomic::Ordering::Relaxed);
                drop($conn);
                let fresh = $store.pool.dedicated_connection().await?;
                let out = {
                    let $conn = &fresh;
                    let flight = InFlight::new(&$store.silence, $conn);
                    let answer = $op.await;
                    flight.answered();
                    answer.map_err(sql_error)
                };
                // The pool may be full again: then the connection just closes.
                let _ = $store.pool.add(fresh);
                out
            }
            other => other.map_err(sql_error),
        }
    }};
}

/// How long opening a connection may take, at least (ten connect timeouts
/// if longer): [`opening_bound`].
const SETUP_READ: Duration = Duration::from_secs(10);
/// How long connecting waits for the table to be created or migrated.
const SETUP_MIGRATION: Duration = Duration::from_secs(600);

/// How long opening a connection may take, its handshake and first
/// statements included: `connect_timeout` bounds only the TCP connect,
/// and a path that accepts a connection and then says nothing (frozen
/// mid-handshake) would hold the caller, or a pool's slot, forever.
fn opening_bound(options: &PostgresOptions) -> Duration {
    (options.connect_timeout * 10).max(SETUP_READ)
}

/// The error of a server that did not answer the store's setup (`what`)
/// within `bound`.
fn silent(what: &str, bound: Duration) -> StoreError {
    StoreError::unavailable(format!(
        "PostgreSQL did not answer within {bound:?} when the store tried to {what}"
    ))
}

impl PostgresStore {
    /// The schema version this code writes.
    pub const SCHEMA_VERSION: i32 = 3;

    /// Connects to `postgres://user:password@host:port/database` (or a
    /// `host=… user=…` string), with TLS as its `sslmode` says (feature
    /// `postgres-tls`; the guide's stores chapter, "PostgreSQL over TLS"), and
    /// creates the table if it is missing (see
    /// [`PostgresOptions::create_schema`]): once the table exists, the
    /// role needs no `CREATE` privilege, only `SELECT, INSERT, UPDATE,
    /// DELETE` on the table and `SELECT` on `<table>_schema`.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// [`connect`](Self::connect) with explicit options.
    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        let table = options.qualified()?;
        let (config, tls) = connection(url, &options)?;
        set_up(&config, &tls, &table, &options).await?;
        let sql = Arc::new(Sql::new(&table));
        let silence = Arc::new(Silence::new());
        let dial = (config.clone(), tls.clone(), opening_bound(&options));
        let manager = PgManager {
            config,
            tls,
            opening: dial.2,
            sql: sql.clone(),
            silence: silence.clone(),
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
            silence,
            sql,
            table,
            _purger: purger,
            dial,
            news: News::new(),
        })
    }

    /// Creates the table of `options` if it is missing, or brings it from
    /// an older schema version to this code's, and checks its schema
    /// version: the deploy step, run by a role that may `CREATE`,
    /// so that the application's role needs no more than reading and
    /// writing rows (the guide's security chapter, "Least privilege").
    pub async fn migrate(url: &str, options: &PostgresOptions) -> Result<(), StoreError> {
        let table = options.qualified()?;
        let (config, tls) = connection(url, options)?;
        let mut client = connect(&config, &tls).await.map_err(sql_error)?;
        migrate(&mut client, &table, options).await?;
        check_version(&client, &table).await
    }

    /// The SQL that creates the table of `options`, or brings one of an
    /// older schema version to this code's, for running as a migration of
    /// your own (with `create_schema(false)`).
    pub fn schema_sql(options: &PostgresOptions) -> Result<String, StoreError> {
        let t = options.qualified()?;
        let index = format!("{}_expires_at", options.table);
        Ok(sql::schema(&t, &index, Self::SCHEMA_VERSION))
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
}

/// Makes sure the table of `options` is there, at this code's schema
/// version, before pooled connections prepare their statements: on a
/// connection of its own, created or migrated if `options` say so.
async fn set_up(
    config: &Config,
    tls: &Tls,
    table: &str,
    options: &PostgresOptions,
) -> Result<(), StoreError> {
    // A server that accepts the connection and then goes silent (a frozen
    // network path) must not hold the caller forever: the setup's reading
    // is bounded, and a migration too, more generously.
    let read_bound = opening_bound(options);
    let reading = async {
        let setup = connect(config, tls).await.map_err(sql_error)?;
        let version = schema_version(&setup, table).await;
        Ok::<_, StoreError>((setup, version))
    };
    let read = tokio::time::timeout(read_bound, reading).await;
    let (mut setup, version) =
        read.map_err(|_| silent("connect and read the table's schema version", read_bound))??;
    let migrated = async {
        match version {
            Err(e) if options.create_schema && undefined_table(&e) => {
                migrate(&mut setup, table, options).await?;
                check_version(&setup, table).await
            }
            Ok(Some(older)) if options.create_schema && older < PostgresStore::SCHEMA_VERSION => {
                migrate(&mut setup, table, options).await?;
                check_version(&setup, table).await
            }
            found => checked_version(table, found),
        }
    };
    tokio::time::timeout(SETUP_MIGRATION, migrated)
        .await
        .map_err(|_| silent("create or migrate the table", SETUP_MIGRATION))??;
    drop(setup);
    Ok(())
}

/// What `url` and `options` say about connecting: tokio-postgres's
/// configuration, and the TLS connector its `sslmode` asks for.
fn connection(url: &str, options: &PostgresOptions) -> Result<(Config, Tls), StoreError> {
    let read = url::parse(url)?;
    #[cfg(feature = "postgres-tls")]
    let root_pem = options.tls_root_ca.as_deref();
    #[cfg(not(feature = "postgres-tls"))]
    let root_pem = None;
    let tls = Tls::new(&read, root_pem)?;
    let mut config = read.config;
    config
        .connect_timeout(options.connect_timeout)
        .keepalives(true)
        .keepalives_idle(keepalive::IDLE)
        .keepalives_interval(keepalive::INTERVAL)
        .keepalives_retries(keepalive::PROBES)
        .tcp_user_timeout(keepalive::USER_TIMEOUT);
    Ok((config, tls))
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
    checked_version(table, schema_version(client, table).await)
}

/// The table's schema version, as recorded in `<table>_schema`.
async fn schema_version(
    client: &Client,
    table: &str,
) -> Result<Option<i32>, tokio_postgres::Error> {
    let row = client
        .query_opt(&format!("SELECT max(version) FROM {table}_schema"), &[])
        .await?;
    Ok(row.and_then(|r| r.get(0)))
}

/// Whether `e` says a table is missing (SQLSTATE 42P01).
fn undefined_table(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE)
}

/// `Ok` for the version this code writes; else why the table cannot be used.
fn checked_version(
    table: &str,
    found: Result<Option<i32>, tokio_postgres::Error>,
) -> Result<(), StoreError> {
    let version = found.map_err(|e| {
        StoreError::backend(format!(
            "cannot read the idem schema version of {table} (run PostgresStore::migrate or \
             PostgresStore::schema_sql as a migration?): {}",
            PgError::from(e)
        ))
    })?;
    const WRITTEN: i32 = PostgresStore::SCHEMA_VERSION;
    match version {
        Some(WRITTEN) => Ok(()),
        Some(older @ 1..WRITTEN) => Err(StoreError::backend(format!(
            "the table {table} has idem schema version {older}, older than this idem's ({WRITTEN}); \
             run PostgresStore::migrate (or the SQL of PostgresStore::schema_sql) first"
        ))),
        Some(newer) if newer > WRITTEN => Err(StoreError::backend(format!(
            "the table {table} has idem schema version {newer}, newer than this idem understands ({WRITTEN}); upgrade idem"
        ))),
        other => Err(StoreError::backend(format!(
            "the table {table} has an unknown idem schema version ({other:?})"
        ))),
    }
}

/// Decodes a row of (state, fingerprint, attempt, payload, lease live, age
/// ms).
fn read_row(key: &IdemKey, row: &tokio_postgres::Row) -> Result<Live, StoreError> {
    let corrupt = |e: tokio_postgres::Error| StoreError::corrupt(key.as_str(), e.to_string());
    let row = Row {
        state: row.try_get(0).map_err(corrupt)?,
        fingerprint: row.try_get(1).map_err(corrupt)?,
        attempt: i64::from(row.try_get::<_, i32>(2).map_err(corrupt)?),
        payload: row.try_get(3).map_err(corrupt)?,
        lease_live: row.try_get(4).map_err(corrupt)?,
        age_ms: row.try_get(5).map_err(corrupt)?,
    };
    Live::decode(key.as_str(), row)
}

/// How often a claim asks again when its read-back was overtaken by a
/// concurrent claim (see `Sql::claim`); each retry sees a newer snapshot.
const CLAIM_TRIES: usize = 5;

impl IdemStore for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgresql"
    }

    /// `NOTIFY`, heard by the stores of every process that watch.
    fn announce<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let notify = "SELECT pg_notify($1, $2)";
            with_conn!(self, |conn| conn
                .client
                .execute(notify, &[&NEWS_CHANNEL, &key.as_str()]))?;
            Ok(())
        })
    }

    /// Heard on a connection that `LISTEN`s, made at the first watch.
    fn watch<'a>(&'a self, key: &'a IdemKey, within: Duration) -> BoxFuture<'a, ()> {
        self.news.listen("postgresql", || {
            let (config, tls, opening) = self.dial.clone();
            move |teller| listen(config.clone(), tls.clone(), opening, teller)
        });
        Box::pin(self.news.watch(key, within))
    }

    fn claim<'a>(
        &'a self,
        key: &'a IdemKey,
        request: ClaimRequest<'a>,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            let token = LeaseToken::generate(0);
            let token_bytes = token.id().to_be_bytes().to_vec();
            let fp = request.fingerprint.to_bytes();
            let (lease_ms, retention_ms) = (millis(request.lease), millis(request.retention));
            let params: [&(dyn ToSql + Sync); 7] = [
                &key.as_str(),
                &fp,
                &token_bytes,
                &lease_ms,
                &retention_ms,
                &request.tool,
                &request.about,
            ];
            let corrupt = |why: String| StoreError::corrupt(key.as_str(), why);
            for _ in 0..CLAIM_TRIES {
                let row = with_conn!(self, |conn| conn.client.query_opt(&conn.claim, &params))?;
                // No row, or a claimable one: overtaken by a concurrent claim.
                let Some(row) = row else { continue };
                let state: String = row.try_get(0).map_err(|e| corrupt(e.to_string()))?;
                if state == "acquired" {
                    let attempt: i32 = row.try_get(2).map_err(|e| corrupt(e.to_string()))?;
                    let attempt = record::attempt(key.as_str(), attempt)?;
                    let how: Option<&str> = row.try_get(3).map_err(|e| corrupt(e.to_string()))?;
                    let lapsed: bool = row.try_get(4).map_err(|e| corrupt(e.to_string()))?;
                    let token = LeaseToken::from_parts(token.id(), attempt);
                    return Ok(match (how, lapsed) {
                        (Some("approved"), _) => Claim::Approved(token),
                        (_, true) => Claim::TakenOver(token),
                        _ => Claim::Acquired(token),
                    });
                }
                let live = read_row(key, &row)?;
                if live.taken_by(request.fingerprint).is_none()
                    && let Some(entry) = live.into_entry()
                {
                    return Ok(Claim::Existing(entry));
                }
            }
            Err(StoreError::unavailable(format!(
                "the record changed under {CLAIM_TRIES} claims in a row"
            )))
        })
    }

    fn settle<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        outcome: Outcome<'a>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let token = token.id().to_be_bytes().to_vec();
            let params: [&(dyn ToSql + Sync); 6] = [
                &key.as_str(),
                &token,
                &outcome.state().as_str(),
                &outcome.payload(),
                &millis(outcome.kept_for()),
                &outcome.about(),
            ];
            let changed = with_conn!(self, |conn| conn.client.execute(&conn.settle, &params))?;
            fenced(changed)
        })
    }

    fn renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let token = token.id().to_be_bytes().to_vec();
            let lease_ms = millis(lease);
            let params: [&(dyn ToSql + Sync); 3] = [&key.as_str(), &token, &lease_ms];
            let changed = with_conn!(self, |conn| conn.client.execute(&conn.renew, &params))?;
            fenced(changed)
        })
    }

    /// Run it from a periodic job: expired rows are never answered, but
    /// they take space until purged or reclaimed by a new claim of the
    /// same key.
    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let conn = self.pool.get().await.map_err(pg_error)?;
            conn.client
                .execute(&self.sql.purge, &[])
                .await
                .map_err(sql_error)
        })
    }

    fn get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        Box::pin(async move {
            let row = with_conn!(self, |conn| conn
                .client
                .query_opt(&conn.read, &[&key.as_str()]))?;
            Ok(row
                .map(|row| read_row(key, &row))
                .transpose()?
                .and_then(Live::into_entry))
        })
    }

    fn count_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let row = with_conn!(self, |conn| conn
                .client
                .query_one(self.sql.count_expired.as_str(), &[]))?;
            let count: i64 = row.try_get(0).map_err(sql_error)?;
            Ok(u64::try_from(count).unwrap_or(0))
        })
    }

    fn inspect<'a>(
        &'a self,
        key: &'a IdemKey,
    ) -> BoxFuture<'a, Result<Option<RecordInfo>, StoreError>> {
        Box::pin(async move {
            let row = with_conn!(self, |conn| conn
                .client
                .query_opt(self.sql.inspect.as_str(), &[&key.as_str()]))?;
            row.map(|row| info_row(key.as_str(), &row)?.decode())
                .transpose()
        })
    }

    fn scan<'a>(
        &'a self,
        filter: &'a ScanFilter,
        cursor: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<ScanPage, StoreError>> {
        Box::pin(async move {
            let prefix = filter.key_prefix();
            let state = filter.state.map(State::as_str);
            let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
            let params: [&(dyn ToSql + Sync); 5] = [&cursor, &prefix, &state, &filter.tool, &limit];
            let rows = with_conn!(self, |conn| conn
                .client
                .query(self.sql.scan.as_str(), &params))?;
            let rows = rows
                .iter()
                .map(|row| info_row(&prefix, row))
                .collect::<Result<Vec<_>, _>>()?;
            keyset_page(rows, limit)
        })
    }
}

/// A row of `inspect.sql` or `scan.sql`, read about `key` (the key, or the
/// scan's prefix).
fn info_row(key: &str, row: &tokio_postgres::Row) -> Result<InfoRow, StoreError> {
    let corrupt = |e: tokio_postgres::Error| StoreError::corrupt(key, e.to_string());
    Ok(InfoRow {
        key: row.try_get(0).map_err(corrupt)?,
        state: row.try_get(1).map_err(corrupt)?,
        tool: row.try_get(2).map_err(corrupt)?,
        fingerprint: row.try_get(3).map_err(corrupt)?,
        attempt: i64::from(row.try_get::<_, i32>(4).map_err(corrupt)?),
        token: row.try_get(5).map_err(corrupt)?,
        age_ms: row.try_get(6).map_err(corrupt)?,
        lease_ms: row.try_get(7).map_err(corrupt)?,
        expires_ms: row.try_get(8).map_err(corrupt)?,
        payload: row.try_get(9).map_err(corrupt)?,
        about: row.try_get(10).map_err(corrupt)?,
    })
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
