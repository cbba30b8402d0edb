//! The store conformance suite, written once and run against every backend,
//! and fault injection for the wrapper's fail-closed guarantees.
//!
//! - this module: the [`Harness`] a backend implements, the macros that
//!   make one test per case, and helpers the cases share;
//! - `cases`: the cases;
//! - `fixtures`: [`Counter`], the write tool the cases call;
//! - `faults`: [`FaultyStore`], injected failures for in-process stores;
//! - `proxy`: [`Proxy`], real network faults between a client and its
//!   server;
//! - `receiver`: [`Receiver`], a webhook receiver that keeps what it is
//!   sent and answers slowly or with an error when told to;
//! - `retries`: [`RetryCheck`], the check users run on their own tools;
//!   `report`: what it found ([`RetryReport`]).
//!
//! A backend's test file is three lines:
//!
//! ```ignore
//! idem_runtime::conformance_tests!(async {
//!     idem_runtime::testing::MemoryHarness::new()
//! });
//! ```
//!
//! The macro expands to one `#[test]` per case, each on its own
//! multi-threaded Tokio runtime, each with keys under a namespace of its
//! own, so cases never see each other's records and never need the store
//! emptied. Cases that need time to pass (lease expiry, TTL) sleep real
//! time, since a remote store judges expiry by its own clock; none asserts
//! how long anything took.

pub mod cases;
mod faults;
mod fixtures;
mod harness;
mod helpers;
mod proxy;
mod receiver;
mod report;
mod retries;

pub use self::cases::malformed_records_are_refused;
pub use self::faults::{Fault, FaultyStore, Op};
pub use self::fixtures::{Counter, CounterArgs, CounterOut};
pub use self::harness::{Erased, Harness, MemoryHarness, run};
pub use self::proxy::{Flow, Proxy};
pub use self::receiver::{Received, Receiver};
pub use self::report::{RetryReport, Row, Verdict};
pub use self::retries::{IntoWriteTool, RetryCheck};

/// Calls `$crate::$mac!` with `$args`, `;` and the list of every
/// conformance case: the one place the cases are named.
#[doc(hidden)]
#[macro_export]
macro_rules! __idem_with_cases {
    ($mac:ident; $($args:tt)*) => {
        $crate::$mac! { $($args)*;
            claim_complete_replay,
            concurrent_claims_acquire_once,
            lapsed_lease_lets_a_new_claim_in,
            renew_keeps_the_lease,
            stale_token_is_fenced,
            lapsed_but_unclaimed_may_still_record,
            release_counts_the_attempt,
            permanent_failure_is_replayed,
            result_ttl_expires,
            purge_removes_only_expired_records,
            inspect_shows_every_state,
            released_by_the_inspected_holder_fences_the_worker,
            scan_pages_through_a_namespace,
            absent_key_refuses_token_ops,
            fingerprint_is_kept,
            corrupt_record_is_an_error,
            registry_runs_once_in_sequence,
            registry_concurrent_duplicate_is_in_flight,
            registry_stress_runs_each_key_once,
            registry_wait_returns_the_first_result,
            registry_fails_closed_on_outage,
            registry_returns_result_when_recording_fails,
            registry_fences_a_worker_that_lost_its_lease,
            settle_repeated_by_its_token_succeeds,
            claims_after_a_release_have_one_winner,
            unknown_outcome_is_kept_until_resolved_once,
            a_lapsed_claim_is_remembered_for_its_retention,
            registry_remembers_a_lapsed_claim_for_the_ttl,
            approval_is_used_once_by_its_own_arguments,
            approval_decisions_race_to_one,
            an_unused_approval_is_revoked_by_its_token,
            registry_runs_an_approved_operation_once,
            registry_keeps_the_tools_approval_terms,
            registry_revokes_an_unused_approval,
            registry_waits_for_a_persons_decision,
            registry_waits_for_an_unknown_outcome_to_be_resolved,
            announcements_wake_the_calls_watching_their_key,
            registry_tells_its_webhooks_what_it_records,
            registry_refuses_an_uncertain_operation_until_resolved,
            registry_keeps_an_unknown_outcome_past_the_ttl,
            registry_verifies_an_uncertain_operation,
            registry_uncertain_errors_follow_the_policy,
            registry_records_any_error_text,
            registry_longest_settings_are_kept,
            registry_conflict_names_the_differing_fields,
            registry_result_too_large_is_never_run_again,
            registry_sealed_records_are_ciphertext_and_authenticated,
            net_cut_connections_lose_nothing,
            net_frozen_connections_are_replaced,
            net_connections_opened_into_a_freeze_give_way,
            net_stalled_renewal_does_not_block_the_body,
            net_slow_record_is_retried_until_it_lands,
            net_body_sees_its_lease_lost,
            net_a_run_tool_runs_unclaimed_while_the_store_is_away,
            net_a_cut_listener_listens_again,
        }
    };
}

/// Generates one `#[test]` per conformance case. `$make` is an expression
/// of a future yielding `Option<impl Harness>`: `None` when the backend is
/// not reachable and the harness has said why (it must not say `None`
/// under `CI=true`).
#[macro_export]
macro_rules! conformance_tests {
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::testing::run(async {
                    if let ::core::option::Option::Some(harness) = $make.await {
                        $crate::testing::cases::$case(&harness).await;
                        $crate::testing::Harness::cleanup(&harness).await;
                    }
                });
            }
        )*
    };
    ($make:expr) => {
        $crate::__idem_with_cases!(conformance_tests; @cases $make);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __idem_run_cases {
    (@run $h:expr; $($case:ident),* $(,)?) => {
        $( $crate::testing::cases::$case($h).await; )*
    };
}

/// Runs every conformance case in turn against one harness: for a backend
/// that is costly to set up per case (a cluster the test starts).
pub async fn run_all<H: Harness>(harness: &H) {
    crate::__idem_with_cases!(__idem_run_cases; @run harness);
}
