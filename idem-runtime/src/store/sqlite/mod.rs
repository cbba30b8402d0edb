//! [`SqliteStore`]: an embedded, durable store (feature `sqlite`).
//!
//! One table, `idem_records`, keyed by the stored key. The database runs in
//! WAL mode, so several processes can share one file; a dedicated thread
//! (`connection`) owns this process's connection and runs each operation as
//! one transaction, waiting for another process's lock off the async
//! runtime, and never applies an operation whose caller gave up. A claim,
//! settle or renewal that finds the connection free and the lock untaken
//! runs at once on its caller's thread instead (a write to the log, no
//! fsync; not with `synchronous_full`), and the thread checkpoints the log.

mod connection;
mod error;
mod options;
mod sql;

pub use self::options::SqliteOptions;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

use self::connection::{Worker, write};
use self::error::{cannot_open, newer_schema, sql_error};

use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};
use crate::store::contract::fenced;
use crate::store::news::News;
use crate::store::record::{InfoRow, Live, Row, State, Took, keyset_page};
use crate::store::{
    BoxFuture, Claim, ClaimRequest, Entry, IdemStore, LeaseToken, Outcome, RecordInfo, ScanFilter,
    ScanPage,
};

/// An embedded store in one SQLite file, durable across restarts and
/// shareable by several processes on one machine.
///
/// SQLite is bundled: nothing to install. Time is this machine's wall clock
/// (every process on the file shares it). Processes on one file take turns
/// at its write lock: one paused (SIGSTOP, a debugger) inside an operation
/// holds up the others' for as long, and leases longer than such a pause
/// keep its bodies from running again.
pub struct SqliteStore {
    worker: Worker,
    path: PathBuf,
    /// Tells the calls of this process waiting on a record
    /// ([`IdemStore::watch`]) of the changes announced through this
    /// store; those of other processes look at their records now and then.
    news: News,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// The schema this code writes (`PRAGMA user_version`).
    pub const SCHEMA_VERSION: i64 = 3;

    /// Opens (creating if needed) the database at `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// [`open`](Self::open) with explicit options.
    pub async fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_owned();
        let thread_path = path.clone();
        let busy_timeout = options.busy_timeout;
        // An fsync per commit is no write for the async runtime's thread.
        let inline = !options.synchronous_full;
        let worker = Worker::start(
            move || open_connection(&thread_path, &options),
            busy_timeout,
            inline,
        )
        .await?;
        Ok(SqliteStore {
            worker,
            path,
            news: News::new(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Test hook: runs raw SQL on the store's connection (to plant a
    /// malformed record, say).
    #[cfg(feature = "test-util")]
    pub async fn execute_raw(&self, sql: &str) -> Result<usize, StoreError> {
        let sql = sql.to_owned();
        self.worker
            .run(move |conn, _| conn.execute(&sql, []).map_err(sql_error))
            .await
    }
}

fn open_connection(path: &Path, options: &SqliteOptions) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(|e| cannot_open(path, e))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sql_error)?;
    conn.pragma_update(
        None,
        "synchronous",
        if options.synchronous_full {
            "FULL"
        } else {
            "NORMAL"
        },
    )
    .map_err(sql_error)?;
    migrate(&conn)?;
    Ok(conn)
}

/// Creates the schema in a new database and brings one of version 1 or 2
/// to this code's; refuses one newer than this code.
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    const WRITTEN: i64 = SqliteStore::SCHEMA_VERSION;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql_error)?;
    let step = match version {
        0 => sql::SCHEMA.to_owned(),
        1 => format!("{}{}", sql::MIGRATE_1_TO_2, sql::MIGRATE_2_TO_3),
        2 => sql::MIGRATE_2_TO_3.to_owned(),
        WRITTEN => return Ok(()),
        newer => return Err(newer_schema(newer, WRITTEN)),
    };
    // The version is read again under the write lock: another process may
    // have migrated the file meanwhile.
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sql_error)?;
    let again: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql_error)?;
    let done = if again == version {
        conn.execute_batch(&format!("{step} PRAGMA user_version = {WRITTEN}; COMMIT;"))
    } else {
        conn.execute_batch("COMMIT")
    };
    done.map_err(sql_error)?;
    if again == version || again == WRITTEN {
        Ok(())
    } else {
        migrate(conn)
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The live record under `key`, decoded; `None` if absent or expired.
fn live(conn: &Connection, key: &str, now: i64) -> Result<Option<Live>, StoreError> {
    let row = conn
        .prepare_cached(sql::READ)
        .and_then(|mut stmt| {
            stmt.query_row(params![key], |r| {
                let lease_until: Option<i64> = r.get(3)?;
                let expires_at: i64 = r.get(5)?;
                let changed_at: Option<i64> = r.get(6)?;
                Ok((
                    Row {
                        state: r.get(0)?,
                        fingerprint: r.get(1)?,
                        attempt: r.get(2)?,
                        payload: r.get(4)?,
                        lease_live: lease_until.map(|until| until > now),
                        age_ms: changed_at.map(|at| now.saturating_sub(at)),
                    },
                    expires_at,
                ))
            })
            .optional()
        })
        .map_err(|e| row_error(key, e))?;
    match row {
        Some((row, expires_at)) if expires_at > now => Live::decode(key, row).map(Some),
        _ => Ok(None),
    }
}

/// A claim's request, owned, for the worker's thread.
struct Request {
    tool: String,
    /// The fingerprint as the row keeps it.
    fingerprint: Vec<u8>,
    lease: Duration,
    retention: Duration,
    about: Option<String>,
}

impl Request {
    fn of(request: ClaimRequest<'_>) -> Request {
        Request {
            tool: request.tool.to_owned(),
            fingerprint: request.fingerprint.to_bytes(),
            lease: request.lease,
            retention: request.retention,
            about: request.about.map(str::to_owned),
        }
    }
}

/// A claim inside its transaction: acquired with a new running record, or
/// what the live record holds.
fn claim(
    tx: &rusqlite::Transaction<'_>,
    key: &str,
    request: &Request,
    token: &LeaseToken,
) -> Result<Claim, StoreError> {
    let now = now_ms();
    let fingerprint = Fingerprint::from_bytes(&request.fingerprint)
        .ok_or_else(|| StoreError::backend("a claim's fingerprint is not whole"))?;
    let (attempt, took) = match live(tx, key, now)? {
        None => (0, Took::Released),
        Some(record) => match record.taken_by(&fingerprint) {
            Some(taken) => taken,
            // A live lease, a recorded outcome, a pending approval: report it.
            None => {
                return record
                    .into_entry()
                    .map(Claim::Existing)
                    .ok_or_else(|| StoreError::corrupt(key, "unexpected state"));
            }
        },
    };
    let lease_until = now.saturating_add(ms(request.lease));
    tx.prepare_cached(sql::CLAIM)
        .and_then(|mut stmt| {
            stmt.execute(params![
                key,
                request.fingerprint,
                attempt,
                token.id().to_be_bytes().as_slice(),
                lease_until,
                lease_until.saturating_add(ms(request.retention)),
                request.tool,
                now,
                request.about,
                took == Took::Approved,
            ])
        })
        .map_err(sql_error)?;
    tx.prepare_cached(sql::SWEEP)
        .and_then(|mut stmt| stmt.execute(params![now, SWEEP_PER_CLAIM]))
        .map_err(sql_error)?;
    let token = LeaseToken::from_parts(token.id(), attempt);
    Ok(match took {
        Took::Released => Claim::Acquired(token),
        Took::TakenOver => Claim::TakenOver(token),
        Took::Approved => Claim::Approved(token),
    })
}

/// How many expired rows each claim deletes on the side.
const SWEEP_PER_CLAIM: i64 = 8;

impl IdemStore for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn announce<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<(), StoreError>> {
        self.news.announce(key)
    }

    fn watch<'a>(&'a self, key: &'a IdemKey, within: Duration) -> BoxFuture<'a, ()> {
        Box::pin(self.news.watch(key, within))
    }

    fn claim<'a>(
        &'a self,
        key: &'a IdemKey,
        request: ClaimRequest<'a>,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            let key = key.as_str().to_owned();
            let request = Request::of(request);
            let token = LeaseToken::generate(0);
            self.worker
                .write(move |tx| claim(tx, &key, &request, &token))
                .await
        })
    }

    fn settle<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        outcome: Outcome<'a>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (state, payload) = (outcome.state(), outcome.payload().map(str::to_owned));
        let (kept_for, about) = (outcome.kept_for(), outcome.about().map(str::to_owned));
        Box::pin(
            self.fenced_update(sql::SETTLE, key, token, move |key, token, now| {
                (
                    key,
                    token,
                    state.as_str(),
                    payload,
                    now.saturating_add(ms(kept_for)),
                    now,
                    about,
                )
            }),
        )
    }

    fn renew<'a>(
        &'a self,
        key: &'a IdemKey,
        token: &'a LeaseToken,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(
            self.fenced_update(sql::RENEW, key, token, move |key, token, now| {
                (key, token, now.saturating_add(ms(lease)), now)
            }),
        )
    }

    /// Claims also sweep a few expired records each, so the table stays
    /// bounded even if this is never called.
    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            self.worker
                .run(|conn, ticket| {
                    write(conn, ticket, |tx| {
                        tx.execute(sql::PURGE, params![now_ms()])
                            .map(|n| n as u64)
                            .map_err(sql_error)
                    })
                })
                .await
        })
    }

    fn get<'a>(&'a self, key: &'a IdemKey) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        Box::pin(async move {
            let key = key.as_str().to_owned();
            self.worker
                .run(move |conn, _| {
                    let now = now_ms();
                    Ok(live(conn, &key, now)?.and_then(Live::into_entry))
                })
                .await
        })
    }

    fn count_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            self.worker
                .run(|conn, _| {
                    conn.query_row(sql::COUNT_EXPIRED, params![now_ms()], |r| {
                        r.get::<_, i64>(0)
                    })
                    .map(|n| u64::try_from(n).unwrap_or(0))
                    .map_err(sql_error)
                })
                .await
        })
    }

    fn inspect<'a>(
        &'a self,
        key: &'a IdemKey,
    ) -> BoxFuture<'a, Result<Option<RecordInfo>, StoreError>> {
        Box::pin(async move {
            let key = key.as_str().to_owned();
            self.worker
                .run(move |conn, _| {
                    let now = now_ms();
                    let row = conn
                        .prepare_cached(sql::INSPECT)
                        .and_then(|mut stmt| {
                            stmt.query_row(params![key], |r| info_row(r, now))
                                .optional()
                        })
                        .map_err(|e| row_error(&key, e))?;
                    row.filter(|row| row.expires_ms > 0)
                        .map(InfoRow::decode)
                        .transpose()
                })
                .await
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
            // Every key of the namespace sorts in [prefix, end): `prefix` ends
            // with ':', and ';' follows it.
            let end = format!("{};", &prefix[..prefix.len() - 1]);
            let (cursor, state) = (cursor.to_owned(), filter.state.map(State::as_str));
            let tool = filter.tool.clone();
            let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
            self.worker
                .run(move |conn, _| {
                    let now = now_ms();
                    let rows = conn
                        .prepare_cached(sql::SCAN)
                        .and_then(|mut stmt| {
                            stmt.query_map(
                                params![cursor, prefix, end, now, state, tool, limit],
                                |r| info_row(r, now),
                            )?
                            .collect::<Result<Vec<_>, _>>()
                        })
                        .map_err(|e| row_error(&prefix, e))?;
                    keyset_page(rows, limit)
                })
                .await
        })
    }
}

/// A row of `inspect.sql` or `scan.sql`, its times made relative to `now`.
fn info_row(r: &rusqlite::Row<'_>, now: i64) -> rusqlite::Result<InfoRow> {
    let since = |at: Option<i64>| at.map(|at| now.saturating_sub(at));
    let until = |at: Option<i64>| at.map(|at| at.saturating_sub(now));
    Ok(InfoRow {
        key: r.get(0)?,
        state: r.get(1)?,
        tool: r.get(2)?,
        fingerprint: r.get(3)?,
        attempt: r.get(4)?,
        token: r.get(5)?,
        age_ms: since(r.get(6)?),
        lease_ms: until(r.get(7)?),
        expires_ms: r.get::<_, i64>(8)?.saturating_sub(now),
        payload: r.get(9)?,
        about: r.get(10)?,
    })
}

/// A failure reading rows about `key`: a value of the wrong type is a
/// corrupt record, anything else the database's own error.
fn row_error(key: &str, e: rusqlite::Error) -> StoreError {
    match e {
        rusqlite::Error::FromSqlConversionFailure(..) | rusqlite::Error::InvalidColumnType(..) => {
            StoreError::corrupt(key, format!("unreadable row: {e}"))
        }
        other => sql_error(other),
    }
}

impl SqliteStore {
    /// Runs `sql`, a compare-and-set `UPDATE` on the holder's token, in a
    /// write transaction, with the parameters `params` makes from the key,
    /// the token's bytes and now: `LeaseLost` unless it changed one row.
    async fn fenced_update<P>(
        &self,
        sql: &'static str,
        key: &IdemKey,
        token: &LeaseToken,
        params: impl FnOnce(String, [u8; 16], i64) -> P + Send + 'static,
    ) -> Result<(), StoreError>
    where
        P: rusqlite::Params,
    {
        let key = key.as_str().to_owned();
        let token = token.id().to_be_bytes();
        self.worker
            .write(move |tx| {
                let changed = tx
                    .prepare_cached(sql)
                    .and_then(|mut stmt| stmt.execute(params(key, token, now_ms())))
                    .map_err(sql_error)?;
                fenced(changed as u64)
            })
            .await
    }
}
