//! The gateway on stdio: the client started it, and speaks to it one
//! JSON-RPC message a line (MCP's stdio transport). One client, one
//! session, one upstream connection; the gateway ends when the client
//! closes its stdin, once the writes in flight are answered and recorded.

use std::sync::Arc;

use idem::mcp::{Binding, Caller};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
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
        let mut stdout = tokio::io::stdout();
        while let Some(message) = rx.recv().await {
            let mut line = serde_json::to_vec(&message).unwrap_or_default();
            line.push(b'\n');
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let sink: Sink = Arc::new(Stdout(tx));
    let link = Link::new(source, shared.patience, Some(sink.clone()));
    let session = Session::new(shared, link, binding);
    let (origin, caller) = (session.origin(), Caller::connection());
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
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
            session
                .handle(message, origin, sink.clone(), caller.clone())
                .await;
        }
    }
    // The client has gone: what is still to say to it is dropped.
    session.close().await;
    Ok(())
}
