//! The conformance cases; each takes the harness and panics on a
//! violation: `store` (the operations of the contract), `registry` (write
//! tools over the store) and `network` (real network faults between store
//! and server).

mod network;
mod registry;
mod store;

pub use self::network::*;
pub use self::registry::*;
pub use self::store::*;
