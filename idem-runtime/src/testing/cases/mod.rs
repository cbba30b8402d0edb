//! The conformance cases; each takes the harness and panics on a
//! violation: `store` (the operations of the contract), `inspect` (what
//! operators read), `registry` (write
//! tools over the store), `sealed` (records encrypted at rest),
//! `network` (real network faults between store and server), `full` (a
//! store out of memory or space, which its backend's test fills for real)
//! `uncertain` (lapsed claims, unknown outcomes and their resolution),
//! `approval` (operations awaiting a person's approval), `wait` (calls
//! that wait for a person's decision) and `notify` (the webhooks that
//! tell that person).

mod approval;
mod full;
mod inspect;
mod network;
mod notify;
mod registry;
mod sealed;
mod store;
mod uncertain;
mod wait;

pub use self::approval::*;
pub use self::full::*;
pub use self::inspect::*;
pub use self::network::*;
pub use self::notify::*;
pub use self::registry::*;
pub use self::sealed::*;
pub use self::store::*;
pub use self::uncertain::*;
pub use self::wait::*;
