//! The gateway on stdio: the client started it, and speaks to it one
//! JSON-RPC message a line (MCP's stdio transport). One client, one
//! session, one upstream connection, started once: the client's first
//! request starts it and is the gateway's check at start (the tools
//! listed and fitted to the configuration before the client is answered;
//! `Session::first_request`). The gateway ends when the client closes its
//! stdin, once the writes in flight are answered and recorded.

use std::sync::Arc;

use idem::mcp::{Binding, Caller};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::jsonrpc::{self, code};
use super::link::{Downstream, Link, Sink, Source};
use super::session::{Session, Shared};

/// The client's stdout: every message goes there, in order.
struct Stdout(mpsc::UnboundedSender<Value>);

impl Downstream for Stdout {
    fn deliver(&self, message: Value, _related: Option<&Value>) {
        let _ = self.0.send(message);
    }
}

/// Serves one client on stdio, until it goes.
pub(super) async fn serve(
    shared: Arc<Shared>,
    source: Source,
    binding: Binding,
) -> Result<(), String> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    tokio::spawn(async move {
        let mut stdout = output();
        while let Some(message) = rx.recv().await {
            let mut line = serde_json::to_vec(&message).unwrap_or_default();
            line.push(b'\n');
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let sink: Sink = Arc::new(Stdout(tx));
    let link = Link::new(source.clone(), shared.patience, Some(sink.clone()));
    let session = Session::new(shared.clone(), link, binding);
    let (origin, caller) = (session.origin(), Caller::connection());
    // The first request starts the upstream and is the gateway's check at
    // start; the client's `notifications/initialized` after an
    // `initialize` it made has been sent up already.
    let mut first = true;
    let mut initialized_sent = false;
    let mut lines = BufReader::new(input()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        let messages = match serde_json::from_str::<Value>(&line) {
            Ok(Value::Array(batch)) => batch,
            Ok(message) => vec![message],
            Err(e) => {
                let refused = jsonrpc::error(Value::Null, code::PARSE_ERROR, &e.to_string());
                sink.deliver(refused, None);
                continue;
            }
        };
        for message in messages {
            let method = jsonrpc::method(&message);
            if first && jsonrpc::kind(&message) == Some(jsonrpc::Kind::Request) {
                first = false;
                initialized_sent = method == Some("initialize");
                let checked = session
                    .first_request(message, sink.clone(), caller.clone())
                    .await;
                if checked.is_err() {
                    session.close().await;
                    return checked;
                }
                continue;
            }
            if initialized_sent && method == Some("notifications/initialized") {
                initialized_sent = false;
                continue;
            }
            session
                .handle(message, origin, sink.clone(), caller.clone())
                .await;
        }
    }
    // The client has gone: what is still to say to it is dropped. One that
    // asked nothing still gets the check at start, for its exit status.
    session.close().await;
    if first {
        super::start::probe(&source, &shared.settings, shared.patience).await?;
    }
    Ok(())
}

/// The process's standard input, read by the runtime's own poller when it
/// is a pipe or a socket (how MCP clients start a server: a pipe, or a
/// socket pair from Node's `child_process`); else tokio's `stdin()`, which
/// hands every read to a blocking thread, one more wake-up a message.
fn input() -> Box<dyn AsyncRead + Unpin + Send> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        polled::polled::<dyn AsyncRead + Unpin + Send>(
            std::io::stdin().as_fd(),
            |fd| {
                Ok(Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(
                    fd,
                )?))
            },
            |socket| Box::new(socket),
            || Box::new(tokio::io::stdin()),
        )
    }
    #[cfg(not(unix))]
    {
        Box::new(tokio::io::stdin())
    }
}

/// The process's standard output, as [`input`] reads its input.
fn output() -> Box<dyn AsyncWrite + Unpin + Send> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        polled::polled::<dyn AsyncWrite + Unpin + Send>(
            std::io::stdout().as_fd(),
            |fd| Ok(Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?)),
            |socket| Box::new(socket),
            || Box::new(tokio::io::stdout()),
        )
    }
    #[cfg(not(unix))]
    {
        Box::new(tokio::io::stdout())
    }
}

/// Standard streams that the runtime can poll: pipes and sockets (Unix).
#[cfg(unix)]
mod polled {
    use std::os::fd::{BorrowedFd, OwnedFd};
    use std::os::unix::fs::FileTypeExt;

    /// A standard stream as the runtime polls it: `pipe` of it if it is a
    /// pipe, `socket` of it if it is a socket, else `blocking()`.
    pub(super) fn polled<T: ?Sized>(
        fd: BorrowedFd<'_>,
        pipe: impl FnOnce(OwnedFd) -> std::io::Result<Box<T>>,
        socket: impl FnOnce(tokio::net::UnixStream) -> Box<T>,
        blocking: impl FnOnce() -> Box<T>,
    ) -> Box<T> {
        match endpoint(fd) {
            Some(Endpoint::Pipe(fd)) => pipe(fd).unwrap_or_else(|_| blocking()),
            Some(Endpoint::Socket(stream)) => socket(stream),
            None => blocking(),
        }
    }

    /// What a standard stream is, when the runtime can poll it.
    enum Endpoint {
        Pipe(OwnedFd),
        Socket(tokio::net::UnixStream),
    }

    /// `fd` as a pipe or a socket of its own (a duplicate), if it is one.
    fn endpoint(fd: BorrowedFd<'_>) -> Option<Endpoint> {
        let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
        let kind = file.metadata().ok()?.file_type();
        if kind.is_fifo() {
            return Some(Endpoint::Pipe(file.into()));
        }
        if kind.is_socket() {
            let stream = std::os::unix::net::UnixStream::from(OwnedFd::from(file));
            stream.set_nonblocking(true).ok()?;
            return tokio::net::UnixStream::from_std(stream)
                .ok()
                .map(Endpoint::Socket);
        }
        None
    }
}
