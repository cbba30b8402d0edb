//! The registry: tools by name, their definitions, and dispatch.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::engine::{self, Resolved, Shared};
use crate::error::{RegistryError, ToolError};
use crate::key::{Fingerprint, IdemKey};
use crate::render::RenderError;
use crate::schema;
use crate::store::memory::MemoryStore;
use crate::store::{BoxFuture, DynIdemStore, IdemStore};
use crate::tool::{OnInFlight, ReadTool, ToolDef, ToolInfo, ToolKind, WriteOptions, WriteTool};

/// Registry-wide defaults of the write settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Defaults {
    lease: Duration,
    ttl: Duration,
    max_hold: Duration,
    on_in_flight: OnInFlight,
    max_result_bytes: usize,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            lease: Duration::from_secs(30),
            ttl: Duration::from_secs(24 * 3600),
            max_hold: Duration::from_secs(600),
            on_in_flight: OnInFlight::Reject,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }
}

/// The smallest lease accepted: the heartbeat renews every third of it.
const MIN_LEASE: Duration = Duration::from_millis(10);

/// The default [`RegistryBuilder::max_result_bytes`]: 1 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1 << 20;

/// The smallest `max_result_bytes` accepted: room for an error message.
const MIN_RESULT_BYTES: usize = 1024;

/// The tools of an application, their definitions for the model, and the
/// store their writes go through.
///
/// Cheap to clone (an `Arc`); share one per application.
///
/// ```
/// # use idem_runtime::*;
/// # use serde_json::json;
/// # struct Echo;
/// # impl ReadTool<()> for Echo {
/// #     type Args = serde_json::Map<String, serde_json::Value>;
/// #     type Output = serde_json::Map<String, serde_json::Value>;
/// #     type Error = std::convert::Infallible;
/// #     fn info(&self) -> ToolInfo { ToolInfo::new("echo", "Echo the arguments.") }
/// #     async fn call(&self, args: Self::Args, _: &Ctx<()>) -> Result<Self::Args, Self::Error> { Ok(args) }
/// # }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = Registry::builder(())
///     .namespace("demo")
///     .tool(Echo)
///     .build()?;
/// let out = registry.call("run-1", "echo", json!({"hello": "world"})).await?;
/// assert_eq!(out, json!({"hello": "world"}));
/// # Ok(()) }
/// ```
pub struct Registry<S> {
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    shared: Shared<S>,
    tools: Vec<Box<dyn ErasedTool<S>>>,
    by_name: HashMap<String, usize>,
    definitions: Vec<ToolDef>,
}

impl<S> Clone for Registry<S> {
    fn clone(&self) -> Self {
        Registry {
            inner: self.inner.clone(),
        }
    }
}

impl<S> std::fmt::Debug for Registry<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.inner.by_name.keys().collect::<Vec<_>>())
            .field("namespace", &self.inner.shared.namespace)
            .finish_non_exhaustive()
    }
}

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
            tools: Vec::new(),
        }
    }

    /// The registered tools, in registration order.
    pub fn definitions(&self) -> &[ToolDef] {
        &self.inner.definitions
    }

    /// The tools for OpenAI Chat Completions' `tools`.
    pub fn openai_tools(&self) -> Value {
        self.render(ToolDef::openai)
    }

    /// The tools for OpenAI with `"strict": true` (structured outputs):
    /// fails, naming the tool and field, if a schema cannot be strict.
    pub fn openai_tools_strict(&self) -> Result<Value, RenderError> {
        self.definitions()
            .iter()
            .map(ToolDef::openai_strict)
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }

    /// The tools for Anthropic Messages' `tools`.
    pub fn anthropic_tools(&self) -> Value {
        self.render(ToolDef::anthropic)
    }

    /// The tools for Gemini's `tools`: one entry holding every
    /// `functionDeclarations`.
    pub fn gemini_tools(&self) -> Value {
        serde_json::json!([{ "functionDeclarations": self.render(ToolDef::gemini) }])
    }

    /// The tools as MCP `tools/list` lists them.
    pub fn mcp_tools(&self) -> Value {
        self.render(ToolDef::mcp)
    }

    fn render(&self, f: fn(&ToolDef) -> Value) -> Value {
        Value::Array(self.definitions().iter().map(f).collect())
    }

    /// The application state.
    pub fn state(&self) -> &S {
        &self.inner.shared.state
    }

    /// The store write tools go through.
    pub fn store(&self) -> &Arc<dyn DynIdemStore> {
        &self.inner.shared.store
    }

    /// The stored key and argument fingerprint that calling write tool
    /// `name` with `args` in run `run_id` would use, without calling it
    /// (`None` for a read tool). Useful to look an operation up in the
    /// store, or to tell support which key a payment was made under.
    pub fn identify(
        &self,
        run_id: &str,
        name: &str,
        args: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError> {
        if run_id.is_empty() {
            return Err(ToolError::InvalidRunId);
        }
        let Some(&index) = self.inner.by_name.get(name) else {
            return Err(ToolError::UnknownTool {
                name: name.to_owned(),
            });
        };
        self.inner.tools[index].identify(&self.inner.shared, run_id, args)
    }

    /// Calls tool `name` with the model's JSON arguments in run `run_id`.
    ///
    /// `args` is the arguments object; `null`, `""` and a string holding a
    /// JSON object are accepted too. A write tool runs at most once per
    /// operation (scope, tool, version, canonical typed arguments): a
    /// duplicate gets the recorded result, or
    /// [`ToolError::InFlight`] while the first call still runs.
    pub async fn call(&self, run_id: &str, name: &str, args: Value) -> Result<Value, ToolError> {
        if run_id.is_empty() {
            return Err(ToolError::InvalidRunId);
        }
        let Some(&index) = self.inner.by_name.get(name) else {
            return Err(ToolError::UnknownTool {
                name: name.to_owned(),
            });
        };
        self.inner.tools[index]
            .call(&self.inner.shared, run_id, args)
            .await
    }
}

/// Builds a [`Registry`]; see [`Registry::builder`].
pub struct RegistryBuilder<S> {
    state: S,
    store: Option<Arc<dyn DynIdemStore>>,
    namespace: Option<String>,
    defaults: Defaults,
    store_timeout: Duration,
    tools: Vec<Box<dyn ErasedTool<S>>>,
}

impl<S: Send + Sync + 'static> RegistryBuilder<S> {
    /// The store write tools go through (default: a fresh [`MemoryStore`]).
    /// Pass an `Arc` of a store to keep a handle on it.
    pub fn store(mut self, store: impl IdemStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// An already erased store, shared with other registries.
    pub fn shared_store(mut self, store: Arc<dyn DynIdemStore>) -> Self {
        self.store = Some(store);
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
    /// text ([`DEFAULT_MAX_RESULT_BYTES`], 1 MiB; at least 1 KiB).
    ///
    /// A larger result is returned to its caller but never sent to the
    /// store: the operation is recorded as a permanent failure saying it
    /// ran and its result was too large to replay, so duplicates get that
    /// error and never run it again. A larger error text is cut to fit.
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.defaults.max_result_bytes = bytes;
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
    /// name, or any [`ReadTool`] / [`WriteTool`].
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
        check_settings("*", d.lease, d.ttl, d.max_hold, d.max_result_bytes)?;
        if self.store_timeout.is_zero() {
            return Err(RegistryError::InvalidSetting {
                tool: "*".into(),
                message: "store_timeout must be greater than zero".into(),
            });
        }
        let tools = self.tools;
        let mut by_name = HashMap::with_capacity(tools.len());
        let mut definitions = Vec::with_capacity(tools.len());
        for (index, tool) in tools.iter().enumerate() {
            let def = tool.prepare(&self.defaults)?;
            if by_name.insert(def.name.clone(), index).is_some() {
                return Err(RegistryError::DuplicateName { name: def.name });
            }
            definitions.push(def);
        }
        Ok(Registry {
            inner: Arc::new(Inner {
                shared: Shared {
                    state: Arc::new(self.state),
                    store: self.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
                    namespace: self.namespace.map(String::into_boxed_str),
                    store_timeout: self.store_timeout,
                    defaults: self.defaults,
                },
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

/// Whether `name` matches `^[A-Za-z_][A-Za-z0-9_-]{0,63}$`, the names every
/// provider (OpenAI, Anthropic, Gemini, MCP) accepts.
pub fn valid_tool_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    matches!(bytes.first(), Some(b) if b.is_ascii_alphabetic() || *b == b'_')
        && bytes.len() <= 64
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

fn valid_namespace(ns: &str) -> bool {
    !ns.is_empty()
        && ns.len() <= 128
        && ns
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

fn check_settings(
    tool: &str,
    lease: Duration,
    ttl: Duration,
    max_hold: Duration,
    max_result_bytes: usize,
) -> Result<(), RegistryError> {
    let bad = |message: String| {
        Err(RegistryError::InvalidSetting {
            tool: tool.to_owned(),
            message,
        })
    };
    if lease < MIN_LEASE {
        return bad(format!(
            "lease must be at least {MIN_LEASE:?}, got {lease:?}"
        ));
    }
    if ttl.is_zero() {
        return bad("ttl must be greater than zero".into());
    }
    if max_hold < lease {
        return bad(format!(
            "max_hold ({max_hold:?}) must not be shorter than the lease ({lease:?})"
        ));
    }
    if max_result_bytes < MIN_RESULT_BYTES {
        return bad(format!(
            "max_result_bytes must be at least {MIN_RESULT_BYTES}, got {max_result_bytes}"
        ));
    }
    Ok(())
}

/// A tool ready to be registered; made by [`IntoTool`].
#[doc(hidden)]
pub struct Erased<S>(Box<dyn ErasedTool<S>>);

/// Something [`RegistryBuilder::tool`] accepts: a [`ReadTool`] or a
/// [`WriteTool`]. `M` tells the two apart and is inferred.
#[diagnostic::on_unimplemented(
    message = "this is not a tool usable with a registry of state `{S}`",
    label = "not a read or write tool for state `{S}`",
    note = "pass the name of a function annotated with `#[read_tool]` or `#[write_tool]`, or a type implementing `ReadTool<{S}>` or `WriteTool<{S}>`",
    note = "a tool whose context names a state type (`&Ctx<MyState>`) only registers with `Registry::builder(MyState {{ .. }})`; one whose argument, result or error types lack a trait registers once the errors at those types are fixed"
)]
pub trait IntoTool<S, M> {
    #[doc(hidden)]
    fn into_erased(self) -> Erased<S>;
}

/// Markers that tell [`IntoTool`]'s two implementations apart.
#[doc(hidden)]
pub mod marker {
    /// A [`ReadTool`](crate::ReadTool).
    #[derive(Debug)]
    pub enum Read {}
    /// A [`WriteTool`](crate::WriteTool).
    #[derive(Debug)]
    pub enum Write {}
    /// A `#[read_tool]` function, standing for its tool type `T`.
    #[derive(Debug)]
    pub struct ReadFn<T>(core::marker::PhantomData<T>);
    /// A `#[write_tool]` function, standing for its tool type `T`.
    #[derive(Debug)]
    pub struct WriteFn<T>(core::marker::PhantomData<T>);
    /// A tool function whose macro reported an error.
    #[derive(Debug)]
    pub enum Invalid {}
}

/// The parameter of the function a tool macro leaves in place of the
/// user's: it cannot be built, so the function cannot be called, only
/// passed to [`RegistryBuilder::tool`].
#[doc(hidden)]
pub struct CallThroughRegistry<T> {
    never: std::convert::Infallible,
    _tool: PhantomData<T>,
}

impl<T> CallThroughRegistry<T> {
    /// What the stand-in function does with a token it can never get.
    pub fn unreachable(self) -> std::convert::Infallible {
        self.never
    }
}

/// A tool function that failed to expand; its errors are the macro's.
#[doc(hidden)]
#[derive(Debug)]
pub struct InvalidTool;

impl<S, T, F> IntoTool<S, marker::ReadFn<T>> for F
where
    S: Send + Sync + 'static,
    F: Fn(CallThroughRegistry<T>) -> std::convert::Infallible,
    T: ReadTool<S> + Default,
{
    fn into_erased(self) -> Erased<S> {
        IntoTool::<S, marker::Read>::into_erased(T::default())
    }
}

impl<S, T, F> IntoTool<S, marker::WriteFn<T>> for F
where
    S: Send + Sync + 'static,
    F: Fn(CallThroughRegistry<T>) -> std::convert::Infallible,
    T: WriteTool<S> + Default,
{
    fn into_erased(self) -> Erased<S> {
        IntoTool::<S, marker::Write>::into_erased(T::default())
    }
}

impl<S, F> IntoTool<S, marker::Invalid> for F
where
    F: Fn(CallThroughRegistry<InvalidTool>) -> std::convert::Infallible,
{
    fn into_erased(self) -> Erased<S> {
        // Unreachable: the crate that named this tool did not compile.
        panic!("this tool failed to compile")
    }
}

impl<S: Send + Sync + 'static, T: ReadTool<S>> IntoTool<S, marker::Read> for T {
    fn into_erased(self) -> Erased<S> {
        let info = self.info();
        Erased(Box::new(ReadEntry {
            tool: self,
            info,
            _state: PhantomData,
        }))
    }
}

impl<S: Send + Sync + 'static, T: WriteTool<S>> IntoTool<S, marker::Write> for T {
    fn into_erased(self) -> Erased<S> {
        let info = self.info();
        let options = self.options();
        Erased(Box::new(WriteEntry {
            tool: self,
            info,
            options,
            _state: PhantomData,
        }))
    }
}

/// A tool behind a uniform, object-safe face.
trait ErasedTool<S>: Send + Sync {
    /// Validates the tool and its settings and returns its definition.
    fn prepare(&self, defaults: &Defaults) -> Result<ToolDef, RegistryError>;

    fn call<'a>(
        &'a self,
        shared: &'a Shared<S>,
        run_id: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;

    /// The key and fingerprint a call would use; `None` for read tools.
    fn identify(
        &self,
        shared: &Shared<S>,
        run_id: &str,
        args: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError>;
}

struct ReadEntry<S, T> {
    tool: T,
    info: ToolInfo,
    _state: PhantomData<fn() -> S>,
}

struct WriteEntry<S, T> {
    tool: T,
    info: ToolInfo,
    options: WriteOptions,
    _state: PhantomData<fn() -> S>,
}

fn check_info(info: &ToolInfo) -> Result<(), RegistryError> {
    if !valid_tool_name(&info.name) {
        return Err(RegistryError::InvalidName {
            name: info.name.to_string(),
        });
    }
    if info.description.trim().is_empty() {
        return Err(RegistryError::MissingDescription {
            name: info.name.to_string(),
        });
    }
    Ok(())
}

/// A write tool's settings with the registry's defaults filled in.
fn resolve(opts: &WriteOptions, defaults: &Defaults) -> Resolved {
    Resolved {
        lease: opts.lease.unwrap_or(defaults.lease),
        ttl: opts.ttl.unwrap_or(defaults.ttl),
        max_hold: opts.max_hold.unwrap_or(defaults.max_hold),
        on_in_flight: opts.on_in_flight.unwrap_or(defaults.on_in_flight),
        scope: opts.scope,
        version: opts.version,
        key_fields: opts.key_fields,
        max_result_bytes: opts.max_result_bytes.unwrap_or(defaults.max_result_bytes),
    }
}

impl<S: Send + Sync + 'static, T: ReadTool<S>> ErasedTool<S> for ReadEntry<S, T> {
    fn prepare(&self, _: &Defaults) -> Result<ToolDef, RegistryError> {
        check_info(&self.info)?;
        Ok(ToolDef {
            name: self.info.name.to_string(),
            description: self.info.description.to_string(),
            kind: ToolKind::Read,
            input_schema: schema::input_schema::<T::Args>(&self.info.name)?,
            destructive: false,
            open_world: false,
            output_schema: self.info.output_schema.clone(),
        })
    }

    fn call<'a>(
        &'a self,
        shared: &'a Shared<S>,
        run_id: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(engine::call_read(
            &self.tool,
            &self.info.name,
            shared,
            run_id,
            args,
        ))
    }

    fn identify(
        &self,
        _: &Shared<S>,
        _: &str,
        _: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError> {
        Ok(None)
    }
}

impl<S: Send + Sync + 'static, T: WriteTool<S>> ErasedTool<S> for WriteEntry<S, T> {
    fn prepare(&self, defaults: &Defaults) -> Result<ToolDef, RegistryError> {
        check_info(&self.info)?;
        let name = &self.info.name;
        let cfg = resolve(&self.options, defaults);
        check_settings(name, cfg.lease, cfg.ttl, cfg.max_hold, cfg.max_result_bytes)?;
        let input_schema = schema::input_schema::<T::Args>(name)?;
        if let Some(fields) = cfg.key_fields {
            schema::check_key_fields(name, &input_schema, fields)?;
        }
        Ok(ToolDef {
            name: name.to_string(),
            description: self.info.description.to_string(),
            kind: ToolKind::Write,
            input_schema,
            destructive: self.options.destructive,
            open_world: self.options.open_world,
            output_schema: self.info.output_schema.clone(),
        })
    }

    fn call<'a>(
        &'a self,
        shared: &'a Shared<S>,
        run_id: &'a str,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let cfg = resolve(&self.options, &shared.defaults);
            engine::call_write(&self.tool, &self.info.name, &cfg, shared, run_id, args).await
        })
    }

    fn identify(
        &self,
        shared: &Shared<S>,
        run_id: &str,
        args: Value,
    ) -> Result<Option<(IdemKey, Fingerprint)>, ToolError> {
        let cfg = resolve(&self.options, &shared.defaults);
        let (_, key, fingerprint) = engine::operation::<S, T>(
            &self.info.name,
            &cfg,
            shared.namespace.as_deref(),
            run_id,
            args,
        )?;
        Ok(Some((key, fingerprint)))
    }
}
