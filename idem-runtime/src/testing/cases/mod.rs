//! The conformance cases; each takes the harness and panics on a
//! violation: `store` (the operations of the contract), `inspect` (what
//! operators read), `registry` (write
//! tools over the store), `sealed` (records encrypted at rest) and
//! `network` (real network faults between store and server).

mod inspect;
mod network;
mod registry;
mod sealed;
mod store;

pub use self::inspect::*;
pub use self::network::*;
pub use self::registry::*;
pub use self::sealed::*;
pub use self::store::*;
