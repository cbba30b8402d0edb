//! The registry: tools by name, their definitions, and dispatch to the
//! engine.
//!
//! `context` is what a call carries beside its arguments; `builder` checks every tool and setting (with `checks`) and builds the
//! `dispatch` table; `entry` puts each tool behind one object-safe face;
//! `into_tool` is what `RegistryBuilder::tool` accepts, the macros'
//! generated functions included; `observe` gives every call its span and
//! metrics; `resolve` writes an operator's answer for an unknown outcome,
//! `decide` a person's approval or refusal of an operation awaiting one,
//! and `notify` tells the registry's webhooks of both.

mod builder;
mod checks;
mod context;
mod decide;
mod dispatch;
mod entry;
mod into_tool;
#[cfg(feature = "notify")]
mod notify;
mod observe;
mod resolve;

pub use self::builder::RegistryBuilder;
pub use self::checks::valid_tool_name;
pub use self::context::{CallContext, TELL_WAITING_EVERY, WaitReason, Waiting};
pub(crate) use self::context::{OnWait, StopWaiting};
pub use self::dispatch::{Answer, Registry};
pub use self::into_tool::{CallThroughRegistry, IntoTool, InvalidTool, Registration, marker};
pub use self::resolve::Resolution;
