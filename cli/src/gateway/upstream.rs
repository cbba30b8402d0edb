//! The gateway's MCP client to its upstream server: a child process it
//! starts and talks to over stdio, or a streamable HTTP endpoint, connected
//! again when the connection has gone (at the next call or listing); what
//! became of each call sent to it, told apart by whether the call may have
//! run; and a signal when its tools may have changed (it said so, or it
//! was connected again).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorData, SubscriptionFilter, Tool};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceError, ServiceExt};
use tokio::process::Command;
use tokio::sync::{Mutex, Notify};

/// One running connection to the upstream.
type Connection = RunningService<RoleClient, Watcher>;

/// A connection being made: starting the upstream, initializing.
type Serving = std::pin::Pin<
    Box<dyn Future<Output = Result<Connection, rmcp::service::ClientInitializeError>> + Send>,
>;

/// Where the upstream server is.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// A program and its arguments, started as a child process, spoken to
    /// over its stdio.
    Command(Vec<String>),
    /// A streamable HTTP endpoint.
    Url(String),
}

/// The upstream server, connected to on demand.
pub(crate) struct Upstream {
    source: Source,
    /// How long it has to start and initialize, or to acknowledge a
    /// subscription.
    patience: Duration,
    current: Mutex<Option<Arc<Connection>>>,
    /// Told when the upstream's tools may have changed.
    changed: Arc<Notify>,
}

/// The gateway as the upstream's client: it listens for a change of the
/// upstream's tools (sent outside a subscription, as servers on protocols
/// before 2026-07-28 do).
#[derive(Clone)]
struct Watcher {
    changed: Arc<Notify>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }
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
    /// The upstream at `source`, connected to once it is first needed,
    /// given `patience` to start and initialize.
    pub(crate) fn new(source: Source, patience: Duration) -> Upstream {
        Upstream {
            source,
            patience,
            current: Mutex::new(None),
            changed: Arc::new(Notify::new()),
        }
    }

    /// Told (once for any number of changes until it is awaited) when the
    /// upstream's tools may have changed: it said so, or it was started
    /// again.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
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
        let failure = match tokio::time::timeout(timeout, connection.call_tool(params)).await {
            Ok(Ok(result)) => return Ok(result),
            Ok(Err(ServiceError::McpError(e))) => return Err(Failure::Refused(e)),
            Err(_) => Failure::Lost(format!("no answer within {timeout:?}")),
            // A request that could not be written to a child's stdin never
            // reached it; an HTTP request that failed may have.
            Ok(Err(ServiceError::TransportSend(e))) if self.is_child() => {
                Failure::NotSent(e.to_string())
            }
            Ok(Err(e)) => Failure::Lost(e.to_string()),
        };
        // Whatever went wrong with the connection, the next call makes a
        // new one.
        self.forget(&connection).await;
        Err(failure)
    }

    fn is_child(&self) -> bool {
        matches!(self.source, Source::Command(_))
    }

    /// Drops `connection` if it is still the current one.
    async fn forget(&self, connection: &Arc<Connection>) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, connection)) {
            current.take();
        }
    }

    /// The live connection: the current one, or a new one if there is
    /// none yet or the upstream has gone.
    async fn connection(&self) -> Result<Arc<Connection>, String> {
        let mut current = self.current.lock().await;
        if let Some(live) = current.as_ref().filter(|c| !c.is_transport_closed()) {
            return Ok(live.clone());
        }
        let again = current.take().is_some();
        if again {
            tracing::warn!(upstream = ?self.source, "the connection to the upstream server has gone; connecting again");
        }
        let started = Arc::new(self.start().await?);
        *current = Some(started.clone());
        self.listen(&started).await;
        if again {
            self.changed.notify_one();
        }
        Ok(started)
    }

    /// Subscribes to the upstream's tool list changes, on MCP 2026-07-28;
    /// an upstream on an older protocol sends them unasked, and one that
    /// never changes its tools refuses (nothing to follow then).
    async fn listen(&self, connection: &Connection) {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let listening = tokio::time::timeout(self.patience, connection.listen(filter));
        let mut subscription = match listening.await {
            Ok(Ok(subscription)) => subscription,
            Err(_) => {
                tracing::warn!("the upstream did not acknowledge a subscription to its tool list");
                return;
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "the upstream offers no subscription to its tool list");
                return;
            }
        };
        let changed = self.changed.clone();
        tokio::spawn(async move {
            while let Ok(Some(_)) = subscription.next().await {
                changed.notify_one();
            }
        });
    }

    /// Starts the upstream (or connects to it) and initializes an MCP
    /// session with it.
    async fn start(&self) -> Result<Connection, String> {
        let watcher = Watcher {
            changed: self.changed.clone(),
        };
        let (serving, name) = match &self.source {
            Source::Command(command) => {
                let (program, args) = command
                    .split_first()
                    .ok_or("no upstream command was given")?;
                let mut command = Command::new(program);
                // Killed with its connection, whether the gateway drops it
                // (a timeout, a restart) or exits.
                command.args(args).kill_on_drop(true);
                let transport = TokioChildProcess::new(command)
                    .map_err(|e| format!("cannot start the upstream server `{program}`: {e}"))?;
                let serving: Serving = Box::pin(watcher.serve(transport));
                (serving, format!("`{program}`"))
            }
            Source::Url(url) => {
                let transport = StreamableHttpClientTransport::from_uri(url.clone());
                let serving: Serving = Box::pin(watcher.serve(transport));
                (serving, format!("at {url}"))
            }
        };
        match tokio::time::timeout(self.patience, serving).await {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(e)) => Err(format!(
                "the upstream server {name} did not initialize: {e}"
            )),
            // The transport is dropped with the future: a child is killed.
            Err(_) => Err(format!(
                "the upstream server {name} did not initialize within {:?}",
                self.patience
            )),
        }
    }
}
