// The `idem` facade: the runtime and the two tool macros under one name.
// Its crate documentation is the README.

#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use idem_runtime::*;

/// Turns an `async fn` into a read tool: a tool without side effects,
/// called directly and never stored.
///
/// Parameters are the tool's arguments (each a property of its JSON schema,
/// `Option<T>` optional, `///` its description), or one `#[args]` struct.
/// An optional `ctx: &Ctx<State>` gives the run id and the application
/// state. The doc comment is the description the model reads.
///
/// Every key, all optional:
///
/// | key | what it sets |
/// |---|---|
/// | `name = "search"` | the tool's name (default: the function's) |
/// | `description = ".."` | the description (default: the doc comment); a macro such as `concat!` works |
/// | `crate = "my_idem"` | the path idem is known by where it is not `::idem` (a renamed dependency) |
///
/// ```
/// use idem::prelude::*;
///
/// struct Catalogue { items: Vec<String> }
///
/// /// Search the catalogue by free text.
/// #[read_tool]
/// async fn search(
///     /// Words to look for.
///     query: String,
///     /// At most this many hits.
///     limit: Option<u32>,
///     ctx: &Ctx<Catalogue>,
/// ) -> Result<Vec<String>, String> {
///     let hits = ctx.state().items.iter().filter(|i| i.contains(&query));
///     Ok(hits.take(limit.unwrap_or(10) as usize).cloned().collect())
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let registry = Registry::builder(Catalogue { items: vec!["red apple".into()] })
///     .tool(search)
///     .build()
///     .unwrap();
/// let hits = registry.call("run-1", "search", serde_json::json!({"query": "apple"})).await;
/// assert_eq!(hits.unwrap(), serde_json::json!(["red apple"]));
/// # }
/// ```
pub use idem_macros::read_tool;

/// Turns an `async fn` into an idempotent write tool: every call is
/// claimed under a key derived from the run, the tool and the canonical
/// arguments, runs at most once, and is replayed to duplicates.
///
/// The function must take `ctx: &WriteCtx<State>` (or `&WriteCtx` for any
/// state) and should pass `ctx.idem_key()` downstream.
///
/// Every key, all optional (durations take `ms`, `s`, `m`, `h`, `d`):
///
/// | key | what it sets |
/// |---|---|
/// | `name = "charge"` | the tool's name (default: the function's) |
/// | `description = ".."` | the description (default: the doc comment) |
/// | `scope = "run"` or `"global"` | whether a key holds within one run (default) or across runs |
/// | `key = [a, b.c]` | key on these fields only; **every other field is checked** |
/// | `check = [a]` | not keyed, but a duplicate with another value there is a `KeyConflict` (not beside `key`) |
/// | `ignore = [a]` | neither keyed nor checked: a duplicate differing only there is replayed |
/// | `hide = [a]` | shown as `"(hidden)"` where records show their arguments to operators (`idem show`, `list`, `pending`); keeps its role |
/// | `version = 1` | part of the key: raise it when the tool's meaning changes |
/// | `lease = "30s"` | how long a claim holds without renewal |
/// | `ttl = "24h"` | how long a result is replayed |
/// | `max_hold = "10m"` | the longest a claim is renewed, and a result retried into the store |
/// | `max_result_bytes = 1048576` | the largest result recorded |
/// | `on_in_flight = "reject"` or `"wait(5s)"` | what a duplicate gets while the first call runs |
/// | `on_store_error = "fail_closed"` or `"run"` | whether the body runs unclaimed when the store is unreachable |
/// | `on_uncertain = "rerun"` or `"refuse"` | whether the body runs again when an earlier attempt's outcome is uncertain (its claim lapsed before it recorded anything, or an uncertain error) ([`OnUncertain`]) |
/// | `verify = path` | asks the downstream first: an `async fn` taking the tool's parameters and context, returning `Result<Verified<T>, E>` ([`WriteTool::verify`]) |
/// | `approval = "required"` or `path` | a person approves each operation before it runs, or those a `fn(&param.., &Ctx) -> bool` says need it ([`Approval`], [`Registry::approve`]) |
/// | `uncertain_errors = path` | a `fn(&E) -> bool` saying which errors leave the outcome unknown ([`WriteTool::is_uncertain`]) |
/// | `permanent_errors = path::to::fn` | a `fn(&E) -> bool`: errors recorded and replayed, not retried |
/// | `destructive`, `open_world` (or `= bool`) | MCP annotations |
/// | `crate = "my_idem"` | the path idem is known by where it is not `::idem` |
///
/// Field paths name flat parameters by their Rust names, and the members of
/// an `#[args]` struct or a nested object by their JSON names (a
/// misspelling, or a Rust name where the JSON one differs, is an error
/// naming the right one). Without `key`, `check` and `ignore`, every field
/// is keyed, so no call conflicts. With `key = [user_id]`, every other
/// field, `Option`s included, is checked: the same `user_id` with another
/// value in one of them is a `KeyConflict` naming that field. Below,
/// `locale` is ignored, so a welcome sent in another language is still the
/// one welcome.
///
/// ```
/// use idem::prelude::*;
///
/// #[derive(Debug)]
/// enum MailError { Bounced, Timeout }
///
/// impl std::fmt::Display for MailError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         write!(f, "{self:?}")
///     }
/// }
///
/// fn bounced(e: &MailError) -> bool {
///     matches!(e, MailError::Bounced)
/// }
///
/// /// Send the welcome mail to a new user, once ever.
/// #[write_tool(scope = "global", key = [user_id], ignore = [locale], permanent_errors = bounced)]
/// async fn send_welcome(user_id: u64, locale: Option<String>, ctx: &WriteCtx) -> Result<String, MailError> {
///     // mailer.send(user_id, locale, message_id = ctx.idem_key().as_str())
///     Ok(format!("sent to {user_id} ({})", locale.as_deref().unwrap_or("en")))
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let registry = Registry::builder(()).tool(send_welcome).build().unwrap();
/// let args = serde_json::json!({"user_id": 7});
/// let a = registry.call("run-1", "send_welcome", args).await.unwrap();
/// let again = serde_json::json!({"user_id": 7, "locale": "fr"});
/// let b = registry.call("run-2", "send_welcome", again).await.unwrap(); // global: replayed
/// assert_eq!(a, b);
/// # }
/// ```
pub use idem_macros::write_tool;

/// The guide: idem by task, a chapter a page. Each chapter is a markdown
/// file of `src/guide/` (which GitHub shows too), and every example in it
/// is compiled and run as a doctest.
pub mod guide {
    #![doc = include_str!("guide/index.md")]

    pub mod writing_tools {
        #![doc = include_str!("guide/writing-tools.md")]
    }
    pub mod same_operation {
        #![doc = include_str!("guide/same-operation.md")]
    }
    pub mod uncertain {
        #![doc = include_str!("guide/uncertain.md")]
    }
    pub mod approval {
        #![doc = include_str!("guide/approval.md")]
    }
    pub mod stores {
        #![doc = include_str!("guide/stores.md")]
    }
    pub mod mcp {
        #![doc = include_str!("guide/mcp.md")]
    }
    pub mod providers {
        #![doc = include_str!("guide/providers.md")]
    }
    pub mod operating {
        #![doc = include_str!("guide/operating.md")]
    }
    pub mod security {
        #![doc = include_str!("guide/security.md")]
    }
    pub mod testing {
        #![doc = include_str!("guide/testing.md")]
    }
}

/// Everything a tool author needs: `use idem::prelude::*;`.
///
/// `Serialize`, `Deserialize` and `JsonSchema` are here so that one `use`
/// names them, but deriving them for your own types needs `serde` (with its
/// `derive` feature) and `schemars` 1 among your dependencies: the derives
/// expand to paths into those crates. The tool macros need neither.
pub mod prelude {
    pub use idem_macros::{read_tool, write_tool};
    pub use idem_runtime::{
        CallContext, Ctx, IdemKey, MemoryStore, Provider, Registry, Scope, ToolError, Verified,
        WriteCtx,
    };
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}
