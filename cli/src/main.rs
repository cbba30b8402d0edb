//! `idem`: an operator's view of idem's records. `idem key` derives an
//! operation's key with the function the runtime uses; `idem show` prints
//! the record a store holds under a key; `idem purge` deletes expired
//! records. Every command that reads a store takes it by URL (`--store`,
//! or `IDEM_STORE`): `redis://`, `rediss://`, `postgres://` or a SQLite
//! file's path. Nothing here can run a tool.

mod store;

use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};
use idem::{Entry, IdemKey, Scope};
use serde_json::Value;

use crate::store::StoreUrl;

/// Look at idem's records: the key of an operation, the record a store
/// holds under it, expired records purged.
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
    /// Delete the expired records now (stores whose records do not expire
    /// by themselves: SQLite, PostgreSQL).
    Purge {
        #[command(flatten)]
        store: StoreUrl,
    },
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

fn main() -> ExitCode {
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
            println!("{}", operation.key()?);
            Ok(())
        }
        Command::Show {
            store,
            key,
            operation,
            json,
        } => {
            let key = match (key, operation) {
                (Some(key), _) => IdemKey::from_raw(key),
                (None, Some(operation)) => operation.key()?,
                (None, None) => return Err("give a KEY, or the operation (--tool ..)".into()),
            };
            let store = store.open().await?;
            let entry = store
                .dyn_get(&key)
                .await
                .map_err(|e| format!("cannot read {key}: {e}"))?;
            let Some(entry) = entry else {
                return Err(format!("no record under {key}"));
            };
            print_entry(&key, &entry, json);
            Ok(())
        }
        Command::Purge { store } => {
            let store = store.open().await?;
            let purged = store
                .dyn_purge_expired()
                .await
                .map_err(|e| format!("cannot purge: {e}"))?;
            println!("{purged} expired records deleted");
            Ok(())
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "idem", &mut std::io::stdout());
            Ok(())
        }
    }
}

/// The record, as a table or one JSON object.
fn print_entry(key: &IdemKey, entry: &Entry, json: bool) {
    let (state, attempt, payload) = match entry {
        Entry::Running { attempt, .. } => ("running", Some(*attempt), None),
        Entry::Done { result, .. } => ("done", None, Some(("result", result.as_str()))),
        Entry::Failed { error, .. } => ("failed", None, Some(("error", error.as_str()))),
        // A state a newer idem records: shown by what every record has.
        _ => ("unknown to this version", None, None),
    };
    let fingerprint = entry.fingerprint().to_hex();
    if json {
        let mut out = serde_json::json!({
            "key": key.as_str(), "state": state, "fingerprint": fingerprint,
        });
        if let Some(attempt) = attempt {
            out["attempt"] = attempt.into();
        }
        if let Some((name, text)) = payload {
            out[name] = payload_value(name, text);
        }
        println!("{out}");
        return;
    }
    println!("key          {key}");
    println!("state        {state}");
    if let Some(attempt) = attempt {
        println!("attempt      {attempt}");
    }
    println!("fingerprint  {fingerprint}");
    if let Some((name, text)) = payload {
        let shown = match payload_value(name, text) {
            Value::String(s) => s,
            other => serde_json::to_string_pretty(&other).unwrap_or_else(|_| text.to_owned()),
        };
        println!("{name:<12} {}", shown.replace('\n', "\n             "));
    }
}

/// A result as the JSON it is (an error, or a sealed payload, as text).
fn payload_value(name: &str, text: &str) -> Value {
    if name == "result"
        && !text.starts_with("idem-sealed:")
        && let Ok(value) = serde_json::from_str(text)
    {
        return value;
    }
    Value::String(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
