//! The runtime of [idem](https://docs.rs/idem): idempotency keys, the store
//! trait and its backends, the tool registry and the idempotent wrapper.
//!
//! Applications depend on the `idem` facade crate, which re-exports this
//! crate together with the `#[read_tool]` / `#[write_tool]` macros.
//!
//! - [`canonical_json`], [`IdemKey::derive`], [`Scope`]: what an operation's
//!   identity is (docs/spec.md, "Keys").
//! - [`IdemStore`] and its backends: [`MemoryStore`] (always), and behind
//!   features `SqliteStore` (`sqlite`), `PostgresStore` (`postgres`,
//!   `postgres-tls`) and `RedisStore` (`redis`, `redis-tls`); `testing`
//!   (`test-util`) holds
//!   the conformance suite every backend passes, and a TCP proxy that cuts,
//!   stalls and black-holes a store's connections for its fault cases.
//! - [`ReadTool`], [`WriteTool`]: what the macros implement.
//! - [`Registry`]: tools by name, their definitions, and
//!   [`Registry::call`], which runs write tools at most once per operation.
//! - [`Provider`]: each model provider's format (OpenAI, Anthropic, Gemini,
//!   MCP), its tools ([`Registry::tools`]) and its calls, answered in its
//!   shape ([`Registry::reply`]).
//! - `mcp` (features `mcp`, `mcp-http`): the registry as an MCP server;
//!   `rig` (feature `rig`): its tools as rig tools.
//!
//! # Layers
//!
//! Imports run one way (a test fails on any file importing one that imports
//! it back): the macros' output → `__private` → `registry` (building,
//! checking, dispatching) → `engine` (a call's stages: operation, claim,
//! hold, record) → `store` (the contract, the SQL rows' codec, a folder per
//! backend with its options, errors and record format) and `key` (with
//! `canonical`) → `error`. `providers` (a module per provider) reads tool
//! definitions and dispatches through the registry. The specification is
//! the repository's `docs/spec.md`.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod canonical;
#[cfg(feature = "redis-tls")]
mod crypto;
mod ctx;
mod engine;
mod error;
mod key;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
mod providers;
mod registry;
mod schema;
mod seal;
pub mod store;
mod tool;
mod unique;
mod utc;

#[cfg(feature = "async-openai")]
pub mod async_openai;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "notify")]
#[cfg_attr(docsrs, doc(cfg(feature = "notify")))]
pub mod notify;
#[cfg(feature = "rig")]
pub mod rig;
#[cfg(feature = "test-util")]
pub mod testing;

pub use crate::canonical::canonical_json;
pub use crate::ctx::{Ctx, WriteCtx};
pub use crate::engine::DEFAULT_MAX_RESULT_BYTES;
pub use crate::error::{BoxError, RegistryError, ResolveError, StoreError, ToolError};
pub use crate::key::{Fingerprint, IdemKey, Scope, ScopeKind};
pub use crate::providers::{MalformedCall, Provider, RenderError, ToolReply};
pub use crate::registry::{
    Answer, CallContext, IntoTool, Registry, RegistryBuilder, Resolution, TELL_WAITING_EVERY,
    WaitReason, Waiting, valid_tool_name,
};
#[cfg(feature = "encryption")]
pub use crate::seal::{InvalidKeyId, ResultKeys};
pub use crate::store::contract::IdemStore;
pub use crate::store::memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use crate::store::postgres::{PostgresOptions, PostgresStore};
#[cfg(feature = "redis")]
pub use crate::store::redis::{RedisOptions, RedisStore};
#[cfg(feature = "sqlite")]
pub use crate::store::sqlite::{SqliteOptions, SqliteStore};
pub use crate::tool::{
    APPROVAL_WINDOW, Approval, OnInFlight, OnStoreError, OnUncertain, ReadTool, SettingError,
    ToolDef, ToolInfo, ToolKind, Verified, WaitError, Waits, WriteOptions, WriteTool,
    parse_duration,
};
// The bounds of the tool traits' types, named where the compiler explains
// an unmet one; not an API of their own.
#[doc(hidden)]
pub use crate::tool::{ReadArgs, ReadOutput, ToolFailure, WriteArgs, WriteOutput};

/// What the macros' generated code reaches through; not a public API.
#[doc(hidden)]
pub mod __private;
