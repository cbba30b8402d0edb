#![doc = include_str!("../README.md")]

pub use idem_runtime::{
    BoxError, Claim, Ctx, DynIdemStore, Entry, Fingerprint, IdemKey, IdemStore, IntoTool,
    LeaseToken, MemoryStore, OnInFlight, ReadTool, Registry, RegistryBuilder, RegistryError, Scope,
    ScopeKind, StoreError, ToolDef, ToolError, ToolInfo, ToolKind, WriteCtx, WriteOptions,
    WriteTool, canonical_json, store, valid_tool_name,
};

#[cfg(feature = "test-util")]
pub use idem_runtime::{conformance_tests, testing};

pub use idem_macros::{read_tool, write_tool};

/// Everything a tool author needs: `use idem::prelude::*;`.
pub mod prelude {
    pub use idem_macros::{read_tool, write_tool};
    pub use idem_runtime::{
        Ctx, IdemKey, MemoryStore, ReadTool, Registry, Scope, ToolError, WriteCtx, WriteTool,
    };
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}

/// What the macros' generated code reaches through; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use idem_runtime::__private::*;
}
