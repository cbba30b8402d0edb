//! The idempotent wrapper: claim or replay, run once while a heartbeat
//! holds the lease, record the outcome.
//!
//! A write call passes through `operation` (its key), `claim` (take the key
//! or replay its record), `hold` (the lease, renewed beside the body) and
//! `record` (the outcome written and answered); `write` strings them
//! together. `read` runs read tools, `settings` holds what calls share,
//! `args` makes the model's arguments typed and exact, `roles` says which
//! fields are keyed, checked or ignored, `checked` what a duplicate must
//! match beyond its key, `sets` puts set-like arguments in one order,
//! `uncertain` decides what an operation whose outcome is unknown does,
//! `approval` asks a person before an operation that needs it runs,
//! `wait` waits for that person's decision where the tool says so,
//! `trace` tells the registry how a call was answered, and `task` the
//! future combinators the stages are built from.

mod about;
mod approval;
mod args;
mod checked;
mod claim;
mod given;
mod hold;
mod operation;
mod read;
mod roles;
mod sets;
mod settings;
mod settle;
mod task;
mod trace;
mod uncertain;
mod wait;
mod write;

pub(crate) use self::args::MAX_ARGS_DEPTH;
pub(crate) use self::checked::Learnt;
pub(crate) use self::operation::operation;
pub(crate) use self::read::call_read;
pub use self::settings::DEFAULT_MAX_RESULT_BYTES;
pub(crate) use self::settings::{
    ApprovalHook, CallOrigin, Defaults, Shared, StoreMeta, ToolSettings,
};
pub(crate) use self::task::bounded;
pub(crate) use self::trace::{CallTrace, How};
pub(crate) use self::wait::{call_write_waiting, may_wait};
pub(crate) use self::write::call_write;
