//! Building a registry: the store, namespace and default settings, the
//! tools, and every check made before the first call.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::checks::{check_settings, valid_namespace, within_max};
use super::dispatch::{Inner, Registry};
use super::entry::UnpreparedTool;
use super::into_tool::IntoTool;
use crate::engine::{ApprovalHook, Defaults, MAX_ARGS_DEPTH, Shared, StoreMeta, ToolSettings};
use crate::error::RegistryError;
use crate::seal::ResultKeys;
use crate::store::memory::MemoryStore;
use crate::store::{ApprovalRequest, IdemStore};
use crate::tool::{OnInFlight, WriteOptions};

impl<S: Send + Sync + 'static> Registry<S> {
    /// Starts a registry whose tools see `state` through
    /// [`Ctx::state`](crate::Ctx::state).
    pub fn builder(state: S) -> RegistryBuilder<S> {
        RegistryBuilder {
            state,
            store: None,
            namespace: None,
            defaults: Defaults::default(),
            store_timeout: Duration::from_secs(1),
            require_tenant: false,
            result_keys: None,
            on_approval_requested: None,
            #[cfg(feature = "notify")]
            notify: None,
            tools: Vec::new(),
        }
    }
}

/// Builds a [`Registry`]; see [`Registry::builder`].
pub struct RegistryBuilder<S> {
    state: S,
    store: Option<Arc<dyn IdemStore>>,
    namespace: Option<String>,
    defaults: Defaults,
    store_timeout: Duration,
    require_tenant: bool,
    result_keys: Option<Arc<ResultKeys>>,
    on_approval_requested: Option<ApprovalHook>,
    #[cfg(feature = "notify")]
    notify: Option<crate::notify::Notify>,
    tools: Vec<Box<dyn UnpreparedTool<S>>>,
}

impl<S: Send + Sync + 'static> RegistryBuilder<S> {
    /// The store write tools go through (default: a fresh [`MemoryStore`]).
    /// Pass an `Arc` of a store to keep a handle on it; an
    /// `Arc<dyn IdemStore>` (a store chosen at run time, shared with other
    /// registries) is held as it is.
    pub fn store<T: IdemStore>(mut self, store: T) -> Self {
        let erased = (&store as &dyn Any).downcast_ref::<Arc<dyn IdemStore>>();
        self.store = Some(match erased {
            Some(erased) => Arc::clone(erased),
            None => Arc::new(store),
        });
        self
    }

    /// Encrypts every recorded result and error with `keys` (feature
    /// `encryption`; module docs of [`ResultKeys`]): the store holds
    /// hashes and ciphertext only, and a record that does not open under
    /// the keys is an error, never a run.
    #[cfg(feature = "encryption")]
    pub fn encrypt_results(mut self, keys: ResultKeys) -> Self {
        self.result_keys = Some(Arc::new(keys));
        self
    }

    /// A prefix of every stored key (`"<namespace>:idem:<hex>"`), to keep
    /// applications or environments apart in one store.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Default claim lease of write tools (30 s).
    pub fn default_lease(mut self, lease: Duration) -> Self {
        self.defaults.lease = lease;
        self
    }

    /// Default result TTL of write tools (24 h).
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.defaults.ttl = ttl;
        self
    }

    /// Default ceiling on holding a claim (10 min): on lease renewals and
    /// on retries of recording an outcome (see
    /// [`WriteOptions::max_hold`](crate::WriteOptions::max_hold)).
    pub fn default_max_hold(mut self, max_hold: Duration) -> Self {
        self.defaults.max_hold = max_hold;
        self
    }

    /// Default ceiling on the size of a recorded result or error, as JSON
    /// text ([`DEFAULT_MAX_RESULT_BYTES`](crate::DEFAULT_MAX_RESULT_BYTES), 1 MiB; at least 1 KiB).
    ///
    /// A larger result is returned to its caller but never sent to the
    /// store: the operation is recorded as a permanent failure saying it
    /// ran and its result was too large to replay, so duplicates get that
    /// error and never run it again. A larger error text is cut to fit.
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.defaults.max_result_bytes = bytes;
        self
    }

    /// The largest arguments a call may bring, as JSON text (1 MiB; at
    /// least 1 KiB). Larger arguments (a model gone astray, or a hostile
    /// caller) are refused with [`ToolError::InvalidArgs`](crate::ToolError::InvalidArgs)
    /// before they are parsed or hashed; nothing runs.
    pub fn max_args_bytes(mut self, bytes: usize) -> Self {
        self.defaults.args.max_bytes = bytes;
        self
    }

    /// How deeply a call's arguments may nest objects and arrays (64; from
    /// 2 to 128, as deep as serde_json parses). Deeper arguments are refused with
    /// [`ToolError::InvalidArgs`](crate::ToolError::InvalidArgs) before
    /// anything recurses into them; nothing runs.
    pub fn max_args_depth(mut self, depth: usize) -> Self {
        self.defaults.args.max_depth = depth;
        self
    }

    /// Requires a tenant on every call: a [`Registry::call`] or
    /// [`Registry::identify`] whose context names none
    /// ([`CallContext::tenant`](crate::CallContext::tenant)) is refused with
    /// [`ToolError::TenantRequired`](crate::ToolError::TenantRequired). For a service that serves
    /// several customers from one registry and one store, so that a call
    /// that forgot its tenant can never share another's records.
    pub fn require_tenant(mut self) -> Self {
        self.require_tenant = true;
        self
    }

    /// Calls `hook` each time an operation comes to await a person's
    /// approval (once per operation: its duplicates are not asked again),
    /// after its record is written, with the tool, the key the person
    /// approves and what the operation is: to post it to a chat or a
    /// queue. It runs on the call's task, so it should hand the request
    /// off (a channel send) rather than wait on the network; a panic in it
    /// is caught and logged.
    ///
    /// ```
    /// use idem_runtime::Registry;
    ///
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let registry = Registry::builder(())
    ///     .on_approval_requested(move |request| {
    ///         let _ = tx.send((request.tool.clone(), request.key.clone()));
    ///     })
    ///     .build()
    ///     .unwrap();
    /// # drop((registry, rx));
    /// ```
    pub fn on_approval_requested(
        mut self,
        hook: impl Fn(&ApprovalRequest) + Send + Sync + 'static,
    ) -> Self {
        self.on_approval_requested = Some(Arc::new(hook));
        self
    }

    /// How long a call of any tool that asks for approval waits for a
    /// person's decision, unless the tool says otherwise
    /// ([`WriteOptions::approval_wait`]; no wait by default). Each such
    /// tool's `approval_window` must be at least as long.
    pub fn default_approval_wait(mut self, wait: Duration) -> Self {
        self.defaults.approval_wait = wait;
        self
    }

    /// How long a call of any tool that leaves an unknown outcome to a
    /// person (`on_uncertain` other than `rerun`) waits for it to be
    /// resolved, unless the tool says otherwise
    /// ([`WriteOptions::uncertain_wait`]; no wait by default).
    pub fn default_uncertain_wait(mut self, wait: Duration) -> Self {
        self.defaults.uncertain_wait = wait;
        self
    }

    /// Sends webhooks as `notify` says (feature `notify`; the
    /// [`notify`](crate::notify) module's docs): when an operation comes
    /// to await a person's approval, when this registry records an
    /// approval or a refusal, when an outcome becomes unknown, and when
    /// this registry resolves one. Sent beside the calls, never delaying
    /// or failing one.
    ///
    /// ```
    /// use idem_runtime::Registry;
    /// use idem_runtime::notify::{Notify, WebhookSecret};
    ///
    /// let secret: WebhookSecret = std::env::var("IDEM_WEBHOOK_SECRET")
    ///     .unwrap_or_else(|_| WebhookSecret::generate().to_string())
    ///     .parse()?;
    /// let registry = Registry::builder(())
    ///     .notify(Notify::standard("https://hooks.example.com/idem", secret)?)
    ///     .build()?;
    /// # drop(registry);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "notify")]
    #[cfg_attr(docsrs, doc(cfg(feature = "notify")))]
    pub fn notify(mut self, notify: crate::notify::Notify) -> Self {
        self.notify = Some(notify);
        self
    }

    /// Default behaviour of a duplicate that arrives in flight (reject).
    pub fn default_on_in_flight(mut self, on_in_flight: OnInFlight) -> Self {
        self.defaults.on_in_flight = on_in_flight;
        self
    }

    /// How long any one store operation may take before the call fails
    /// with [`StoreError::Timeout`](crate::StoreError::Timeout) (1 s).
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }

    /// Registers a tool: a `#[read_tool]` / `#[write_tool]` function's
    /// name, or any [`ReadTool`](crate::ReadTool) / [`WriteTool`](crate::WriteTool).
    pub fn tool<T, M>(mut self, tool: T) -> Self
    where
        T: IntoTool<S, M>,
    {
        self.tools.push(tool.into_erased().0);
        self
    }

    /// Checks every tool and setting and builds the registry.
    pub fn build(self) -> Result<Registry<S>, RegistryError> {
        if let Some(ns) = &self.namespace
            && !valid_namespace(ns)
        {
            return Err(RegistryError::InvalidNamespace {
                namespace: ns.clone(),
            });
        }
        let d = &self.defaults;
        check_settings("*", &ToolSettings::of(&WriteOptions::new(), d))?;
        if d.args.max_bytes < 1024 || !(2..=MAX_ARGS_DEPTH).contains(&d.args.max_depth) {
            return Err(RegistryError::InvalidSetting {
                tool: "*".into(),
                message: format!(
                    "max_args_bytes must be at least 1024 and max_args_depth from 2 to {MAX_ARGS_DEPTH}, got {} and {}",
                    d.args.max_bytes, d.args.max_depth
                ),
            });
        }
        if self.store_timeout.is_zero() {
            return Err(RegistryError::InvalidSetting {
                tool: "*".into(),
                message: "store_timeout must be greater than zero".into(),
            });
        }
        within_max("*", "store_timeout", self.store_timeout)?;
        within_max("*", "approval_wait", d.approval_wait)?;
        within_max("*", "uncertain_wait", d.uncertain_wait)?;
        #[cfg(feature = "notify")]
        let notifier = match self.notify {
            Some(notify) => Some(crate::notify::Webhooks::new(notify).map_err(|e| {
                RegistryError::InvalidSetting {
                    tool: "*".into(),
                    message: e.to_string(),
                }
            })?),
            None => None,
        };
        let mut by_name = HashMap::with_capacity(self.tools.len());
        let store: Arc<dyn IdemStore> = self.store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        let mut definitions = Vec::with_capacity(self.tools.len());
        let mut tools = Vec::with_capacity(self.tools.len());
        for (index, tool) in self.tools.into_iter().enumerate() {
            let (def, tool) = tool.prepare(&self.defaults)?;
            tools.push(tool);
            if by_name.insert(def.name.clone(), index).is_some() {
                return Err(RegistryError::DuplicateName { name: def.name });
            }
            definitions.push(def);
        }
        let mut by_name: Box<[(String, usize)]> = by_name.into_iter().collect();
        by_name.sort_unstable();
        Ok(Registry {
            inner: Arc::new(Inner {
                shared: Shared {
                    state: Arc::new(self.state),
                    store_meta: StoreMeta::of(&*store),
                    store,
                    namespace: self.namespace.map(String::into_boxed_str),
                    store_timeout: self.store_timeout,
                    defaults: self.defaults,
                    require_tenant: self.require_tenant,
                    result_keys: self.result_keys,
                    on_approval_requested: self.on_approval_requested,
                    #[cfg(feature = "notify")]
                    notifier,
                },
                #[cfg(feature = "metrics")]
                tool_keys: definitions
                    .iter()
                    .map(|d| crate::metrics::ToolKeys::new(&d.name))
                    .collect(),
                tools,
                by_name,
                definitions,
            }),
        })
    }
}

impl<S> std::fmt::Debug for RegistryBuilder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("tools", &self.tools.len())
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}
