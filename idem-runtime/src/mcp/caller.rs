//! Who vouches for the caller of an MCP call, and so the run and the tenant
//! the call is made in (the module docs' "Runs and callers"): one named
//! policy per kind of caller, and for each a tenant and a run, computed
//! from what the request shows and nothing else.

/// What a run-scoped write tool called over HTTP without a session or a
/// run id does (see [Runs and callers](crate::mcp#runs-and-callers)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StatelessWrites {
    /// The caller is the scope: the call runs in the one run of its
    /// principal, or of all anonymous callers; a repeat is replayed.
    #[default]
    CallerScope,
    /// Refused with an error result that asks for a run id or a session;
    /// nothing runs.
    Refuse,
}

/// Who vouches for the caller of a `tools/call`, for a server that reads
/// the protocol itself (a gateway) and binds its calls with
/// [`Binding::bind_parts`](super::Binding::bind_parts); rmcp's handlers
/// get it from the request through [`Binding::bind`](super::Binding::bind).
/// See [Runs and callers](crate::mcp#runs-and-callers) for what each
/// caller's calls are bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub(super) CallerKind);

impl Caller {
    /// The client holds the only connection (stdio, or any byte stream):
    /// it started this process.
    pub fn connection() -> Caller {
        Caller(CallerKind::Connection)
    }

    /// A streamable HTTP request: the principal the server authenticated,
    /// if any, and the MCP session it belongs to, if it is in one that this
    /// server issued and checked is live (never a session id only read
    /// from a header).
    #[cfg(feature = "mcp-http")]
    pub fn http(principal: Option<String>, session_id: Option<&str>) -> Caller {
        let session = session_id
            .filter(|id| !id.is_empty())
            .map(|id| format!("mcp-session-{id}"));
        Caller(match (principal, session) {
            (Some(principal), session) => CallerKind::Principal { principal, session },
            (None, Some(session)) => CallerKind::Session(session),
            (None, None) => CallerKind::Anonymous,
        })
    }
}

/// What a request shows of its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CallerKind {
    /// stdio or any byte stream: the client started this process, or holds
    /// its only connection.
    Connection,
    /// Streamable HTTP, a principal named by the server's hook; `session`
    /// when the request is in an MCP session rmcp checked.
    #[cfg(feature = "mcp-http")]
    Principal {
        principal: String,
        session: Option<String>,
    },
    /// Streamable HTTP, no principal, in an MCP session rmcp checked (its
    /// `Mcp-Session-Id`).
    #[cfg(feature = "mcp-http")]
    Session(String),
    /// Streamable HTTP, no principal and no session.
    #[cfg(feature = "mcp-http")]
    Anonymous,
}

/// The run of every stateless call its caller's policy scopes to the
/// caller: one per principal (by tenant), one for all anonymous callers.
#[cfg(feature = "mcp-http")]
const CALLER_RUN: &str = "mcp-caller";

#[cfg(feature = "mcp-http")]
const NO_RUN: &str = "this request belongs to no MCP session and names no run in \
                      `_meta[\"idem/run_id\"]`, and this server does not scope such \
                      calls to their caller";

#[cfg(feature = "mcp-http")]
const UNBOUND_RUN: &str = "the run it names in `_meta[\"idem/run_id\"]` cannot be bound to a \
                           caller: the request belongs to no MCP session and the server \
                           authenticated no principal. Use a session, or a server that \
                           authenticates its callers";

impl CallerKind {
    /// The call's tenant: the principal, else the server's own
    /// (`with_tenant`).
    pub(super) fn tenant(&self, server_tenant: Option<&str>) -> Option<String> {
        match self {
            #[cfg(feature = "mcp-http")]
            CallerKind::Principal { principal, .. } => Some(principal.clone()),
            _ => server_tenant.map(str::to_owned),
        }
    }

    /// The call's run, given the run it names in `_meta` and the run of
    /// its connection; or why it has none that a run-scoped write could
    /// use.
    pub(super) fn run(
        &self,
        named: Option<&str>,
        connection_run: &str,
        stateless: StatelessWrites,
    ) -> Result<String, &'static str> {
        #[cfg(not(feature = "mcp-http"))]
        let _ = stateless;
        match self {
            CallerKind::Connection => Ok(named.unwrap_or(connection_run).to_owned()),
            // The tenant is the principal's: any run it names is its own.
            #[cfg(feature = "mcp-http")]
            CallerKind::Principal { session, .. } => match named.or(session.as_deref()) {
                Some(run) => Ok(run.to_owned()),
                None => caller_run(stateless),
            },
            // rmcp refuses on the session path ids this server did not
            // issue, and they hold no `/`: the scoped run is unambiguous.
            #[cfg(feature = "mcp-http")]
            CallerKind::Session(session) => Ok(match named {
                Some(named) => format!("{session}/{named}"),
                None => session.clone(),
            }),
            #[cfg(feature = "mcp-http")]
            CallerKind::Anonymous => match named {
                Some(_) => Err(UNBOUND_RUN),
                None => caller_run(stateless),
            },
        }
    }
}

/// The run of a stateless call, as `stateless` says.
#[cfg(feature = "mcp-http")]
fn caller_run(stateless: StatelessWrites) -> Result<String, &'static str> {
    match stateless {
        StatelessWrites::CallerScope => Ok(CALLER_RUN.to_owned()),
        StatelessWrites::Refuse => Err(NO_RUN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONN: &str = "mcp-conn";

    #[test]
    fn a_connection_runs_in_the_run_it_names_or_its_own_for_the_servers_tenant() {
        let caller = CallerKind::Connection;
        let scope = StatelessWrites::Refuse;
        assert_eq!(caller.run(Some("run-7"), CONN, scope), Ok("run-7".into()));
        assert_eq!(caller.run(None, CONN, scope), Ok(CONN.into()));
        assert_eq!(caller.tenant(Some("acme")), Some("acme".into()));
        assert_eq!(caller.tenant(None), None);
    }

    #[cfg(feature = "mcp-http")]
    #[test]
    fn a_principal_is_the_tenant_and_owns_the_runs_it_names() {
        let caller = |session: Option<&str>| CallerKind::Principal {
            principal: "alice".into(),
            session: session.map(str::to_owned),
        };
        let (scope, refuse) = (StatelessWrites::CallerScope, StatelessWrites::Refuse);
        assert_eq!(caller(None).tenant(Some("acme")), Some("alice".into()));
        let in_session = caller(Some("mcp-session-1"));
        assert_eq!(
            in_session.run(Some("run-7"), CONN, refuse),
            Ok("run-7".into())
        );
        assert_eq!(
            in_session.run(None, CONN, refuse),
            Ok("mcp-session-1".into())
        );
        assert_eq!(caller(None).run(None, CONN, scope), Ok(CALLER_RUN.into()));
        assert_eq!(caller(None).run(None, CONN, refuse), Err(NO_RUN));
    }

    #[cfg(feature = "mcp-http")]
    #[test]
    fn a_session_scopes_the_runs_it_names_under_itself() {
        let caller = CallerKind::Session("mcp-session-1".into());
        let scope = StatelessWrites::Refuse;
        assert_eq!(
            caller.run(Some("run-7"), CONN, scope),
            Ok("mcp-session-1/run-7".into())
        );
        assert_eq!(caller.run(None, CONN, scope), Ok("mcp-session-1".into()));
        assert_eq!(caller.tenant(Some("acme")), Some("acme".into()));
    }

    #[cfg(feature = "mcp-http")]
    #[test]
    fn an_anonymous_caller_names_no_run_and_gets_the_stateless_policy() {
        let caller = CallerKind::Anonymous;
        let (scope, refuse) = (StatelessWrites::CallerScope, StatelessWrites::Refuse);
        assert_eq!(caller.run(Some("run-7"), CONN, scope), Err(UNBOUND_RUN));
        assert_eq!(caller.run(None, CONN, scope), Ok(CALLER_RUN.into()));
        assert_eq!(caller.run(None, CONN, refuse), Err(NO_RUN));
    }
}
