//! `idem console` with many operations awaiting approval: how long its
//! API takes to answer the first page of each list, and how long a
//! browser takes to show the first screen, on a store holding N awaiting
//! operations (10,000 by default) beside other records.
//!
//! ```text
//! cargo build --release -p idem-cli --examples
//! target/release/examples/console_load [--store URL] [--awaiting N] [--rounds R] [--idem PATH] [--baseline IDEM]
//! ```
//!
//! It fills the store through a registry (an approval tool called N
//! times, across tenants, and N/10 times more, refused; for each, a write
//! that ran), in a namespace of
//! its own (on PostgreSQL, a table of its own, dropped at the end; give
//! Redis a server of its own: the records are left to expire), starts
//! `idem console` on it (the binary next to this example unless
//! `--idem`), then, R times, lets the console's short-lived copy of the
//! lists lapse and asks for the first page of what awaits, the unknown
//! outcomes and the decisions: each a scan of the namespace, as the first
//! page a person opens after a while costs. Last, `cli/tests/browser/
//! first_screen.py` (Chromium, as the tests drive it) signs in and
//! measures from navigation to the first operation on the page. One JSON
//! line: the medians and the worst of each, in ms. `--baseline IDEM` adds
//! another `idem` binary's console on the same records (a build of
//! another commit), measured in the same rounds, alternating: a line
//! each.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use idem::IdemStore;
use idem::prelude::*;
use serde_json::{Value, json};

/// Refund an order, once a person approves.
#[write_tool(approval = "required")]
async fn refund(order: String, amount: u64, _ctx: &WriteCtx) -> Result<Value, String> {
    Ok(json!({"refunded": order, "amount": amount}))
}

/// Note something: runs at once.
#[write_tool]
async fn note(text: String, _ctx: &WriteCtx) -> Result<Value, String> {
    Ok(json!({"noted": text}))
}

const TOKEN: &str = "s3cret";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let awaiting: usize = flag("--awaiting").map_or(Ok(10_000), |n| n.parse())?;
    let rounds: usize = flag("--rounds").map_or(Ok(10), |n| n.parse())?;
    let here = std::env::current_exe()?;
    let idem = flag("--idem").map_or_else(
        || {
            here.parent()
                .and_then(|d| d.parent())
                .map(|d| d.join("idem"))
        },
        |p| Some(PathBuf::from(p)),
    );
    let idem = idem.ok_or("cannot tell where the idem binary is: give --idem")?;
    let dir = std::env::temp_dir().join(format!("idem-console-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store_url =
        flag("--store").unwrap_or_else(|| dir.join("records.sqlite").display().to_string());

    let namespace = format!("load-{}", std::process::id());
    let table = format!("idem_console_load_{}", std::process::id());

    prepare(&store_url, &table, &namespace, awaiting).await?;

    let mut consoles = vec![start("this", &idem, &store_url, &namespace, &table).await?];
    if let Some(baseline) = flag("--baseline") {
        let baseline = PathBuf::from(baseline);
        consoles.push(start("baseline", &baseline, &store_url, &namespace, &table).await?);
    }
    let client = reqwest::Client::new();
    let mut took: Vec<[Vec<Duration>; 3]> = consoles.iter().map(|_| Default::default()).collect();
    for _ in 0..rounds {
        for (console, took) in consoles.iter().zip(&mut took) {
            for (path, took) in PATHS.iter().zip(took.iter_mut()) {
                // What the console read a moment ago has lapsed: a scan.
                tokio::time::sleep(Duration::from_secs(6)).await;
                took.push(asked(&client, console, path, awaiting).await?);
            }
        }
    }
    let kind = store_url
        .split_once("://")
        .map_or("sqlite", |(scheme, _)| scheme);
    for (console, took) in consoles.iter_mut().zip(&mut took) {
        let mut figures = serde_json::Map::new();
        figures.insert("console".into(), json!(console.name));
        figures.insert("store".into(), json!(kind));
        figures.insert("awaiting".into(), json!(awaiting));
        for (name, took) in ["approvals", "pending", "decisions"]
            .iter()
            .zip(took.iter_mut())
        {
            figures.insert(format!("{name}_ms"), summary(took));
        }
        figures.insert("first_screen_ms".into(), first_screen(&console.addr)?);
        println!("{}", Value::Object(figures));
        console.child.kill().await?;
    }
    if kind.starts_with("postgres") {
        postgres(&store_url, &format!("DROP TABLE {table}, {table}_schema")).await?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Fills the store at `store_url` (on PostgreSQL, in `table`) with
/// `awaiting` operations awaiting approval in `namespace`, and more.
async fn prepare(
    store_url: &str,
    table: &str,
    namespace: &str,
    awaiting: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let store = idem_store(store_url, table).await?;
    let filled = Instant::now();
    fill(store, namespace, awaiting).await?;
    if store_url.starts_with("postgres") {
        // As autovacuum would within its naptime: without statistics, the
        // planner takes the freshly filled table for an empty one, and
        // sorts it whole for each page of a scan.
        postgres(store_url, &format!("ANALYZE {table}")).await?;
    }
    eprintln!(
        "filled {awaiting} awaiting, {} refused and as many done in {:?}",
        awaiting / 10,
        filled.elapsed()
    );
    Ok(())
}

/// The store at `url`: SQLite for a path, Redis or PostgreSQL (in
/// `table`) by scheme.
async fn idem_store(
    url: &str,
    table: &str,
) -> Result<Arc<dyn IdemStore>, Box<dyn std::error::Error>> {
    Ok(if url.starts_with("redis://") {
        Arc::new(idem::RedisStore::connect(url).await?)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let options = idem::PostgresOptions::new().table(table);
        Arc::new(idem::PostgresStore::connect_with(url, options).await?)
    } else {
        Arc::new(idem::SqliteStore::open(url).await?)
    })
}

/// `n` refunds awaiting approval across ten tenants, `n / 10` refused,
/// and a note done for each, in `namespace`.
async fn fill(
    store: Arc<dyn IdemStore>,
    namespace: &str,
    n: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let registry = Registry::builder(())
        .store(store)
        .namespace(namespace)
        .tool(refund)
        .tool(note)
        .build()?;
    let registry = &registry;
    // One in ten more refunds is refused: what the decisions list.
    let refused = n / 10;
    let calls = futures_util::stream::iter(0..n + refused).map(|i| async move {
        let tenant = format!("tenant-{}", i % 10);
        let context = idem::CallContext::run("load").tenant(&tenant);
        let order = json!({"order": format!("o-{i}"), "amount": i});
        let asked = registry.call(context, "refund", order).await;
        let noted = registry
            .call(context, "note", json!({"text": format!("n-{i}")}))
            .await;
        match (asked, noted) {
            (Err(ToolError::ApprovalRequired { key, .. }), Ok(_)) if i >= n => registry
                .deny(&key, "load", "too much")
                .await
                .map_err(|e| e.to_string()),
            (Err(ToolError::ApprovalRequired { .. }), Ok(_)) => Ok(()),
            (asked, noted) => Err(format!("refund {asked:?}, note {noted:?}")),
        }
    });
    let results: Vec<Result<(), String>> = calls.buffer_unordered(32).collect().await;
    results.into_iter().collect::<Result<(), String>>()?;
    Ok(())
}

/// The first page of each list, as the page asks for it.
const PATHS: [&str; 3] = [
    "/api/approvals?limit=50",
    "/api/pending?limit=50",
    "/api/decisions?limit=50",
];

/// A console being measured.
struct Console {
    name: &'static str,
    addr: String,
    child: tokio::process::Child,
}

/// `idem console` of the binary `idem` on the store, once it listens.
async fn start(
    name: &'static str,
    idem: &std::path::Path,
    store_url: &str,
    namespace: &str,
    table: &str,
) -> Result<Console, Box<dyn std::error::Error>> {
    let addr = format!("127.0.0.1:{}", free_port()?);
    let child = tokio::process::Command::new(idem)
        .args(["console", "--store", store_url, "--listen", &addr])
        .args(["--namespace", namespace, "--table", table])
        .args(["--token", &format!("ana={TOKEN}")])
        .kill_on_drop(true)
        .spawn()?;
    while tokio::net::TcpStream::connect(&addr).await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Console { name, addr, child })
}

/// How long `console` takes to answer `path`; the list of approvals must
/// hold the `awaiting` operations.
async fn asked(
    client: &reqwest::Client,
    console: &Console,
    path: &str,
    awaiting: usize,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let asked = Instant::now();
    let answer = client
        .get(format!("http://{}{path}", console.addr))
        .bearer_auth(TOKEN)
        .send()
        .await?
        .error_for_status()?
        .json::<Value>()
        .await?;
    let took = asked.elapsed();
    if path.starts_with("/api/approvals") && answer["total"] != json!(awaiting) {
        let listed = &answer["total"];
        return Err(format!(
            "{awaiting} await, the {} console lists {listed}",
            console.name
        )
        .into());
    }
    Ok(took)
}

/// Runs `sql` on the PostgreSQL server at `url`.
async fn postgres(url: &str, sql: &str) -> Result<(), Box<dyn std::error::Error>> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client.batch_execute(sql).await?)
}

/// The median and the worst of `took`, in ms.
fn summary(took: &mut [Duration]) -> Value {
    took.sort_unstable();
    let ms = |d: Duration| (d.as_secs_f64() * 10_000.0).round() / 10.0;
    json!({"p50": ms(took[took.len() / 2]), "max": ms(took[took.len() - 1])})
}

/// What `first_screen.py` measures on the console at `addr`.
fn first_screen(addr: &str) -> Result<Value, Box<dyn std::error::Error>> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser/first_screen.py");
    let out = std::process::Command::new("python3")
        .args([script, &format!("http://{addr}/"), TOKEN])
        .output()?;
    if !out.status.success() {
        return Err(format!("{script}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// A free port on 127.0.0.1.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
