//! The upstream as a child process, spoken to over its stdio: one JSON-RPC
//! message a line each way (MCP's stdio transport). Its stderr is the
//! gateway's. It runs in a process group of its own, killed whole when the
//! connection is closed or dropped: a launcher (`npx`, a shell script)
//! takes its server with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::Mutex;

use super::inbox::{Inbound, Inbox};
use crate::gateway::metrics::Open;

/// A running upstream process.
pub(super) struct Child {
    stdin: Mutex<ChildStdin>,
    /// Its stdout is still open.
    alive: Arc<AtomicBool>,
    process: std::sync::Mutex<Option<tokio::process::Child>>,
    _open: Open,
}

impl Child {
    /// Starts `command` (a program and its arguments); what it writes
    /// goes to `inbox`.
    pub(super) fn start(command: &[String], inbox: Inbox) -> Result<Child, String> {
        let (program, args) = command
            .split_first()
            .ok_or("no upstream command was given")?;
        let mut process = Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the upstream server `{program}`: {e}"))?;
        let stdin = process.stdin.take().ok_or("the upstream's stdin")?;
        let stdout = process.stdout.take().ok_or("the upstream's stdout")?;
        let alive = Arc::new(AtomicBool::new(true));
        let reading = alive.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(&line) {
                    Ok(Value::Array(batch)) => {
                        for message in batch {
                            let _ = inbox.send(Inbound::Message(message, None));
                        }
                    }
                    Ok(message) => {
                        let _ = inbox.send(Inbound::Message(message, None));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, %line, "the upstream wrote a line that is not JSON")
                    }
                }
            }
            reading.store(false, Ordering::Relaxed);
        });
        Ok(Child {
            stdin: Mutex::new(stdin),
            alive,
            process: std::sync::Mutex::new(Some(process)),
            _open: Open::upstream(),
        })
    }

    /// Writes `message` as a line; an error means it was not delivered.
    pub(super) async fn send(&self, message: &Value) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let written = match stdin.write_all(&line).await {
            Ok(()) => stdin.flush().await,
            Err(e) => Err(e),
        };
        written.map_err(|e| {
            // A pipe that cannot be written is a process that has gone.
            self.alive.store(false, Ordering::Relaxed);
            e.to_string()
        })
    }

    pub(super) fn alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// Kills the process and its group.
    pub(super) fn close(&self) {
        self.alive.store(false, Ordering::Relaxed);
        let process = self.process.lock().map(|mut p| p.take());
        if let Ok(Some(mut process)) = process {
            // Its group is its pid (`process_group(0)`).
            let group = process.id().and_then(|id| i32::try_from(id).ok());
            if let Some(group) = group.and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            let _ = process.start_kill();
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.close();
    }
}
