//! A minimal Redis client with explicit pipelining, for one measurement
//! only (`--store redis-floor-pipe`): what the floor's two commands cost a
//! client that does nothing else, beside the `redis` crate's multiplexed
//! connection (`--store redis-floor`). One connection; a writer task sends
//! every command queued since its last write in one write, and a reader
//! task answers the callers in order. No reconnection, no timeouts, no
//! RESP3, replies only of the kinds `SET` gives: not a client to build on.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// A reply to `SET`: `OK`, nil, a string (`GET`'s, read and dropped), or
/// an error's text.
pub(crate) enum Reply {
    Ok,
    Nil,
    Bulk,
    Error(String),
}

type Waiter = oneshot::Sender<Reply>;

/// The connection: commands in, replies out, in order.
pub(crate) struct Pipe {
    commands: mpsc::UnboundedSender<(Vec<u8>, Waiter)>,
}

impl Pipe {
    pub(crate) async fn connect(addr: &str) -> std::io::Result<Pipe> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (read, mut write) = stream.into_split();
        let waiting: Arc<Mutex<VecDeque<Waiter>>> = Arc::default();
        let (commands, mut queue) = mpsc::unbounded_channel::<(Vec<u8>, Waiter)>();
        let writer_waiting = waiting.clone();
        tokio::spawn(async move {
            let mut out = Vec::with_capacity(64 * 1024);
            while let Some((command, waiter)) = queue.recv().await {
                out.clear();
                let mut batch = vec![(command, waiter)];
                while let Ok(next) = queue.try_recv() {
                    batch.push(next);
                }
                {
                    // Waiters join the queue before their bytes are sent.
                    let mut waiting = writer_waiting.lock().unwrap();
                    for (command, waiter) in batch {
                        out.extend_from_slice(&command);
                        waiting.push_back(waiter);
                    }
                }
                if write.write_all(&out).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(async move {
            let mut read = BufReader::with_capacity(64 * 1024, read);
            while let Ok(reply) = read_reply(&mut read).await {
                let waiter = waiting.lock().unwrap().pop_front();
                if let Some(waiter) = waiter {
                    let _ = waiter.send(reply);
                }
            }
        });
        Ok(Pipe { commands })
    }

    /// Sends `args` as one command; its reply.
    pub(crate) async fn send(&self, args: &[&[u8]]) -> Result<Reply, String> {
        let mut command = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
        command.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            let mut len = itoa::Buffer::new();
            command.push(b'$');
            command.extend_from_slice(len.format(arg.len()).as_bytes());
            command.extend_from_slice(b"\r\n");
            command.extend_from_slice(arg);
            command.extend_from_slice(b"\r\n");
        }
        let (waiter, reply) = oneshot::channel();
        self.commands
            .send((command, waiter))
            .map_err(|_| "the connection is closed".to_owned())?;
        reply
            .await
            .map_err(|_| "the connection is closed".to_owned())
    }
}

/// One reply of the kinds `SET` gives.
async fn read_reply<R: AsyncBufReadExt + Unpin>(read: &mut R) -> std::io::Result<Reply> {
    let mut line = Vec::with_capacity(32);
    read.read_until(b'\n', &mut line).await?;
    let text = line
        .strip_suffix(b"\r\n")
        .ok_or(std::io::ErrorKind::UnexpectedEof)?;
    let bad = || std::io::Error::from(std::io::ErrorKind::InvalidData);
    match text.split_first().ok_or_else(bad)? {
        (b'+', _) => Ok(Reply::Ok),
        (b'-', message) => Ok(Reply::Error(String::from_utf8_lossy(message).into_owned())),
        (b'_', _) => Ok(Reply::Nil),
        (b'$', len) if len == b"-1" => Ok(Reply::Nil),
        (b'$', len) => {
            let len: usize = std::str::from_utf8(len)
                .ok()
                .and_then(|l| l.parse().ok())
                .ok_or_else(bad)?;
            let mut value = vec![0; len + 2];
            read.read_exact(&mut value).await?;
            Ok(Reply::Bulk)
        }
        _ => Err(bad()),
    }
}
