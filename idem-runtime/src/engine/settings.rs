//! What every call of a registry shares, and a write tool's settings: the
//! registry's defaults, and one tool's with those defaults filled in.

use std::sync::Arc;
use std::time::Duration;

use super::args::ArgLimits;
use super::trace::CallTrace;
use crate::key::ScopeKind;
use crate::seal::ResultKeys;
use crate::store::{ApprovalRequest, CLAIM_RETENTION, IdemStore};
use crate::tool::{
    APPROVAL_WINDOW, Approval, OnInFlight, OnStoreError, OnUncertain, Roles, WriteOptions,
};

/// The default [`RegistryBuilder::max_result_bytes`](crate::RegistryBuilder::max_result_bytes): 1 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1 << 20;

/// Who makes a call: the agent run it belongs to, the tenant it is made
/// for and the operation key it chose, if any (docs/spec.md, "Keys").
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallOrigin<'a> {
    pub(crate) run_id: &'a str,
    pub(crate) tenant: Option<&'a str>,
    /// The key the caller chose for the operation, if any.
    pub(crate) operation_key: Option<&'a str>,
    /// Where the engine tells how the call was answered (none for
    /// `identify`).
    pub(crate) trace: Option<&'a CallTrace<'a>>,
    /// Told what the call waits for, while it waits for a person.
    pub(crate) on_wait: Option<crate::registry::OnWait<'a>>,
    /// Whether it may wait for a person at all.
    pub(crate) waits: bool,
    /// Says when to stop waiting (the caller went).
    pub(crate) stop_waiting: Option<crate::registry::StopWaiting<'a>>,
}

/// What every call of a registry shares.
pub(crate) struct Shared<S> {
    pub(crate) state: Arc<S>,
    pub(crate) store: Arc<dyn IdemStore>,
    pub(crate) namespace: Option<Box<str>>,
    pub(crate) store_timeout: Duration,
    pub(crate) defaults: Defaults,
    /// Every call must name a tenant.
    pub(crate) require_tenant: bool,
    /// Seal recorded results and errors with these.
    pub(crate) result_keys: Option<Arc<ResultKeys>>,
    /// The store's kind, and (feature `metrics`) its metric keys.
    pub(crate) store_meta: StoreMeta,
    /// Told of each operation that comes to await a person's approval.
    pub(crate) on_approval_requested: Option<ApprovalHook>,
    /// The registry's webhooks.
    #[cfg(feature = "notify")]
    pub(crate) notifier: Option<crate::notify::Webhooks>,
}

/// What [`RegistryBuilder::on_approval_requested`](crate::RegistryBuilder::on_approval_requested) keeps.
pub(crate) type ApprovalHook = Arc<dyn Fn(&ApprovalRequest) + Send + Sync>;

/// What the traces and metrics of a store's operations name it by.
#[derive(Debug)]
pub(crate) struct StoreMeta {
    /// [`IdemStore::backend`](crate::IdemStore::backend).
    pub(crate) backend: &'static str,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: crate::metrics::StoreKeys,
}

impl StoreMeta {
    pub(crate) fn of(store: &dyn IdemStore) -> StoreMeta {
        let backend = store.backend();
        StoreMeta {
            backend,
            #[cfg(feature = "metrics")]
            metrics: crate::metrics::StoreKeys::new(backend),
        }
    }
}

/// Registry-wide defaults of the write settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Defaults {
    pub(crate) lease: Duration,
    pub(crate) ttl: Duration,
    pub(crate) max_hold: Duration,
    pub(crate) on_in_flight: OnInFlight,
    pub(crate) max_result_bytes: usize,
    /// Registry-wide: how large and deep a call's arguments may be.
    pub(crate) args: ArgLimits,
    /// How long a call of a tool that asks for approval waits for it.
    pub(crate) approval_wait: Duration,
    /// How long a call of a tool that refuses uncertain operations waits
    /// for one to be resolved.
    pub(crate) uncertain_wait: Duration,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            lease: Duration::from_secs(30),
            ttl: Duration::from_secs(24 * 3600),
            max_hold: Duration::from_secs(600),
            on_in_flight: OnInFlight::Reject,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            args: ArgLimits::default(),
            approval_wait: Duration::ZERO,
            uncertain_wait: Duration::ZERO,
        }
    }
}

/// A write tool's settings with the registry's defaults filled in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolSettings {
    pub(crate) lease: Duration,
    pub(crate) ttl: Duration,
    pub(crate) max_hold: Duration,
    pub(crate) on_in_flight: OnInFlight,
    pub(crate) scope: ScopeKind,
    pub(crate) version: u32,
    pub(crate) roles: Roles,
    pub(crate) on_store_error: OnStoreError,
    pub(crate) on_uncertain: OnUncertain,
    pub(crate) approval: Approval,
    /// How long an approval stays good.
    pub(crate) approval_window: Duration,
    /// How long a call waits for a person's decision (zero: not at all).
    pub(crate) approval_wait: Duration,
    /// How long a call waits for an unknown outcome to be resolved.
    pub(crate) uncertain_wait: Duration,
    pub(crate) max_result_bytes: usize,
    pub(crate) args: ArgLimits,
}

impl ToolSettings {
    /// `options`, each unset one taken from `defaults`: made once, when the
    /// registry is built.
    pub(crate) fn of(options: &WriteOptions, defaults: &Defaults) -> Self {
        ToolSettings {
            lease: options.lease.unwrap_or(defaults.lease),
            ttl: options.ttl.unwrap_or(defaults.ttl),
            max_hold: options.max_hold.unwrap_or(defaults.max_hold),
            on_in_flight: options.on_in_flight.unwrap_or(defaults.on_in_flight),
            scope: options.scope,
            version: options.version,
            roles: options.roles,
            on_store_error: options.on_store_error,
            on_uncertain: options.on_uncertain,
            approval: options.approval,
            approval_window: options.approval_window.unwrap_or(APPROVAL_WINDOW),
            // The registry's waits are for the tools they apply to.
            approval_wait: options.approval_wait.unwrap_or(match options.approval {
                Approval::Never => Duration::ZERO,
                _ => defaults.approval_wait,
            }),
            uncertain_wait: options
                .uncertain_wait
                .unwrap_or(match options.on_uncertain {
                    OnUncertain::Rerun => Duration::ZERO,
                    _ => defaults.uncertain_wait,
                }),
            max_result_bytes: options
                .max_result_bytes
                .unwrap_or(defaults.max_result_bytes),
            args: defaults.args,
        }
    }

    /// How long a lapsed claim of the tool is remembered
    /// ([`ClaimRequest::retention`](crate::store::ClaimRequest::retention)): under `rerun`, [`CLAIM_RETENTION`],
    /// enough to count the attempt; under `refuse` and `verify`, as long
    /// as the result would have been kept (the TTL, never less), so that a
    /// duplicate that first comes a day after a crash (an agent resumed
    /// from a checkpoint, a queue's redelivery) still finds the operation
    /// uncertain instead of running it as a first call.
    pub(crate) fn claim_retention(&self) -> Duration {
        if self.on_uncertain == OnUncertain::Rerun {
            CLAIM_RETENTION
        } else {
            self.ttl.max(CLAIM_RETENTION)
        }
    }
}
