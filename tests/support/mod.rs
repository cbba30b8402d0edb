//! Shared by the integration tests: reaching the machine's services,
//! starting private `redis-server` processes, re-running this test binary
//! as a child process, and golden files.
//!
//! Services are never skipped silently: without them a test prints why and
//! how to start them, and under `CI=true` it fails instead.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod skip;
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

/// Whether `redis-server` and `redis-cli` are installed, or reports why not.
pub(crate) fn redis_binaries() -> bool {
    let found = ["redis-server", "redis-cli"].iter().all(|bin| {
        Command::new(bin)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !found {
        unavailable(
            "redis-server / redis-cli",
            "Install them: apt-get install redis-server (or redis-tools).",
        );
    }
    found
}

/// A free TCP port on 127.0.0.1.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// A directory of its own under the system temp dir, removed on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "idem-{tag}-{}-{:x}",
            std::process::id(),
            idem::LeaseToken::generate(0).id() as u64
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `redis-server` of the test's own on a free loopback port, killed by PID
/// when dropped.
pub(crate) struct RedisServer {
    pub(crate) port: u16,
    args: Vec<String>,
    /// Extra `redis-cli` arguments to reach it (TLS, password).
    cli_args: Vec<String>,
    /// `--port` (plain) or `--tls-port`.
    port_flag: &'static str,
    dir: TempDir,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server with `extra` arguments (e.g. `--appendonly yes`).
    pub(crate) fn start(extra: &[&str]) -> RedisServer {
        let dir = TempDir::new("redis");
        let mut server = RedisServer {
            port: free_port(),
            args: extra.iter().map(|s| (*s).to_owned()).collect(),
            cli_args: Vec::new(),
            port_flag: "--port",
            dir,
            child: None,
        };
        server.spawn();
        server
    }

    /// A TLS-only server with a certificate for 127.0.0.1 signed by
    /// `certs`' CA, requiring `password`.
    pub(crate) fn start_tls(certs: &Certs, password: &str) -> RedisServer {
        let path = |f: &str| certs.dir.0.join(f).display().to_string();
        let mut server = RedisServer {
            port: free_port(),
            args: vec![
                "--port".into(),
                "0".into(),
                "--tls-cert-file".into(),
                path("server.crt"),
                "--tls-key-file".into(),
                path("server.key"),
                "--tls-ca-cert-file".into(),
                path("ca.crt"),
                "--tls-auth-clients".into(),
                "no".into(),
                "--requirepass".into(),
                password.into(),
            ],
            cli_args: vec![
                "--tls".into(),
                "--cacert".into(),
                path("ca.crt"),
                "-a".into(),
                password.into(),
                "--no-auth-warning".into(),
            ],
            port_flag: "--tls-port",
            dir: TempDir::new("redis-tls"),
            child: None,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        self.spawn_child();
        self.wait_ready();
    }

    fn spawn_child(&mut self) {
        let child = Command::new("redis-server")
            .arg(self.port_flag)
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir.0)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
    }

    fn wait_ready(&self) {
        for _ in 0..200 {
            let ok = Command::new("redis-cli")
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(&self.cli_args)
                .arg("PING")
                .output()
                .is_ok_and(|o| o.stdout.starts_with(b"PONG"));
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("redis-server on port {} did not come up", self.port);
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("running")
    }

    /// SIGKILL: the server dies without a goodbye.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and directory.
    pub(crate) fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Starts it again, returning as soon as it accepts connections: it
    /// may still be loading its data (and answer `-LOADING`).
    pub(crate) fn restart_without_waiting(&mut self) {
        self.kill();
        self.spawn_child();
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "redis-server on port {} did not accept connections",
            self.port
        );
    }

    /// Runs `redis-cli` against it.
    pub(crate) fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(&self.cli_args)
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A throwaway CA and a server certificate for 127.0.0.1 it signed, made
/// with the `openssl` command.
pub(crate) struct Certs {
    pub(crate) dir: TempDir,
}

impl Certs {
    /// `None` (reported) when `openssl` is missing.
    pub(crate) fn generate() -> Option<Certs> {
        let dir = TempDir::new("certs");
        let run = |args: &[&str]| {
            Command::new("openssl")
                .args(args)
                .current_dir(&dir.0)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !run(&["version"]) {
            unavailable("openssl", "Install it: apt-get install openssl.");
            return None;
        }
        std::fs::write(dir.0.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").expect("write ext");
        let steps = [
            "req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=idem-test-ca -keyout ca.key -out ca.crt",
            "req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr",
            "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -out server.crt -extfile san.ext",
        ];
        for step in steps {
            let args: Vec<&str> = step.split(' ').collect();
            assert!(run(&args), "openssl {step} failed");
        }
        Some(Certs { dir })
    }

    pub(crate) fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.dir.0.join("ca.crt")).expect("read ca.crt")
    }
}

/// A three-master Redis Cluster of the test's own.
pub(crate) struct RedisCluster {
    pub(crate) nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub(crate) fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::start(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    "2000",
                    "--appendonly",
                    "no",
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { nodes };
        for _ in 0..400 {
            if cluster
                .nodes
                .iter()
                .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
            {
                return cluster;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("the cluster did not reach cluster_state:ok");
    }

    pub(crate) fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
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
    let schema = format!("idem_test_{:x}", idem::LeaseToken::generate(0).id() as u64);
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
/// with TLS on the server certificate of `certs` and password (SCRAM)
/// authentication for user `idem`. Stopped (fast shutdown) when dropped.
#[cfg(feature = "postgres-tls")]
pub(crate) struct PgServer {
    pub(crate) port: u16,
    child: std::process::Child,
    _dir: TempDir,
}

#[cfg(feature = "postgres-tls")]
impl PgServer {
    /// `None` (reported) when PostgreSQL's server binaries or its
    /// `postgres` user are missing.
    pub(crate) fn start_tls(certs: &Certs, password: &str) -> Option<PgServer> {
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
        let port = free_port();
        let child = as_postgres("postgres")
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.0.display()))
            .args([
                "-c",
                "ssl=on",
                "-c",
                "ssl_cert_file=server.crt",
                "-c",
                "ssl_key_file=server.key",
            ])
            .args(["-c", "fsync=off"])
            .spawn()
            .expect("start postgres");
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

#[cfg(feature = "postgres-tls")]
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
