//! The problem and the cure, in one run: a scripted agent (no network, no
//! API key) charges a card through a fake payment provider, and meets the
//! three sources of duplicate tool calls:
//!
//! 1. our own retry after the model provider times out replays the turn;
//! 2. the model calls `charge_card` again, with a new `tool_call_id`;
//! 3. the agent process crashes after the charge and resumes from a
//!    checkpoint taken before it (a real child process, killed and
//!    restarted, on a SQLite file).
//!
//!
//! With `--no-idempotency-keys` the provider takes no key, and scene 3 is
//! played with the process killed right after the charge, before idem
//! records it, under each policy for an uncertain outcome: `rerun` charges
//! twice, `verify` asks the provider and charges once, `refuse` charges
//! once and tells the model a person must check.
//!
//! With `--approval` the charge needs a person's approval, and its call
//! waits for it (`approval_wait`): a person approves from another
//! terminal with `idem approve` (or `--approve-as NAME` approves for
//! them), the waiting call charges once and answers, and a retried turn
//! replays the charge.
//!
//! ```text
//! cargo run --example agent                  # with idem: one charge
//! cargo run --example agent -- --naive       # without: watch the double charges
//! cargo run --example agent -- --no-idempotency-keys   # a crash mid-charge, under each policy
//! cargo run --example agent -- --approval    # a person approves the charge (idem approve)
//! cargo run --example agent -- --store redis://127.0.0.1:6379
//! cargo run --example agent -- --store postgres://postgres@127.0.0.1:5432/test
//! ```

mod scenes;

#[tokio::main]
async fn main() -> Result<(), scenes::BoxError> {
    scenes::main(<scenes::Options as clap::Parser>::parse()).await
}
