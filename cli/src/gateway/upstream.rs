//! The gateway's MCP client to its upstream server: a child process it
//! starts and talks to over stdio, started again when it has died (at the
//! next call or listing), and what became of each call sent to it, told
//! apart by whether the call may have run.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorData, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ServiceError, ServiceExt};
use tokio::process::Command;
use tokio::sync::Mutex;

/// One running connection to the upstream.
type Connection = RunningService<RoleClient, ()>;

/// The upstream server, started on demand.
pub(crate) struct Upstream {
    /// The program and its arguments.
    command: Vec<String>,
    current: Mutex<Option<Arc<Connection>>>,
}

/// Why a call got no result from the upstream.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The call was never delivered (the upstream could not be started,
    /// or the request could not be written to it): it did not run.
    NotSent(String),
    /// The upstream answered with a JSON-RPC error (an unknown tool,
    /// arguments it refuses): it did not run the tool.
    Refused(ErrorData),
    /// The call was delivered and no answer came: the upstream died, or
    /// did not answer within the call's timeout. It may or may not have
    /// run.
    Lost(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotSent(why) => write!(f, "the upstream server was not reached: {why}"),
            Failure::Refused(e) => write!(f, "the upstream server refused the call: {}", e.message),
            Failure::Lost(why) => write!(
                f,
                "the upstream server gave no answer ({why}), so whether the call took effect is unknown"
            ),
        }
    }
}

impl Upstream {
    /// The upstream started as `command` (a program and its arguments),
    /// once it is first needed.
    pub(crate) fn new(command: Vec<String>) -> Upstream {
        Upstream {
            command,
            current: Mutex::new(None),
        }
    }

    /// The upstream's tools, all pages.
    pub(crate) async fn tools(&self) -> Result<Vec<Tool>, String> {
        let connection = self.connection().await?;
        connection
            .list_all_tools()
            .await
            .map_err(|e| format!("the upstream server did not list its tools: {e}"))
    }

    /// The connection's server name and instructions, as it initialized.
    pub(crate) async fn instructions(&self) -> Option<String> {
        let connection = self.connection().await.ok()?;
        connection.peer_info()?.instructions.clone()
    }

    /// Calls a tool upstream, waiting at most `timeout` for the answer.
    pub(crate) async fn call(
        &self,
        params: CallToolRequestParams,
        timeout: Duration,
    ) -> Result<CallToolResult, Failure> {
        let connection = self.connection().await.map_err(Failure::NotSent)?;
        match tokio::time::timeout(timeout, connection.call_tool(params)).await {
            Err(_) => Err(Failure::Lost(format!("no answer within {timeout:?}"))),
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(e))) => Err(Failure::Refused(e)),
            Ok(Err(ServiceError::TransportSend(e))) => Err(Failure::NotSent(e.to_string())),
            Ok(Err(e)) => Err(Failure::Lost(e.to_string())),
        }
    }

    /// The live connection: the current one, or a new one if there is
    /// none yet or the upstream has gone.
    async fn connection(&self) -> Result<Arc<Connection>, String> {
        let mut current = self.current.lock().await;
        if let Some(live) = current.as_ref().filter(|c| !c.is_transport_closed()) {
            return Ok(live.clone());
        }
        if current.take().is_some() {
            tracing::warn!(command = ?self.command, "the upstream server has gone; starting it again");
        }
        let started = Arc::new(self.start().await?);
        *current = Some(started.clone());
        Ok(started)
    }

    /// Starts the upstream and initializes an MCP session with it.
    async fn start(&self) -> Result<Connection, String> {
        let (program, args) = self
            .command
            .split_first()
            .ok_or("no upstream command was given")?;
        let mut command = Command::new(program);
        command.args(args);
        let transport = TokioChildProcess::new(command)
            .map_err(|e| format!("cannot start the upstream server `{program}`: {e}"))?;
        ().serve(transport)
            .await
            .map_err(|e| format!("the upstream server `{program}` did not initialize: {e}"))
    }
}
