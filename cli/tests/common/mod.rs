//! What the gateway's tests share: the services and programs they need
//! (never skipped silently: under `CI=true` a missing one fails the test,
//! saying how to get it), and the pinned MCP servers they run.

#![allow(dead_code, unreachable_pub)]

#[path = "../../../tests/support/servers.rs"]
pub mod servers;
#[path = "../../../tests/support/skip.rs"]
pub mod skip;

use std::process::Stdio;

use serde_json::Value;

/// How long a test waits for what must happen before it gives up: a bound
/// on a hang, never a measure of speed.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// The official MCP filesystem server, pinned, as npx runs it.
pub const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

/// The MCP project's server that exercises every feature of the protocol,
/// pinned, as npx runs it.
pub const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// Whether `program` with `args` runs and succeeds, or reports `what` is
/// missing and `how` to get it.
pub fn runs(program: &str, args: &[&str], what: &str, how: &str) -> bool {
    let found = std::process::Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        skip::unavailable(what, how);
    }
    found
}

/// Whether Python has the MCP SDK the upstreams and clients are written
/// on, or reports why not.
pub fn python_sdk() -> bool {
    let how = "Install it: python3 -m pip install 'mcp==2.3.0' (.ci/run does).";
    runs(
        "python3",
        &["-c", "import mcp"],
        "Python 3 with the MCP Python SDK",
        how,
    )
}

/// Whether a headless browser can be driven: Debian's `chromium` and
/// `chromium-driver`, and Python's `selenium`; or reports why not.
pub fn browser() -> bool {
    let how = "Install them: apt-get install chromium chromium-driver and python3 -m pip install \
               'selenium==4.51.0' (.ci/run does).";
    runs(
        "chromedriver",
        &["--version"],
        "chromedriver (Debian's chromium-driver)",
        how,
    ) && runs(
        "python3",
        &["-c", "import selenium"],
        "Python 3 with selenium",
        how,
    )
}

/// Whether npx can run the MCP project's npm servers, or reports why not.
pub fn npx() -> bool {
    let how =
        "Install Node.js and npm (apt-get install nodejs npm); the npm registry must be reachable.";
    runs("npx", &["--version"], "npx (Node.js 20 and npm)", how)
}

/// A process started in a process group of its own, killed whole when
/// dropped (`npx` starts its server as a child of its own, which killing
/// `npx` alone would leave running).
pub struct Group(pub tokio::process::Child);

impl Group {
    /// Starts `command` in a group of its own.
    pub fn spawn(mut command: tokio::process::Command) -> Group {
        let child = command
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("start a process");
        Group(child)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let group = self.0.id().and_then(|id| i32::try_from(id).ok());
        if let Some(group) = group.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

/// Waits until `done`, at most [`PATIENCE`], or fails saying `what`.
pub async fn wait_for(done: impl Fn() -> bool, what: &str) {
    eventually(what, || {
        let result = if done() {
            Ok(())
        } else {
            Err("not yet".to_owned())
        };
        std::future::ready(result)
    })
    .await
}

/// Calls `attempt` until it succeeds, at most [`PATIENCE`] (a bound on a
/// hang, never a measure), or fails saying `what` and what the last
/// attempt said of itself.
pub async fn eventually<T, Fut>(what: &str, mut attempt: impl FnMut() -> Fut) -> T
where
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let started = std::time::Instant::now();
    loop {
        match attempt().await {
            Ok(done) => return done,
            Err(last) => assert!(started.elapsed() < PATIENCE, "{what}: {last}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The URL a gateway started with `--http` says it listens on (its
/// endpoint, `http://ADDR/mcp`), read from its stderr; the rest of its log
/// goes on to the test's stderr.
pub async fn listening_url(child: &mut tokio::process::Child) -> String {
    use tokio::io::AsyncBufReadExt;
    let stderr = child.stderr.take().expect("the gateway's stderr, piped");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next_line().await.expect("read stderr");
        let line = line.expect("the gateway said where it listens");
        if let Some(url) = line.strip_prefix("idem gateway: listening on ") {
            break url.to_owned();
        }
    };
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
        }
    });
    url
}

/// Waits until something listens on `port` of 127.0.0.1.
pub async fn listening(port: u16) {
    let address = format!("127.0.0.1:{port}");
    let what = format!("nothing listened on {port}");
    wait_for(|| std::net::TcpStream::connect(&address).is_ok(), &what).await;
}

/// Runs the Python script `script` with `args` (and `env`), which prints
/// one JSON object: that object. A script that fails, or takes longer than
/// three times [`PATIENCE`], fails the test.
pub async fn python_json(script: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .args(args)
        .envs(env.iter().copied())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(PATIENCE * 3, out)
        .await
        .expect("the script ends")
        .expect("run the script");
    assert!(out.status.success(), "{script} {args:?} failed");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// The event a webhook receiver got, as JSON, once its signature is
/// checked against `secret` (Standard Webhooks' headers).
pub fn signed_event(
    received: &idem::testing::Received,
    secret: &idem::notify::WebhookSecret,
) -> Value {
    let header = |name: &str| received.header(name).expect(name);
    let timestamp = header("webhook-timestamp").parse().expect("a timestamp");
    let signed = header("webhook-signature");
    assert!(
        secret.verify(header("webhook-id"), timestamp, &received.body, signed),
        "a signature that does not verify: {signed}"
    );
    received.json()
}

/// Runs an operator command (`idem ARGS`), which must succeed: what it
/// prints.
pub fn idem(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .output()
        .expect("run idem");
    assert!(
        out.status.success(),
        "idem {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Python upstream whose write tools append to a ledger file.
pub const LEDGER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/ledger.py");

/// `idem gateway` on a SQLite store in `dir`, with `extra` options, in
/// front of `ledger.py` keeping `dir/ledger.txt`: its command line.
pub fn ledger_gateway(dir: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let store = dir.join("records.sqlite").display().to_string();
    let ledger = dir.join("ledger.txt").display().to_string();
    [env!("CARGO_BIN_EXE_idem"), "gateway", "--store", &store]
        .iter()
        .chain(extra)
        .chain(&["--", "python3", LEDGER, &ledger])
        .map(|s| (*s).to_owned())
        .collect()
}

/// HTTP/1.1 by hand, so that a test can send exactly the headers a
/// browser would, or drop a response stream midway.
pub mod raw {
    use serde_json::Value;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// POSTs `message` to `http://addr/mcp` as an MCP client does, with
    /// `headers` besides: the response's head and, with `whole`, its body;
    /// without, the connection is dropped once the head has come.
    pub async fn post(
        addr: &str,
        headers: &[(&str, &str)],
        message: &Value,
        whole: bool,
    ) -> (String, String) {
        let mut all = vec![
            ("host", addr),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        all.extend_from_slice(headers);
        send(addr, "POST", &all, &message.to_string(), whole).await
    }

    /// Sends `method /mcp` to `addr` with exactly `headers` (and a length)
    /// and `body`: the response's head and, with `whole`, its body.
    pub async fn send(
        addr: &str,
        method: &str,
        headers: &[(&str, &str)],
        body: &str,
        whole: bool,
    ) -> (String, String) {
        send_to(addr, &format!("{method} /mcp"), headers, body, whole).await
    }

    /// [`send`] of `request` (a method and a path: `GET /api/pending`).
    pub async fn send_to(
        addr: &str,
        request: &str,
        headers: &[(&str, &str)],
        body: &str,
        whole: bool,
    ) -> (String, String) {
        let headers: String = headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        let request = format!(
            "{request} HTTP/1.1\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut received = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let n = match stream.read(&mut buffer).await {
                Ok(n) => n,
                // A server that answered and closed (`connection: close`)
                // may reset the connection rather than end it (Node does,
                // when it answered before it read the whole request): what
                // came is the answer.
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionReset
                        && received.windows(4).any(|w| w == b"\r\n\r\n") =>
                {
                    0
                }
                Err(e) => panic!("read: {e}"),
            };
            received.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&received);
            if let Some((head, _)) = text.split_once("\r\n\r\n")
                && !whole
            {
                return (head.to_owned(), String::new());
            }
            if n == 0 {
                let (head, body) = text.split_once("\r\n\r\n").expect("a response");
                return (head.to_owned(), body.to_owned());
            }
        }
    }

    /// The value of header `name` in `head`.
    pub fn header(head: &str, name: &str) -> Option<String> {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }

    /// The status code of a response's head.
    pub fn status(head: &str) -> u16 {
        head.split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("a status line: {head}"))
    }
}
