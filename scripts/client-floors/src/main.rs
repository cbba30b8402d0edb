//! The floor of a call through two Redis clients under one harness
//! (`scripts/redis-clients.sh`): the `redis` crate, which RedisStore uses,
//! and `fred`, another well-kept client. Each call derives its key as idem
//! does and sends what the load generator's `redis-floor` sends: `SET ..
//! NX GET PX` of a running record, then, if it took the key, `SET .. PX` of
//! the done one; each command with a 500 ms response timeout (the `redis`
//! crate's default, set on `fred` too), as a store needs one.
//!
//!   client-floors redis|fred URL CALLS unique|duplicate
//!
//! 64 tasks on one worker thread, as the load generator runs them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fred::prelude::{Builder, ClientLike, Config, KeysInterface, Value};
use fred::types::{Expiration, SetOptions};
use idem_runtime::{IdemKey, Scope};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const CONCURRENCY: usize = 64;
const TIMEOUT: Duration = Duration::from_millis(500);

enum Client {
    Redis(redis::aio::MultiplexedConnection),
    Fred(fred::clients::Client),
}

impl Client {
    async fn connect(which: &str, url: &str) -> Result<Client, BoxError> {
        Ok(match which {
            "redis" => {
                let client = redis::Client::open(url)?;
                Client::Redis(client.get_multiplexed_async_connection().await?)
            }
            "fred" => {
                let client = Builder::from_config(Config::from_url(url)?)
                    .with_performance_config(|p| p.default_command_timeout = TIMEOUT)
                    .build()?;
                client.init().await?;
                Client::Fred(client)
            }
            other => return Err(format!("no client {other:?}: redis or fred").into()),
        })
    }

    /// One call: whether it took the key.
    async fn call(&self, key: &str, n: u64) -> Result<bool, BoxError> {
        let (running, done) = records(n);
        match self {
            Client::Redis(conn) => {
                let mut conn = conn.clone();
                let mut claim = redis::cmd("SET");
                claim
                    .arg(key)
                    .arg(&running)
                    .arg("NX")
                    .arg("GET")
                    .arg("PX")
                    .arg(3_660_000);
                let held: Option<Vec<u8>> = claim.query_async(&mut conn).await?;
                if held.is_some() {
                    return Ok(false);
                }
                let mut record = redis::cmd("SET");
                record.arg(key).arg(done).arg("PX").arg(600_000);
                let () = record.query_async(&mut conn).await?;
            }
            Client::Fred(client) => {
                let claim = Some(Expiration::PX(3_660_000));
                let held: Value = client
                    .set(key, running, claim, Some(SetOptions::NX), true)
                    .await?;
                if !held.is_null() {
                    return Ok(false);
                }
                let kept = Some(Expiration::PX(600_000));
                let () = client.set(key, done, kept, None, false).await?;
            }
        }
        Ok(true)
    }
}

/// A running record and the done one, of the sizes idem writes.
fn records(n: u64) -> (String, String) {
    const FINGERPRINT: &str = "0000000000000000000000000000000000000000000000000000000000000000";
    let running = format!("2|running|{FINGERPRINT}|0|work|3660000|{n}|");
    let done = format!("2|done|{FINGERPRINT}|0|work|600000|{n}|{n}");
    (running, done)
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [which, url, calls, mode] = &args[..] else {
        return Err("usage: client-floors redis|fred URL CALLS unique|duplicate".into());
    };
    let calls: usize = calls.parse()?;
    let unique = match mode.as_str() {
        "unique" => true,
        "duplicate" => false,
        other => return Err(format!("no mode {other:?}: unique or duplicate").into()),
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?
        .block_on(run(which, url, calls, unique))
}

async fn run(which: &str, url: &str, calls: usize, unique: bool) -> Result<(), BoxError> {
    let client = Arc::new(Client::connect(which, url).await?);
    let namespace = format!("client-floors-{which}-{}", std::process::id());
    let next = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (client, next, ran, namespace) =
                (client.clone(), next.clone(), ran.clone(), namespace.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= calls {
                        return Ok::<(), BoxError>(());
                    }
                    let n = if unique { i as u64 } else { 0 };
                    let args = serde_json::json!({ "n": n });
                    let key = IdemKey::derive(Scope::Run("load"), "work", 1, &args)
                        .with_namespace(&namespace);
                    if client.call(key.as_str(), n).await? {
                        ran.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let ran = ran.load(Ordering::Relaxed);
    let expected = if unique { calls } else { 1 };
    if ran != expected {
        return Err(format!("{ran} calls took their key, {expected} should have").into());
    }
    println!("{which}: {calls} calls, {ran} took their key");
    Ok(())
}
