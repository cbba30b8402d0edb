#![doc = include_str!("../README.md")]

pub use idem_runtime::*;

pub use idem_macros::{read_tool, write_tool};

/// Everything a tool author needs: `use idem::prelude::*;`.
pub mod prelude {
    pub use idem_macros::{read_tool, write_tool};
    pub use idem_runtime::{Ctx, IdemKey, MemoryStore, Registry, Scope, ToolError, WriteCtx};
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}

