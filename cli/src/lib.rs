//! `idem`: an operator's view of idem's records. `key` derives an
//! operation's key with the function the runtime uses; `show` prints a
//! record; `list` and `stats` scan a namespace (`scan.rs`); `release` ends
//! a stuck claim (`release.rs`); `pending` lists the operations whose
//! outcome is unknown and `resolve` answers one (`resolve.rs`, a result
//! fitted to the tool's output schema by `fits.rs`);
//! `approvals` lists the operations awaiting a person's approval, and
//! `approve` and `deny` decide one and `revoke` takes an approval back
//! (`approve.rs`); `purge` deletes expired
//! records. Every
//! command that reads a store takes it by URL (`--store`, or
//! `IDEM_STORE`): `redis://`, `rediss://`, `postgres://` or a SQLite file's
//! path. `gateway` is the exception to "nothing here runs a tool": it
//! serves an upstream MCP server's tools behind idem (`gateway/`);
//! `console` serves a page and a JSON API where people decide what waits
//! for them (`console/`).
//!
//! A library only so that one program has two names: `idem` (`main.rs`)
//! and `idem-mcp` (`bin/idem-mcp.rs`), the name it has in the PyPI and
//! npm packages (`uvx idem-mcp`, `npx idem-mcp`). Nothing here is an API.

mod approve;
mod console;
mod fits;
mod gateway;
mod guard;
mod notify;
mod output;
mod record;
mod refused;
mod release;
mod resolve;
mod scan;
mod store;
mod tokens;

use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};
use idem::notify::Webhooks;
use idem::store::{RecordState, ScanFilter};
use idem::{IdemKey, Scope};
use serde_json::Value;

use crate::approve::Decision;
use crate::output::say;
use crate::release::Holder;
use crate::resolve::Answer;
use crate::store::StoreUrl;

/// Look at idem's records: the key of an operation, the record a store
/// holds under it, the records of a namespace and their counts; end a
/// stuck claim; purge expired records.
#[derive(Parser)]
#[command(name = "idem", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Derive and print an operation's key, as the registry does.
    Key(Operation),
    /// Print the record a store holds under a key (or an operation's key).
    Show {
        #[command(flatten)]
        store: StoreUrl,
        /// The key, as `idem key` or a log line gives it.
        #[arg(conflicts_with = "tool")]
        key: Option<String>,
        /// Or the operation, whose key is derived as `idem key` does.
        #[command(flatten)]
        operation: Option<Operation>,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List the records of a namespace with their state and ages, as they
    /// are scanned.
    List {
        #[command(flatten)]
        store: StoreUrl,
        #[command(flatten)]
        filter: Filter,
        /// Stop after this many records.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// One JSON object a line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Count the records of a namespace by state and tool, and find the
    /// oldest running claim.
    Stats {
        #[command(flatten)]
        store: StoreUrl,
        /// The registry's namespace, if it has one.
        #[arg(long, default_value = "")]
        namespace: String,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// End a stuck claim, so that the next call runs the tool again. The
    /// worker still holding the claim is fenced: it gets `LeaseLost` and
    /// records nothing.
    Release {
        #[command(flatten)]
        store: StoreUrl,
        /// The record's key.
        key: String,
        /// The holder's token, as `show` prints it.
        #[arg(long, required_unless_present = "force", conflicts_with = "force")]
        token: Option<String>,
        /// Release whoever holds it; asks first while the lease is live.
        #[arg(long)]
        force: bool,
        /// With --force: do not ask.
        #[arg(long, requires = "force")]
        yes: bool,
    },
    /// List the operations whose outcome is unknown (a tool that refuses to
    /// rerun an uncertain operation), oldest first, with tool, tenant, age
    /// and why.
    Pending(Waiting),
    /// Resolve an operation whose outcome is unknown with what you found
    /// out: it happened (--done with its result), it failed (--failed), or
    /// it did not happen and may run again (--rerun). Refused for a record
    /// that is not unknown, or that another resolution changed first.
    #[command(group(clap::ArgGroup::new("answer").required(true).args(["done", "failed", "rerun"])))]
    Resolve {
        #[command(flatten)]
        store: StoreUrl,
        /// The record's key, as `pending` lists it.
        key: String,
        /// It happened: the result (JSON) every duplicate is answered.
        #[arg(long, value_name = "JSON")]
        done: Option<String>,
        /// It failed: the error every duplicate is answered.
        #[arg(long, value_name = "TEXT")]
        failed: Option<String>,
        /// It did not happen: the next duplicate runs the tool.
        #[arg(long)]
        rerun: bool,
        /// How long a result or error is kept, in seconds (the tool's TTL;
        /// 24 h by default, as the registry's).
        #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
        ttl_secs: u64,
        /// A TOML file with a `[notify]` table (the gateway's own file
        /// serves): the decision is sent to its webhooks.
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
    },
    /// List the operations awaiting a person's approval (a tool with
    /// `approval = "required"`), oldest first, with tool, tenant, run, age
    /// and arguments.
    Approvals(Waiting),
    /// Approve an operation awaiting approval: its next call (the same
    /// arguments) runs it, once, within the tool's approval window (an
    /// hour by default). Refused for a record that does not await one, or
    /// that another decision changed first.
    Approve {
        #[command(flatten)]
        store: StoreUrl,
        /// The record's key, as `approvals` lists it.
        key: String,
        /// Who approves, kept in the record [default: $USER].
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        /// A TOML file with a `[notify]` table (the gateway's own file
        /// serves): the decision is sent to its webhooks.
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
    },
    /// Refuse an operation awaiting approval: it never runs, and every call
    /// of it is answered the refusal.
    Deny {
        #[command(flatten)]
        store: StoreUrl,
        /// The record's key, as `approvals` lists it.
        key: String,
        /// Why, as every call of it is told.
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Who refuses, kept in the record and told to every call
        /// [default: $USER].
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
        /// How long the refusal is kept, in seconds [default: the tool's
        /// TTL, as the awaiting record keeps it; for a record that keeps
        /// none, 24 h, the registry's default].
        #[arg(long, value_name = "SECONDS")]
        ttl_secs: Option<u64>,
        /// A TOML file with a `[notify]` table (the gateway's own file
        /// serves): the decision is sent to its webhooks.
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
    },
    /// Take back an approval no call has used yet: the operation awaits a
    /// person's decision again. Refused, saying what the record is, when
    /// it is not an unused approval (awaiting, already run, refused).
    Revoke {
        #[command(flatten)]
        store: StoreUrl,
        /// The record's key.
        key: String,
        /// Who revokes it, kept in the record [default: $USER].
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Delete the expired records now (stores whose records do not expire
    /// by themselves: SQLite, PostgreSQL).
    Purge {
        #[command(flatten)]
        store: StoreUrl,
        /// Only count them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Create what a store needs before anything serves on it: a
    /// PostgreSQL table (or bring an older one up to this version's
    /// schema), a SQLite file. Redis needs nothing.
    Migrate {
        #[command(flatten)]
        store: StoreUrl,
        /// Only print the SQL a PostgreSQL database would be given, for a
        /// DBA to apply; nothing is connected to.
        #[arg(long)]
        print_sql: bool,
    },
    /// Put idem in front of an MCP server: serve its tools on stdio, each
    /// write tool claimed, run once upstream, recorded and replayed to
    /// duplicates: `idem gateway --store FILE -- npx some-mcp-server`.
    Gateway(Box<gateway::GatewayArgs>),
    /// Serve a web page and a JSON API where people approve, deny and
    /// revoke what awaits approval and resolve unknown outcomes:
    /// `idem console --store FILE --token ana=SECRET`, then open
    /// http://127.0.0.1:8790/.
    Console(console::ConsoleArgs),
    /// Print a new webhook secret (`whsec_` and base64 of 32 random
    /// bytes), for `[notify]`'s `secret` and for the receiver that
    /// verifies what is sent.
    WebhookSecret,
    /// Print a completion script for a shell.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// An operation: what its key is derived from. The arguments are keyed as
/// the registry keys the tool's typed arguments re-serialized: give every
/// field, defaults included, and sets in any order only if the tool has
/// none (a tool with sets or field roles keys on a transformed form:
/// `Registry::identify` gives its key exactly).
#[derive(Args, Clone)]
#[group(requires = "tool")]
struct Operation {
    /// The tool's name.
    #[arg(long)]
    tool: Option<String>,
    /// The agent run's id (ignored with `--scope global`).
    #[arg(long, default_value = "")]
    run: String,
    /// The arguments, as a JSON object.
    #[arg(long, default_value = "{}")]
    args: String,
    /// The tool's scope.
    #[arg(long, value_enum, default_value = "run")]
    scope: ScopeArg,
    /// The tenant the call was made for.
    #[arg(long)]
    tenant: Option<String>,
    /// The tool's version (its `version = ..`).
    #[arg(long, default_value_t = 1)]
    tool_version: u32,
    /// The operation key the caller chose, which stands for the arguments.
    #[arg(long)]
    operation_key: Option<String>,
    /// The registry's namespace, if it has one.
    #[arg(long)]
    namespace: Option<String>,
}

/// The operations waiting for a person (`pending`, `approvals`): where,
/// and how they are listed.
#[derive(Args, Clone)]
struct Waiting {
    #[command(flatten)]
    store: StoreUrl,
    /// The registry's namespace, if it has one.
    #[arg(long, default_value = "")]
    namespace: String,
    /// Only records of this tool.
    #[arg(long)]
    tool: Option<String>,
    /// One JSON object a line instead of a table.
    #[arg(long)]
    json: bool,
}

impl Waiting {
    /// The scan of the namespace (and tool) it names.
    fn filter(&self) -> ScanFilter {
        let filter = ScanFilter::namespace(self.namespace.clone());
        match &self.tool {
            Some(tool) => filter.tool(tool.clone()),
            None => filter,
        }
    }
}

/// Which records `list` shows.
#[derive(Args, Clone)]
struct Filter {
    /// The registry's namespace, if it has one.
    #[arg(long, default_value = "")]
    namespace: String,
    /// Only records in this state: awaiting, approved, running, released,
    /// done, failed or unknown.
    #[arg(long)]
    state: Option<RecordState>,
    /// Only records of this tool.
    #[arg(long)]
    tool: Option<String>,
}

impl Filter {
    fn scan_filter(self) -> ScanFilter {
        let mut filter = ScanFilter::namespace(self.namespace);
        if let Some(state) = self.state {
            filter = filter.state(state);
        }
        if let Some(tool) = self.tool {
            filter = filter.tool(tool);
        }
        filter
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ScopeArg {
    Run,
    Global,
}

impl Operation {
    /// The operation's key, or why it cannot be derived.
    fn key(&self) -> Result<IdemKey, String> {
        let tool = self.tool.as_deref().ok_or("--tool is required")?;
        let scope = match self.scope {
            ScopeArg::Global => Scope::Global,
            ScopeArg::Run if self.run.is_empty() => {
                return Err(
                    "--run is required for a run-scoped tool (or give --scope global)".into(),
                );
            }
            ScopeArg::Run => Scope::Run(&self.run),
        };
        let tenant = self.tenant.as_deref();
        let key = match &self.operation_key {
            Some(k) => IdemKey::derive_explicit(tenant, scope, tool, self.tool_version, k),
            None => {
                let args: Value = serde_json::from_str(&self.args)
                    .map_err(|e| format!("--args is not JSON: {e}"))?;
                if !args.is_object() {
                    return Err("--args must be a JSON object of named arguments".into());
                }
                match tenant {
                    Some(t) => IdemKey::derive_for_tenant(t, scope, tool, self.tool_version, &args),
                    None => IdemKey::derive(scope, tool, self.tool_version, &args),
                }
            }
        };
        Ok(match &self.namespace {
            Some(ns) => key.with_namespace(ns),
            None => key,
        })
    }
}

/// The `idem` command: parses the command line, runs it, and says why
/// it failed if it did.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start: {e}")),
    };
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(&message),
    }
}

/// One clear line, and a non-zero exit.
fn fail(message: &str) -> ExitCode {
    eprintln!("idem: {message}");
    ExitCode::FAILURE
}

async fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Key(operation) => {
            say!("{}", operation.key()?);
            Ok(())
        }
        Command::Show {
            store,
            key,
            operation,
            json,
        } => show(store, key, operation, json).await,
        Command::List {
            store,
            filter,
            limit,
            json,
        } => {
            let store = store.open().await?;
            scan::list(&*store, &filter.scan_filter(), limit, json).await
        }
        Command::Stats {
            store,
            namespace,
            json,
        } => {
            let store = store.open().await?;
            scan::stats(&*store, &ScanFilter::namespace(namespace), json).await
        }
        Command::Release {
            store,
            key,
            token,
            force,
            yes,
        } => release(store, key, Holder::of(token, force, yes)).await,
        Command::Pending(waiting) => {
            let store = waiting.store.open().await?;
            resolve::pending(&*store, waiting.filter(), waiting.json).await
        }
        Command::Resolve {
            store,
            key,
            done,
            failed,
            rerun: _,
            ttl_secs,
            config,
        } => {
            let webhooks = webhooks(config.as_deref())?;
            resolve(store, key, (done, failed), ttl_secs, webhooks.as_ref()).await?;
            notify::flush(webhooks.as_ref()).await;
            Ok(())
        }
        approvals @ (Command::Approvals(_)
        | Command::Approve { .. }
        | Command::Deny { .. }
        | Command::Revoke { .. }) => approval(approvals).await,
        Command::Purge { store, dry_run } => purge(store, dry_run).await,
        Command::Migrate { store, print_sql } => migrate(store, print_sql).await,
        Command::Gateway(args) => gateway::serve(*args).await,
        Command::Console(args) => {
            let webhooks = webhooks(args.config.as_deref())?;
            console::serve(args, webhooks).await
        }
        Command::WebhookSecret => {
            say!("{}", idem::notify::WebhookSecret::generate());
            Ok(())
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "idem", &mut std::io::stdout());
            Ok(())
        }
    }
}

/// `release`: ends the claim under `key` as `holder` says.
async fn release(store: StoreUrl, key: String, holder: Holder) -> Result<(), String> {
    let store = store.open().await?;
    release::release(&*store, &IdemKey::from_raw(key), holder).await
}

/// `resolve`: answers the unknown outcome under `key` done (with a result)
/// or failed (with an error) as `given` says, else to run again; kept
/// `ttl_secs`.
async fn resolve(
    store: StoreUrl,
    key: String,
    given: (Option<String>, Option<String>),
    ttl_secs: u64,
    webhooks: Option<&Webhooks>,
) -> Result<(), String> {
    let answer = match given {
        (Some(result), _) => Answer::Done(result),
        (None, Some(error)) => Answer::Failed(error),
        (None, None) => Answer::Rerun,
    };
    let ttl = std::time::Duration::from_secs(ttl_secs);
    let store = store.open().await?;
    resolve::resolve(&*store, &IdemKey::from_raw(key), answer, ttl, webhooks)
        .await
        .map_err(String::from)
}

/// `approvals`, `approve`, `deny` and `revoke`: what waits for a person,
/// and their decision on one.
async fn approval(command: Command) -> Result<(), String> {
    let (store, key, decision, config) = match command {
        Command::Approvals(waiting) => {
            let store = waiting.store.open().await?;
            return approve::approvals(&*store, waiting.filter(), waiting.json).await;
        }
        Command::Approve {
            store,
            key,
            by,
            config,
        } => {
            let by = who(by, "approves")?;
            (store, key, Decision::Approve { by }, config)
        }
        Command::Deny {
            store,
            key,
            reason,
            by,
            ttl_secs,
            config,
        } => {
            let by = who(by, "refuses")?;
            let ttl = ttl_secs.map(std::time::Duration::from_secs);
            (store, key, Decision::Deny { by, reason, ttl }, config)
        }
        Command::Revoke { store, key, by } => {
            let by = who(by, "revokes")?;
            (store, key, Decision::Revoke { by }, None)
        }
        _ => unreachable!("only the approval commands are given here"),
    };
    let webhooks = webhooks(config.as_deref())?;
    let store = store.open().await?;
    approve::decide(
        &*store,
        &IdemKey::from_raw(key),
        decision,
        webhooks.as_ref(),
    )
    .await?;
    notify::flush(webhooks.as_ref()).await;
    Ok(())
}

/// The webhooks the file at `config` asks for (its `[notify]`), if any.
fn webhooks(config: Option<&std::path::Path>) -> Result<Option<Webhooks>, String> {
    let Some(path) = config else {
        return Ok(None);
    };
    match gateway::Config::load(path)?.notify {
        Some(notify) => Webhooks::new(notify)
            .map(Some)
            .map_err(|e| format!("[notify]: {e}")),
        None => Err(format!(
            "{} has no [notify] table: nothing to send the decision to",
            path.display()
        )),
    }
}

/// Who decides: `by`, or else `$USER`; `does` says what they do, for the
/// error when neither names anyone.
fn who(by: Option<String>, does: &str) -> Result<String, String> {
    by.or_else(|| std::env::var("USER").ok())
        .filter(|by| !by.is_empty())
        .ok_or_else(|| format!("give --by NAME: who {does} is kept in the record"))
}

/// `show`: the record under a key, or under an operation's key.
async fn show(
    store: StoreUrl,
    key: Option<String>,
    operation: Option<Operation>,
    json: bool,
) -> Result<(), String> {
    let key = match (key, operation) {
        (Some(key), _) => IdemKey::from_raw(key),
        (None, Some(operation)) => operation.key()?,
        (None, None) => return Err("give a KEY, or the operation (--tool ..)".into()),
    };
    let store = store.open().await?;
    let record = record::inspected(&*store, &key).await?;
    if json {
        say!("{}", record::to_json(&record));
    } else {
        record::print_full(&record);
    }
    Ok(())
}

/// `purge`: delete the expired records, or count them.
async fn migrate(store: StoreUrl, print_sql: bool) -> Result<(), String> {
    say!("{}", store.migrate(print_sql).await?);
    Ok(())
}

async fn purge(store: StoreUrl, dry_run: bool) -> Result<(), String> {
    let store = store.open().await?;
    if dry_run {
        let expired = store
            .count_expired()
            .await
            .map_err(|e| format!("cannot count: {e}"))?;
        say!("{expired} expired records would be deleted");
        return Ok(());
    }
    let purged = store
        .purge_expired()
        .await
        .map_err(|e| format!("cannot purge: {e}"))?;
    say!("{purged} expired records deleted");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
