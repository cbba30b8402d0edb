//! The floors idem's calls are measured against (`--store
//! redis-floor|postgres-floor|sqlite-floor`): no idem at all, but each call
//! derives its key as idem does and sends its store the statements idem
//! would, through the same client library, without fencing, checks,
//! retries, timeouts, metrics or spans:
//!
//! - Redis: `SET .. NX GET PX` of a running record, then, if it took the
//!   key, `SET .. PX` of the record with the result; a duplicate ends at
//!   the first command's answer. `redis-floor-pipe` sends the same over a
//!   minimal client of its own (`pipe.rs`), to weigh the Redis client.
//! - PostgreSQL: the store's own claim and settle statements (its
//!   `sql/claim.sql` and `sql/settle.sql`, prepared) on a connection of
//!   the task's own, in the table the store made.
//! - SQLite: the store's own statements on one connection's thread, each
//!   operation a transaction as the store's are: the read, the claim and
//!   the sweep; then the settle.
//!
//! What idem adds to a call is its figure less its floor's, in one run.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use tokio::sync::{mpsc, oneshot};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A running record and the done one of the sizes idem writes on Redis,
/// built as cheaply as can be (this is the floor).
fn redis_records(n: u64) -> (String, String) {
    const FINGERPRINT: &str = "0000000000000000000000000000000000000000000000000000000000000000";
    let mut id = itoa::Buffer::new();
    let id = id.format(n);
    let mut running = String::with_capacity(128);
    for part in ["2|running|", FINGERPRINT, "|0|work|3660000|", id, "|"] {
        running.push_str(part);
    }
    let mut done = String::with_capacity(128);
    for part in ["2|done|", FINGERPRINT, "|0|work|600000|", id, "|", id] {
        done.push_str(part);
    }
    (running, done)
}

/// A call's own lease token: a claim with the token of the row's holder
/// takes the row again (its own claim sent twice), so no two calls share one.
fn token() -> Vec<u8> {
    idem::store::LeaseToken::generate(0)
        .id()
        .to_be_bytes()
        .to_vec()
}

const LEASE_MS: f64 = 60_000.0;
const RETENTION_MS: f64 = 3_600_000.0;
const KEPT_MS: f64 = 600_000.0;

/// One store's floor.
pub(crate) enum Floor {
    Redis(redis::aio::MultiplexedConnection),
    /// The same commands over a minimal client (`pipe.rs`).
    RedisPipe(crate::pipe::Pipe),
    Postgres {
        conns: Vec<PgConn>,
        next: AtomicUsize,
    },
    Sqlite(mpsc::UnboundedSender<SqliteOp>),
}

pub(crate) struct PgConn {
    client: tokio_postgres::Client,
    claim: tokio_postgres::Statement,
    settle: tokio_postgres::Statement,
}

/// An operation for the SQLite thread: a claim (answering whether it
/// took the key) or a settle, of a call's key and argument.
pub(crate) struct SqliteOp {
    settle: bool,
    token: Vec<u8>,
    key: String,
    n: u64,
    reply: oneshot::Sender<Result<bool, String>>,
}

impl Floor {
    /// The floor of `store` (`redis-floor`, ..) at `url`, with `conns`
    /// connections where the store pools them; `None` for idem's stores.
    pub(crate) async fn connect(
        store: &str,
        url: Option<&str>,
        conns: usize,
        sqlite_file: PathBuf,
    ) -> Result<Option<Floor>, BoxError> {
        Ok(Some(match store {
            "redis-floor" => {
                let url = url.unwrap_or("redis://127.0.0.1:6379");
                let client = redis::Client::open(url)?;
                Floor::Redis(client.get_multiplexed_async_connection().await?)
            }
            "redis-floor-pipe" => {
                let url = url.unwrap_or("redis://127.0.0.1:6379");
                let addr = url.strip_prefix("redis://").ok_or("a redis:// URL")?;
                Floor::RedisPipe(crate::pipe::Pipe::connect(addr.trim_end_matches('/')).await?)
            }
            "postgres-floor" => {
                let url = url.unwrap_or("postgres://postgres@127.0.0.1:5432/test");
                let mut all = Vec::with_capacity(conns);
                for _ in 0..conns {
                    all.push(pg_connect(url).await?);
                }
                Floor::Postgres {
                    conns: all,
                    next: AtomicUsize::new(0),
                }
            }
            "sqlite-floor" => Floor::Sqlite(sqlite_thread(sqlite_file)?),
            _ => return Ok(None),
        }))
    }

    /// One call under `key`; whether it took the key (ran).
    pub(crate) async fn call(&self, key: &str, n: u64) -> Result<bool, String> {
        match self {
            Floor::Redis(conn) => redis_call(conn.clone(), key, n).await,
            Floor::RedisPipe(pipe) => pipe_call(pipe, key, n).await,
            Floor::Postgres { conns, next } => {
                let conn = &conns[next.fetch_add(1, Ordering::Relaxed) % conns.len()];
                pg_call(conn, key, n).await
            }
            Floor::Sqlite(ops) => {
                // Two hand-offs to the connection's thread, as the store's
                // claim and settle are.
                let token = token();
                let ran = sqlite_op(ops, false, &token, key, n).await?;
                if ran {
                    sqlite_op(ops, true, &token, key, n).await?;
                }
                Ok(ran)
            }
        }
    }
}

async fn sqlite_op(
    ops: &mpsc::UnboundedSender<SqliteOp>,
    settle: bool,
    token: &[u8],
    key: &str,
    n: u64,
) -> Result<bool, String> {
    let stopped = |_| "the SQLite thread stopped".to_owned();
    let (reply, answer) = oneshot::channel();
    let key = key.to_owned();
    ops.send(SqliteOp {
        settle,
        token: token.to_vec(),
        key,
        n,
        reply,
    })
    .map_err(|_| "the SQLite thread stopped".to_owned())?;
    answer.await.map_err(stopped)?
}

async fn redis_call(
    mut conn: redis::aio::MultiplexedConnection,
    key: &str,
    n: u64,
) -> Result<bool, String> {
    let (running, done) = redis_records(n);
    let mut claim = redis::Cmd::with_capacity(7, key.len() + running.len() + 24);
    claim
        .arg("SET")
        .arg(key)
        .arg(&running)
        .arg("NX")
        .arg("GET")
        .arg("PX")
        .arg(3_660_000);
    let held: Option<Vec<u8>> = claim
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    if held.is_some() {
        return Ok(false);
    }
    let mut record = redis::Cmd::with_capacity(5, key.len() + done.len() + 16);
    record.arg("SET").arg(key).arg(done).arg("PX").arg(600_000);
    let () = record
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    Ok(true)
}

async fn pipe_call(pipe: &crate::pipe::Pipe, key: &str, n: u64) -> Result<bool, String> {
    use crate::pipe::Reply;
    let (running, done) = redis_records(n);
    let claim = [
        &b"SET"[..],
        key.as_bytes(),
        running.as_bytes(),
        b"NX",
        b"GET",
        b"PX",
        b"3660000",
    ];
    match pipe.send(&claim).await? {
        Reply::Nil => {}
        Reply::Bulk => return Ok(false),
        Reply::Error(e) => return Err(e),
        Reply::Ok => return Err("unexpected OK to SET .. GET".to_owned()),
    }
    let record = [
        &b"SET"[..],
        key.as_bytes(),
        done.as_bytes(),
        b"PX",
        b"600000",
    ];
    match pipe.send(&record).await? {
        Reply::Ok => Ok(true),
        Reply::Error(e) => Err(e),
        _ => Err("unexpected reply to SET".to_owned()),
    }
}

/// The PostgreSQL store's statements, in the load generator's table.
fn pg_sql(file: &str) -> String {
    file.replace("{table}", "idem_loadgen")
}

async fn pg_connect(url: &str) -> Result<PgConn, BoxError> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let claim = client
        .prepare(&pg_sql(include_str!(
            "../../idem-runtime/src/store/postgres/sql/claim.sql"
        )))
        .await?;
    let settle = client
        .prepare(&pg_sql(include_str!(
            "../../idem-runtime/src/store/postgres/sql/settle.sql"
        )))
        .await?;
    Ok(PgConn {
        client,
        claim,
        settle,
    })
}

async fn pg_call(conn: &PgConn, key: &str, n: u64) -> Result<bool, String> {
    let token = token();
    let fingerprint = [0u8; 32].to_vec();
    let row = conn
        .client
        .query_opt(
            &conn.claim,
            &[
                &key,
                &fingerprint,
                &token,
                &LEASE_MS,
                &RETENTION_MS,
                &"work",
            ],
        )
        .await
        .map_err(|e| e.to_string())?;
    // No row: a concurrent claim took the key under the statement (the
    // store asks again; here it counts as taken).
    let Some(row) = row else { return Ok(false) };
    let state: String = row.get(0);
    if state != "acquired" {
        return Ok(false);
    }
    let payload = n.to_string();
    conn.client
        .execute(&conn.settle, &[&key, &token, &"done", &payload, &KEPT_MS])
        .await
        .map_err(|e| e.to_string())?;
    Ok(true)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The thread that owns the SQLite connection, as the store's does.
fn sqlite_thread(file: PathBuf) -> Result<mpsc::UnboundedSender<SqliteOp>, BoxError> {
    let conn = rusqlite::Connection::open(file)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    let (ops, mut queue) = mpsc::unbounded_channel::<SqliteOp>();
    std::thread::spawn(move || {
        let mut conn = conn;
        while let Some(op) = queue.blocking_recv() {
            let answer = if op.settle {
                sqlite_settle(&mut conn, &op.token, &op.key, op.n).map(|()| true)
            } else {
                sqlite_claim(&mut conn, &op.token, &op.key)
            };
            let _ = op.reply.send(answer.map_err(|e| e.to_string()));
        }
    });
    Ok(ops)
}

fn sqlite_claim(
    conn: &mut rusqlite::Connection,
    token: &[u8],
    key: &str,
) -> rusqlite::Result<bool> {
    let now = now_ms();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let held = tx
        .prepare_cached(include_str!(
            "../../idem-runtime/src/store/sqlite/sql/read.sql"
        ))?
        .query_row(params![key], |row| row.get::<_, i64>(5))
        .optional()?;
    if held.is_some_and(|expires_at| expires_at > now) {
        return Ok(false);
    }
    tx.prepare_cached(include_str!(
        "../../idem-runtime/src/store/sqlite/sql/claim.sql"
    ))?
    .execute(params![
        key,
        [0u8; 32].as_slice(),
        0,
        token,
        now + LEASE_MS as i64,
        now + (LEASE_MS + RETENTION_MS) as i64,
        "work",
        now,
    ])?;
    tx.prepare_cached(include_str!(
        "../../idem-runtime/src/store/sqlite/sql/sweep.sql"
    ))?
    .execute(params![now, 8])?;
    tx.commit()?;
    Ok(true)
}

fn sqlite_settle(
    conn: &mut rusqlite::Connection,
    token: &[u8],
    key: &str,
    n: u64,
) -> rusqlite::Result<()> {
    let now = now_ms();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.prepare_cached(include_str!(
        "../../idem-runtime/src/store/sqlite/sql/settle.sql"
    ))?
    .execute(params![
        key,
        token,
        "done",
        n.to_string(),
        now + KEPT_MS as i64,
        now
    ])?;
    tx.commit()
}
