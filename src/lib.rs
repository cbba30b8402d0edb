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
/// state. The doc comment is the description the model reads. Keys:
/// `name = ".."`, `description = ".."`.
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
/// state) and should pass `ctx.idem_key()` downstream. Keys, all optional:
/// `name`, `description`, `lease = "30s"`, `ttl = "24h"`, `max_hold = "10m"`,
/// `scope = "run" | "global"`, `key = [field, ..]`, `version = 1`,
/// `on_in_flight = "reject" | "wait(5s)"`, `permanent_errors = path`
/// (`fn(&E) -> bool`), `destructive = bool`, `open_world = bool`.
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
/// #[write_tool(scope = "global", key = [user_id], permanent_errors = bounced)]
/// async fn send_welcome(user_id: u64, locale: Option<String>, ctx: &WriteCtx) -> Result<String, MailError> {
///     // mailer.send(user_id, locale, message_id = ctx.idem_key().as_str())
///     Ok(format!("sent to {user_id} ({})", locale.as_deref().unwrap_or("en")))
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let registry = Registry::builder(()).tool(send_welcome).build().unwrap();
/// let args = serde_json::json!({"user_id": 7});
/// let a = registry.call("run-1", "send_welcome", args.clone()).await.unwrap();
/// let b = registry.call("run-2", "send_welcome", args).await.unwrap(); // global: replayed
/// assert_eq!(a, b);
/// # }
/// ```
pub use idem_macros::write_tool;

/// Everything a tool author needs: `use idem::prelude::*;`.
pub mod prelude {
    pub use idem_macros::{read_tool, write_tool};
    pub use idem_runtime::{
        CallContext, Ctx, IdemKey, MemoryStore, Registry, Scope, ToolError, WriteCtx,
    };
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}
