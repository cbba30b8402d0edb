//! A webhook receiver for tests: an HTTP/1.1 server on a loopback port
//! that keeps every request it is sent and answers each as it is told
//! (a status, after a delay), so that a test can check what a registry's
//! webhooks sent, and how it fares against a receiver that is slow or
//! failing. One request per connection (it answers `Connection: close`).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The largest request a [`Receiver`] reads.
const MAX_REQUEST: usize = 1 << 20;

/// One request a [`Receiver`] was sent.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its headers, names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: Vec<u8>,
}

impl Received {
    /// The value of header `name` (lower case), if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// How a [`Receiver`] answers.
#[derive(Debug, Clone, Copy)]
struct Answer {
    status: u16,
    delay: Duration,
}

/// A webhook receiver on `127.0.0.1`; stopped when dropped.
///
/// ```
/// # idem_runtime::testing::run(async {
/// use idem_runtime::testing::Receiver;
///
/// let receiver = Receiver::start().await;
/// receiver.answer(503);
/// assert!(receiver.url().starts_with("http://127.0.0.1:"));
/// assert!(receiver.received().is_empty());
/// # });
/// ```
pub struct Receiver {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
    answer: Arc<Mutex<Answer>>,
    server: JoinHandle<()>,
}

impl Receiver {
    /// A receiver that answers 200 at once.
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let url = format!(
            "http://{}/hooks",
            listener.local_addr().expect("its address")
        );
        let received = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(Mutex::new(Answer {
            status: 200,
            delay: Duration::ZERO,
        }));
        let server = tokio::spawn(serve(listener, received.clone(), answer.clone()));
        Receiver {
            url,
            received,
            answer,
            server,
        }
    }

    /// Where to send webhooks.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answers every request from now on with `status`.
    pub fn answer(&self, status: u16) {
        self.answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .status = status;
    }

    /// Answers every request from now on only after `delay`.
    pub fn delay(&self, delay: Duration) {
        self.answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .delay = delay;
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until at least `n` requests have come, for at most
    /// `within`; every request received then.
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Received> {
        let until = tokio::time::Instant::now() + within;
        loop {
            let received = self.received();
            if received.len() >= n || tokio::time::Instant::now() >= until {
                return received;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve(
    listener: TcpListener,
    received: Arc<Mutex<Vec<Received>>>,
    answer: Arc<Mutex<Answer>>,
) {
    while let Ok((stream, _)) = listener.accept().await {
        let (received, answer) = (received.clone(), answer.clone());
        tokio::spawn(async move {
            let _ = one_request(stream, &received, &answer).await;
        });
    }
}

/// Reads one request off `stream`, keeps it, and answers it.
async fn one_request(
    mut stream: TcpStream,
    received: &Mutex<Vec<Received>>,
    answer: &Mutex<Answer>,
) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buffer.len() > MAX_REQUEST {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let headers: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    received
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Received { headers, body });
    let Answer { status, delay } = *answer.lock().unwrap_or_else(PoisonError::into_inner);
    tokio::time::sleep(delay).await;
    let response =
        format!("HTTP/1.1 {status} Answer\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
