//! Shared by the integration tests: reaching the machine's services,
//! starting private `redis-server` processes (`servers.rs`), re-running
//! this test binary as a child process, and golden files.
//!
//! Services are never skipped silently: without them a test prints why and
//! how to start them, and under `CI=true` it fails instead.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

mod servers;
mod skip;
pub(crate) use servers::*;
pub(crate) use skip::unavailable;

/// The shared Redis the machine runs.
pub(crate) fn redis_url() -> String {
    std::env::var("IDEM_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

pub(crate) const START_REDIS: &str = "Start it with: redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save \"\" --appendonly no (or set IDEM_REDIS_URL).";

/// Connects a `RedisStore` to the shared Redis, or reports why not.
pub(crate) async fn shared_redis() -> Option<idem::RedisStore> {
    match idem::RedisStore::connect(&redis_url()).await {
        Ok(store) => Some(store),
        Err(e) => {
            unavailable(&format!("Redis at {} ({e})", redis_url()), START_REDIS);
            None
        }
    }
}

/// Sends `signal` (`STOP`, `CONT`, `KILL`) to `pid`.
pub(crate) fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// This test binary, run again to execute only `test` (a child-mode test
/// that does its work when `IDEM_CHILD` is set).
pub(crate) fn child(test: &str) -> Command {
    let exe = std::env::current_exe().expect("current exe");
    let mut cmd = Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("IDEM_CHILD", "1")
        .stdin(Stdio::null());
    cmd
}

/// Whether this process is a child started by [`child`].
pub(crate) fn is_child() -> bool {
    std::env::var_os("IDEM_CHILD").is_some()
}

/// The machine's PostgreSQL.
pub(crate) fn postgres_url() -> String {
    std::env::var("IDEM_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

pub(crate) const START_POSTGRES: &str = "Start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start (or set IDEM_POSTGRES_URL).";

/// A schema of the test's own in the machine's PostgreSQL, and a client to
/// drop it with; `None` (reported) when PostgreSQL is not reachable.
#[cfg(feature = "postgres")]
pub(crate) async fn postgres_schema() -> Option<(tokio_postgres::Client, String)> {
    let url = postgres_url();
    let (client, connection) = match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
        Ok(pair) => pair,
        Err(e) => {
            unavailable(&format!("PostgreSQL at {url} ({e})"), START_POSTGRES);
            return None;
        }
    };
    tokio::spawn(connection);
    let schema = format!(
        "idem_test_{:x}",
        idem::store::LeaseToken::generate(0).id() as u64
    );
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("CREATE SCHEMA");
    Some((client, schema))
}

/// Compares `actual` with the golden file `tests/golden/<name>.json`, or
/// rewrites it under `IDEM_BLESS=1` (then read the diff).
pub(crate) fn golden(name: &str, actual: &serde_json::Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(actual).expect("json") + "\n";
    if std::env::var_os("IDEM_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, &text).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; create it with IDEM_BLESS=1", path.display()));
    assert!(
        expected == text,
        "{name} differs from {}; if the change is intended, rerun with IDEM_BLESS=1\n--- expected\n{expected}\n--- actual\n{text}",
        path.display()
    );
}

/// The server address in a `scheme://[user@]host:port[/..]` URL.
pub(crate) fn url_server(url: &str) -> Option<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let host_port = authority.rsplit('@').next()?;
    host_port.to_socket_addrs().ok()?.next()
}

/// `url` with its host and port replaced by `addr` (a proxy in front of it).
pub(crate) fn url_via(url: &str, addr: std::net::SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let user = match authority.rsplit_once('@') {
        Some((user, _)) => format!("{user}@"),
        None => String::new(),
    };
    format!("{scheme}://{user}{addr}{path}")
}

/// A PostgreSQL server of the test's own: a cluster made by `initdb` in a
/// temporary directory, run as the `postgres` user on a free loopback port,
/// with password (SCRAM) authentication for the superuser `idem`, and TLS
/// on the server certificate of `certs` for [`start_tls`](Self::start_tls).
/// Stopped (fast shutdown) when dropped. For what a test may not do to the
/// machine's PostgreSQL: fill a disk, force checkpoints, crash it.
#[cfg(feature = "postgres")]
pub(crate) struct PgServer {
    pub(crate) port: u16,
    child: std::process::Child,
    _dir: TempDir,
}

#[cfg(feature = "postgres")]
impl PgServer {
    /// A server with TLS; `None` (reported) when PostgreSQL's server
    /// binaries or its `postgres` user are missing.
    #[cfg(feature = "postgres-tls")]
    pub(crate) fn start_tls(certs: &Certs, password: &str) -> Option<PgServer> {
        PgServer::start_with(Some(certs), password)
    }

    /// A server without TLS, as [`start_tls`](Self::start_tls).
    pub(crate) fn start(password: &str) -> Option<PgServer> {
        PgServer::start_with(None, password)
    }

    /// A plain URL of database `postgres` as user `idem`.
    pub(crate) fn url(&self, password: &str) -> String {
        format!(
            "postgres://idem:{password}@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    fn start_with(certs: Option<&Certs>, password: &str) -> Option<PgServer> {
        use std::os::unix::process::CommandExt;
        let how = "Install PostgreSQL's server (apt-get install postgresql): the test runs initdb as user postgres.";
        let bindir = Command::new("pg_config").arg("--bindir").output();
        let ids = ["-u", "-g"].map(|flag| {
            let out = Command::new("id").args([flag, "postgres"]).output().ok()?;
            String::from_utf8(out.stdout)
                .ok()?
                .trim()
                .parse::<u32>()
                .ok()
        });
        let (Ok(bindir), [Some(uid), Some(gid)]) = (bindir, ids) else {
            unavailable("PostgreSQL's server binaries and user postgres", how);
            return None;
        };
        let bin = PathBuf::from(String::from_utf8_lossy(&bindir.stdout).trim());
        let dir = TempDir::new("pg");
        let data = dir.0.join("data");
        std::fs::write(dir.0.join("pw"), password).expect("write the password file");
        let chown = |path: &std::path::Path| std::os::unix::fs::chown(path, Some(uid), Some(gid));
        chown(&dir.0).expect("chown");
        chown(&dir.0.join("pw")).expect("chown");
        let as_postgres = |program: &str| {
            let mut cmd = Command::new(bin.join(program));
            cmd.uid(uid)
                .gid(gid)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            cmd
        };
        let initdb = as_postgres("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "idem",
                "--auth=scram-sha-256",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .arg(format!("--pwfile={}", dir.0.join("pw").display()))
            .status();
        if !initdb.is_ok_and(|s| s.success()) {
            unavailable("initdb", how);
            return None;
        }
        let port = free_port();
        let mut server = as_postgres("postgres");
        server
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.0.display()))
            .args(["-c", "fsync=off"]);
        if let Some(certs) = certs {
            for file in ["server.crt", "server.key"] {
                let to = data.join(file);
                std::fs::copy(certs.dir.0.join(file), &to).expect("copy the certificate");
                chown(&to).expect("chown");
            }
            std::fs::set_permissions(
                data.join("server.key"),
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            )
            .expect("chmod the key");
            server.args([
                "-c",
                "ssl=on",
                "-c",
                "ssl_cert_file=server.crt",
                "-c",
                "ssl_key_file=server.key",
            ]);
        }
        let child = server.spawn().expect("start postgres");
        let server = PgServer {
            port,
            child,
            _dir: dir,
        };
        for _ in 0..200 {
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
                .status();
            if ready.is_ok_and(|s| s.success()) {
                return Some(server);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the test's PostgreSQL did not come up on port {port}");
    }
}

#[cfg(feature = "postgres")]
impl Drop for PgServer {
    fn drop(&mut self) {
        // SIGINT: a fast shutdown, so no backend or shared memory outlives it.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// Every tracing event of this thread from `level` up, captured as text
/// for as long as the guard lives (tests that read their logs; each alone
/// in its test binary, since tracing caches per-callsite interest
/// process-wide).
pub(crate) struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    pub(crate) fn capture(level: tracing::Level) -> (Logs, tracing::subscriber::DefaultGuard) {
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let writer = LogWriter(buffer.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .without_time()
            .with_writer(move || writer.clone())
            .finish();
        (Logs(buffer), tracing::subscriber::set_default(subscriber))
    }

    /// What was logged so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("lock").clone()).expect("UTF-8 logs")
    }
}

#[derive(Clone)]
struct LogWriter(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
