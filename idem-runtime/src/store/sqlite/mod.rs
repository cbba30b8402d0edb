//! [`SqliteStore`]: an embedded, durable store (feature `sqlite`).
//!
//! One table, `idem_records`, keyed by the stored key. The database runs in
//! WAL mode, so several processes can share one file; a dedicated thread
//! (`worker`) owns this process's connection and runs each operation as one
//! transaction, keeping blocking I/O off the async runtime, and never
//! applies an operation whose caller gave up.

mod worker;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

use self::worker::{Worker, sql_error, write};

use super::{CLAIM_RETENTION, Claim, Entry, IdemStore, LeaseToken, fenced};
use crate::error::StoreError;
use crate::key::{Fingerprint, IdemKey};

/// The schema this code writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idem_records (
    key         TEXT PRIMARY KEY NOT NULL,
    state       TEXT NOT NULL,     -- running | released | done | failed
    fingerprint BLOB NOT NULL,     -- 32 bytes
    attempt     INTEGER NOT NULL,
    token       BLOB,              -- 16 bytes: the holder's (running) or the settler's
    lease_until INTEGER,           -- unix ms, running only
    payload     TEXT,              -- result (done) or error (failed)
    expires_at  INTEGER NOT NULL   -- unix ms
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
";

/// How [`SqliteStore`] opens its database.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// How long a write waits for another process's lock: 5 s.
    pub busy_timeout: Duration,
    /// `PRAGMA synchronous = FULL`: survive power loss, at the price of an
    /// fsync per operation. The default, `NORMAL` in WAL mode, survives any
    /// crash of the process (the agent crashing is the case idem is for) and
    /// may lose the last operations on a power loss or OS crash.
    pub synchronous_full: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            synchronous_full: false,
        }
    }
}

impl SqliteOptions {
    /// The defaults.
    pub fn new() -> SqliteOptions {
        SqliteOptions::default()
    }

    /// Sets [`busy_timeout`](Self::busy_timeout).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Sets [`synchronous_full`](Self::synchronous_full).
    pub fn synchronous_full(mut self, full: bool) -> Self {
        self.synchronous_full = full;
        self
    }
}

/// An embedded store in one SQLite file, durable across restarts and
/// shareable by several processes on one machine.
///
/// SQLite is bundled: nothing to install. Time is this machine's wall clock
/// (every process on the file shares it).
pub struct SqliteStore {
    worker: Worker,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
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
        let worker = Worker::start(
            move || open_connection(&thread_path, &options),
            busy_timeout,
        )
        .await?;
        Ok(SqliteStore { worker, path })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes every expired record now; returns how many. Claims also
    /// sweep a few expired records each, so the table stays bounded even if
    /// this is never called.
    pub async fn purge_expired(&self) -> Result<u64, StoreError> {
        self.worker
            .run(|conn, ticket| {
                write(conn, ticket, |tx| {
                    tx.execute(
                        "DELETE FROM idem_records WHERE expires_at <= ?1",
                        params![now_ms()],
                    )
                    .map(|n| n as u64)
                    .map_err(sql_error)
                })
            })
            .await
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
    let conn = Connection::open(path).map_err(|e| {
        StoreError::backend(format!(
            "cannot open SQLite database {}: {e}",
            path.display()
        ))
    })?;
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

/// Creates the schema in a new database; refuses one newer than this code.
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql_error)?;
    match version {
        0 => {
            conn.execute_batch(&format!(
                "BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
            ))
            .map_err(sql_error)?;
            Ok(())
        }
        SCHEMA_VERSION => Ok(()),
        newer => Err(StoreError::backend(format!(
            "the SQLite database has idem schema version {newer}, newer than this idem understands ({SCHEMA_VERSION}); upgrade idem"
        ))),
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

/// A row as stored.
struct Row {
    state: String,
    fingerprint: Vec<u8>,
    attempt: i64,
    lease_until: Option<i64>,
    payload: Option<String>,
    expires_at: i64,
}

fn read_row(conn: &Connection, key: &str) -> Result<Option<Row>, StoreError> {
    conn.prepare_cached(
        "SELECT state, fingerprint, attempt, lease_until, payload, expires_at
         FROM idem_records WHERE key = ?1",
    )
    .and_then(|mut stmt| {
        stmt.query_row(params![key], |r| {
            Ok(Row {
                state: r.get(0)?,
                fingerprint: r.get(1)?,
                attempt: r.get(2)?,
                lease_until: r.get(3)?,
                payload: r.get(4)?,
                expires_at: r.get(5)?,
            })
        })
        .optional()
    })
    .map_err(|e| match e {
        rusqlite::Error::FromSqlConversionFailure(..) | rusqlite::Error::InvalidColumnType(..) => {
            StoreError::corrupt(key, format!("unreadable row: {e}"))
        }
        other => sql_error(other),
    })
}

/// The live row under `key`, interpreted; `None` if absent or expired.
fn seen(conn: &Connection, key: &str, now: i64) -> Result<Option<Seen>, StoreError> {
    read_row(conn, key)?
        .map(|row| interpret(key, row, now))
        .transpose()
        .map(Option::flatten)
}

/// What a live row means.
enum Seen {
    Running {
        fingerprint: Fingerprint,
        attempt: u32,
        lease_live: bool,
    },
    Released {
        attempt: u32,
    },
    Done {
        fingerprint: Fingerprint,
        result: String,
    },
    Failed {
        fingerprint: Fingerprint,
        error: String,
    },
}

impl Seen {
    /// The entry a caller sees; `None` for a released record.
    fn into_entry(self) -> Option<Entry> {
        match self {
            Seen::Running {
                fingerprint,
                attempt,
                ..
            } => Some(Entry::Running {
                fingerprint,
                attempt,
            }),
            Seen::Released { .. } => None,
            Seen::Done {
                fingerprint,
                result,
            } => Some(Entry::Done {
                result,
                fingerprint,
            }),
            Seen::Failed { fingerprint, error } => Some(Entry::Failed { error, fingerprint }),
        }
    }
}

fn interpret(key: &str, row: Row, now: i64) -> Result<Option<Seen>, StoreError> {
    if row.expires_at <= now {
        return Ok(None);
    }
    let corrupt = |why: &str| StoreError::corrupt(key, why.to_owned());
    let fingerprint = <[u8; 32]>::try_from(row.fingerprint.as_slice())
        .map(Fingerprint::from_bytes)
        .map_err(|_| corrupt("the fingerprint is not 32 bytes"))?;
    let attempt = u32::try_from(row.attempt).map_err(|_| corrupt("bad attempt"))?;
    Ok(Some(match row.state.as_str() {
        "running" => Seen::Running {
            fingerprint,
            attempt,
            lease_live: row
                .lease_until
                .ok_or_else(|| corrupt("running without a lease"))?
                > now,
        },
        "released" => Seen::Released { attempt },
        "done" => Seen::Done {
            fingerprint,
            result: row
                .payload
                .ok_or_else(|| corrupt("done without a result"))?,
        },
        "failed" => Seen::Failed {
            fingerprint,
            error: row
                .payload
                .ok_or_else(|| corrupt("failed without an error"))?,
        },
        other => return Err(corrupt(&format!("unknown state {other:?}"))),
    }))
}

/// A claim inside its transaction: acquired with a new running record, or
/// what the live record holds.
fn claim(
    tx: &rusqlite::Transaction<'_>,
    key: &str,
    fingerprint: &Fingerprint,
    token: &LeaseToken,
    lease: Duration,
) -> Result<Claim, StoreError> {
    let now = now_ms();
    let attempt = match seen(tx, key, now)? {
        None => 0,
        Some(
            Seen::Running {
                attempt,
                lease_live: false,
                ..
            }
            | Seen::Released { attempt },
        ) => attempt.saturating_add(1),
        // A live lease or a recorded outcome: report it.
        Some(held) => {
            return held
                .into_entry()
                .map(Claim::Existing)
                .ok_or_else(|| StoreError::corrupt(key, "unexpected state"));
        }
    };
    let lease_until = now.saturating_add(ms(lease));
    tx.prepare_cached(
        "INSERT OR REPLACE INTO idem_records
             (key, state, fingerprint, attempt, token, lease_until, payload, expires_at)
             VALUES (?1, 'running', ?2, ?3, ?4, ?5, NULL, ?6)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            key,
            fingerprint.as_bytes().as_slice(),
            attempt,
            token.id().to_be_bytes().as_slice(),
            lease_until,
            lease_until.saturating_add(ms(CLAIM_RETENTION)),
        ])
    })
    .map_err(sql_error)?;
    tx.prepare_cached(
        "DELETE FROM idem_records WHERE key IN
             (SELECT key FROM idem_records WHERE expires_at <= ?1 LIMIT ?2)",
    )
    .and_then(|mut stmt| stmt.execute(params![now, SWEEP_PER_CLAIM]))
    .map_err(sql_error)?;
    Ok(Claim::Acquired(LeaseToken::from_parts(token.id(), attempt)))
}

/// How many expired rows each claim deletes on the side.
const SWEEP_PER_CLAIM: i64 = 8;

impl IdemStore for SqliteStore {
    async fn claim(
        &self,
        key: &IdemKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Claim, StoreError> {
        let key = key.as_str().to_owned();
        let fingerprint = *fingerprint;
        let token = LeaseToken::generate(0);
        self.worker
            .run(move |conn, ticket| {
                write(conn, ticket, |tx| {
                    claim(tx, &key, &fingerprint, &token, lease)
                })
            })
            .await
    }

    async fn complete(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        result: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.settle(key, token, "done", Some(result.to_owned()), ttl)
            .await
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
        self.settle(key, token, "failed", Some(error.to_owned()), ttl)
            .await
    }

    async fn renew(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        lease: Duration,
    ) -> Result<(), StoreError> {
        self.fenced_update(
            "UPDATE idem_records SET lease_until = ?3, expires_at = ?4
             WHERE key = ?1 AND state = 'running' AND token = ?2 AND expires_at > ?5",
            key,
            token,
            move |key, token, now| {
                let lease_until = now.saturating_add(ms(lease));
                let expires_at = lease_until.saturating_add(ms(CLAIM_RETENTION));
                (key, token, lease_until, expires_at, now)
            },
        )
        .await
    }

    async fn purge_expired(&self) -> Result<u64, StoreError> {
        SqliteStore::purge_expired(self).await
    }

    async fn get(&self, key: &IdemKey) -> Result<Option<Entry>, StoreError> {
        let key = key.as_str().to_owned();
        self.worker
            .run(move |conn, _| {
                let now = now_ms();
                Ok(seen(conn, &key, now)?.and_then(Seen::into_entry))
            })
            .await
    }
}

impl SqliteStore {
    /// complete / fail / release: one compare-and-set `UPDATE` on the
    /// token. A settled row keeps the token that settled it, so the very
    /// same settle repeated (same token, state and payload) matches and
    /// changes nothing.
    async fn settle(
        &self,
        key: &IdemKey,
        token: &LeaseToken,
        state: &'static str,
        payload: Option<String>,
        keep: Duration,
    ) -> Result<(), StoreError> {
        self.fenced_update(
            "UPDATE idem_records SET
                 payload = CASE WHEN state = 'running' THEN ?4 ELSE payload END,
                 expires_at = CASE WHEN state = 'running' THEN ?5 ELSE expires_at END,
                 lease_until = NULL, state = ?3
             WHERE key = ?1 AND token = ?2 AND expires_at > ?6
               AND (state = 'running' OR (state = ?3 AND payload IS ?4))",
            key,
            token,
            move |key, token, now| {
                (
                    key,
                    token,
                    state,
                    payload,
                    now.saturating_add(ms(keep)),
                    now,
                )
            },
        )
        .await
    }

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
            .run(move |conn, ticket| {
                write(conn, ticket, |tx| {
                    let changed = tx
                        .prepare_cached(sql)
                        .and_then(|mut stmt| stmt.execute(params(key, token, now_ms())))
                        .map_err(sql_error)?;
                    fenced(changed as u64)
                })
            })
            .await
    }
}
