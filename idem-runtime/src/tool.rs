//! The tool traits the macros implement (and that can be implemented by
//! hand), their settings and their definitions.

use std::borrow::Cow;
use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ctx::{Ctx, WriteCtx};
use crate::key::ScopeKind;

/// A tool's name and description, as the model sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolInfo {
    /// Matches `^[A-Za-z_][A-Za-z0-9_-]{0,63}$` (checked at registration).
    pub name: Cow<'static, str>,
    /// What the tool does and when to call it.
    pub description: Cow<'static, str>,
    /// The JSON Schema of the arguments, for a tool known only at run time
    /// (a proxied MCP server's tool) whose `Args` type is any JSON
    /// (`serde_json::Map<String, Value>`): it replaces the schema of
    /// `Args`, so a write tool's sets (`"uniqueItems": true`) and field
    /// roles are found in it. `None` (the default) takes the schema of
    /// `Args`. It must describe a JSON object (`"type": "object"`).
    pub input_schema: Option<Value>,
    /// The JSON Schema of the tool's result, when it is known and an
    /// object (MCP's `outputSchema`). The macros fill it in when the
    /// result type implements `JsonSchema`.
    pub output_schema: Option<Value>,
}

impl ToolInfo {
    /// A name and a description.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
    ) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: description.into(),
            input_schema: None,
            output_schema: None,
        }
    }

    /// The arguments' schema as given, for a tool known only at run time
    /// (see [`input_schema`](Self::input_schema)).
    pub fn with_input_schema(mut self, schema: Value) -> ToolInfo {
        self.input_schema = Some(schema);
        self
    }

    /// The result's schema, from `T`: kept when it describes a JSON object
    /// (the only results MCP gives an `outputSchema`), dropped otherwise.
    pub fn with_output_type<T: schemars::JsonSchema>(self) -> ToolInfo {
        self.with_output_schema(crate::schema::output_schema::<T>())
    }

    /// The result's schema as given (normally from
    /// [`with_output_type`](Self::with_output_type)).
    pub fn with_output_schema(mut self, schema: Option<Value>) -> ToolInfo {
        self.output_schema = schema;
        self
    }
}

/// A write tool's field roles, as dotted paths (`order.id`) of JSON names
/// (docs/spec.md, "Field roles"); the engine applies them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Roles {
    /// Only these are keyed; every other field not ignored is checked.
    pub(crate) key: Option<&'static [&'static str]>,
    /// These are checked; every other field not ignored is keyed.
    pub(crate) check: Option<&'static [&'static str]>,
    /// These are ignored.
    pub(crate) ignore: Option<&'static [&'static str]>,
    /// These are left out of the record's readable view of the arguments
    /// (shown as `"(hidden)"`), whatever their role.
    pub(crate) hide: Option<&'static [&'static str]>,
}

pub use idem_rules::{
    APPROVAL_WINDOW, Approval, OnInFlight, OnStoreError, OnUncertain, SettingError, WaitError,
    Waits, parse_duration,
};

/// The settings of a write tool; unset ones take the registry's defaults.
///
/// Built with `const` methods, so the macros (and hand-written tools) can
/// keep them in a constant:
///
/// ```
/// use std::time::Duration;
/// use idem_runtime::{OnInFlight, ScopeKind, WriteOptions};
/// const OPTS: WriteOptions = WriteOptions::new()
///     .lease(Duration::from_secs(10))
///     .scope(ScopeKind::Global)
///     .key_fields(&["order_id"])
///     .on_in_flight(OnInFlight::Wait(Duration::from_secs(5)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    pub(crate) lease: Option<Duration>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) max_result_bytes: Option<usize>,
    pub(crate) on_in_flight: Option<OnInFlight>,
    pub(crate) scope: ScopeKind,
    pub(crate) version: u32,
    pub(crate) roles: Roles,
    pub(crate) on_store_error: OnStoreError,
    pub(crate) on_uncertain: OnUncertain,
    pub(crate) approval: Approval,
    pub(crate) approval_window: Option<Duration>,
    pub(crate) approval_wait: Option<Duration>,
    pub(crate) uncertain_wait: Option<Duration>,
    pub(crate) destructive: bool,
    pub(crate) open_world: bool,
}

impl WriteOptions {
    /// Everything from the registry's defaults; run scope, version 1,
    /// keyed on all arguments, destructive and open-world (MCP's defaults).
    pub const fn new() -> WriteOptions {
        WriteOptions {
            lease: None,
            ttl: None,
            max_hold: None,
            max_result_bytes: None,
            on_in_flight: None,
            scope: ScopeKind::Run,
            version: 1,
            roles: Roles {
                key: None,
                check: None,
                ignore: None,
                hide: None,
            },
            on_store_error: OnStoreError::FailClosed,
            on_uncertain: OnUncertain::Rerun,
            approval: Approval::Never,
            approval_window: None,
            approval_wait: None,
            uncertain_wait: None,
            destructive: true,
            open_world: true,
        }
    }

    /// How long a claim is held without renewal (default 30 s). A heartbeat
    /// renews it while the body runs.
    pub const fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long a recorded result or permanent failure is replayed
    /// (default 24 h).
    pub const fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// The ceiling on holding a claim (default 10 min), counted from the
    /// claim: the heartbeat renews the lease until then (a body that runs
    /// longer keeps running, but its claim lapses and it is told through
    /// [`WriteCtx::lease_lost`](crate::WriteCtx::lease_lost)), and an
    /// outcome that cannot be recorded at once is retried until then (or
    /// while the lease is still held, if that is later).
    pub const fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = Some(max_hold);
        self
    }

    /// The largest result or error text recorded for this tool (the
    /// registry's [`max_result_bytes`](crate::RegistryBuilder::max_result_bytes)
    /// by default): a larger result is returned once and recorded as a
    /// failure that says so, never run again.
    pub const fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = Some(bytes);
        self
    }

    /// What a duplicate does while the first call runs.
    pub const fn on_in_flight(mut self, on_in_flight: OnInFlight) -> Self {
        self.on_in_flight = Some(on_in_flight);
        self
    }

    /// Per run (default) or global keys.
    pub const fn scope(mut self, scope: ScopeKind) -> Self {
        self.scope = scope;
        self
    }

    /// Part of the key: bump it when a change makes old results wrong to
    /// replay.
    pub const fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Only these argument fields are *keyed* (form the key): every other
    /// field not ignored is *checked*, so the same key with another payload
    /// is a [`KeyConflict`](crate::ToolError::KeyConflict). A dotted path
    /// (`order.id`) names a field of a nested object. Not with
    /// [`check_fields`](Self::check_fields).
    pub const fn key_fields(mut self, fields: &'static [&'static str]) -> Self {
        self.roles.key = Some(fields);
        self
    }

    /// These argument fields are *checked*: not part of the key, but a
    /// duplicate with another value there is a
    /// [`KeyConflict`](crate::ToolError::KeyConflict). Every other field not
    /// ignored stays keyed.
    pub const fn check_fields(mut self, fields: &'static [&'static str]) -> Self {
        self.roles.check = Some(fields);
        self
    }

    /// These argument fields are *ignored*: neither keyed nor checked, so a
    /// duplicate that differs only there is replayed the first call's
    /// result, made with the first call's value. For what a model rewords
    /// freely (a reason, a note) and the operation does not depend on.
    pub const fn ignore_fields(mut self, fields: &'static [&'static str]) -> Self {
        self.roles.ignore = Some(fields);
        self
    }

    /// These argument fields are *hidden*: each record keeps a readable
    /// view of its operation's arguments for operators
    /// ([`About`](crate::store::About), shown by `idem pending`, `list` and
    /// `show`), where these show as `"(hidden)"`. For what a person
    /// resolving a record need not read (a card number, a password). A
    /// hidden field keeps its role: hiding changes no key.
    pub const fn hide_fields(mut self, fields: &'static [&'static str]) -> Self {
        self.roles.hide = Some(fields);
        self
    }

    /// What the tool does when its claim cannot reach the store: refuse
    /// (the default) or run without a claim ([`OnStoreError`]).
    pub const fn on_store_error(mut self, policy: OnStoreError) -> Self {
        self.on_store_error = policy;
        self
    }

    /// What the tool does when an earlier attempt's outcome is uncertain:
    /// run again (the default) or refuse ([`OnUncertain`]).
    pub const fn on_uncertain(mut self, policy: OnUncertain) -> Self {
        self.on_uncertain = policy;
        self
    }

    /// Whether an operation waits for a person's approval before it runs
    /// ([`Approval`]; `Never` by default). With [`Approval::Decided`] the
    /// tool's [`WriteTool::needs_approval`] decides, call by call.
    pub const fn approval(mut self, approval: Approval) -> Self {
        self.approval = approval;
        self
    }

    /// How long an approval of an operation stays good
    /// ([`APPROVAL_WINDOW`](crate::APPROVAL_WINDOW), 1 h, by default): the
    /// next call of the operation within it runs the body; after it, the
    /// approval lapses and that call asks again. Kept in the awaiting
    /// record, so that a person approving from a shell (`idem approve`)
    /// approves on the tool's terms.
    pub const fn approval_window(mut self, window: Duration) -> Self {
        self.approval_window = Some(window);
        self
    }

    /// How long a call of an operation that awaits a person's approval
    /// waits for the decision before it answers
    /// [`ToolError::ApprovalRequired`](crate::ToolError::ApprovalRequired)
    /// (the registry's
    /// [`default_approval_wait`](crate::RegistryBuilder::default_approval_wait),
    /// no wait, by default). The decision may be made in another process:
    /// the waiting call learns of it from the store. Approved, the body
    /// runs once and the call answers its result; refused, the call
    /// answers [`ToolError::Denied`](crate::ToolError::Denied).
    /// Duplicates that come while it waits wait too, and get the same
    /// answer. A wait holds nothing: a call dropped (cancelled) or a
    /// process killed while it waits leaves the operation awaiting, as
    /// without a wait. At most the [`approval_window`](Self::approval_window),
    /// and only for a tool that asks for approval.
    pub const fn approval_wait(mut self, wait: Duration) -> Self {
        self.approval_wait = Some(wait);
        self
    }

    /// How long a call of an operation whose outcome is unknown waits for
    /// a person to resolve it (`idem resolve`,
    /// [`Registry::resolve`](crate::Registry::resolve)) before it answers
    /// [`ToolError::OutcomeUnknown`](crate::ToolError::OutcomeUnknown) (the
    /// registry's
    /// [`default_uncertain_wait`](crate::RegistryBuilder::default_uncertain_wait),
    /// no wait, by default): resolved as done, the call answers the
    /// result given; as failed, that failure; released, the body runs
    /// once. Only for a tool that refuses to run an uncertain operation
    /// again ([`OnUncertain::Refuse`]). A wait holds nothing, as
    /// [`approval_wait`](Self::approval_wait)'s does not.
    pub const fn uncertain_wait(mut self, wait: Duration) -> Self {
        self.uncertain_wait = Some(wait);
        self
    }

    /// MCP's `destructiveHint`.
    pub const fn destructive(mut self, destructive: bool) -> Self {
        self.destructive = destructive;
        self
    }

    /// MCP's `openWorldHint`.
    pub const fn open_world(mut self, open_world: bool) -> Self {
        self.open_world = open_world;
        self
    }
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions::new()
    }
}

/// What a read tool's arguments must be: deserialized from the model's JSON
/// and described to it by their JSON schema.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a read tool's arguments: it must implement `Deserialize` and `JsonSchema`",
    label = "the arguments of this tool",
    note = "the model's JSON is deserialized into it and its JSON schema tells the model what to send: add `#[derive(Deserialize, JsonSchema)]` to `{Self}`"
)]
pub trait ReadArgs: DeserializeOwned + JsonSchema {}
impl<T: DeserializeOwned + JsonSchema> ReadArgs for T {}

/// What a write tool's arguments must be: as [`ReadArgs`], and serializable,
/// since the key is derived from them re-serialized.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a write tool's arguments: it must implement `Serialize`, `Deserialize` and `JsonSchema`",
    label = "the arguments of this tool",
    note = "the model's JSON is deserialized into it, its JSON schema tells the model what to send, and it is re-serialized to derive the idempotency key: add `#[derive(Serialize, Deserialize, JsonSchema)]` to `{Self}`"
)]
pub trait WriteArgs: Serialize + DeserializeOwned + JsonSchema {}
impl<T: Serialize + DeserializeOwned + JsonSchema> WriteArgs for T {}

/// What a read tool's result must be: serializable to JSON for the model.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's result: it must implement `Serialize`",
    label = "the result type of this tool",
    note = "the result is sent to the model as JSON: add `#[derive(Serialize)]` to `{Self}`"
)]
pub trait ReadOutput: Serialize {}
impl<T: Serialize> ReadOutput for T {}

/// What a write tool's result must be: recorded as JSON and replayed to
/// duplicates, so it must round-trip.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a write tool's result: it must implement `Serialize` and `Deserialize`",
    label = "the result type of this write tool",
    note = "a write tool's result is recorded and replayed to duplicates, so it must round-trip through JSON: add `#[derive(Serialize, Deserialize)]` to `{Self}`"
)]
pub trait WriteOutput: Serialize + DeserializeOwned {}
impl<T: Serialize + DeserializeOwned> WriteOutput for T {}

/// What a tool's error must be: displayable, since its text is what the
/// model reads (and what is recorded for a permanent failure).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's error: it must implement `Display`",
    label = "the error type of this tool",
    note = "the error's text is what the model reads instead of a result: implement `std::fmt::Display` for `{Self}` (e.g. with `thiserror`)"
)]
pub trait ToolFailure: Display {}
impl<T: Display> ToolFailure for T {}

/// A tool without side effects: called directly, never stored.
///
/// `#[read_tool]` implements this; implement it by hand for tools known
/// only at run time. A type that lacks what it must have is an error
/// naming that type and what it lacks.
pub trait ReadTool<S>: Send + Sync + 'static {
    /// The arguments, deserialized from the model's JSON and described to
    /// it by their schema: `Deserialize + JsonSchema + Send`.
    type Args: ReadArgs + Send;
    /// The result, serialized back to the model: `Serialize + Send`.
    type Output: ReadOutput + Send;
    /// The tool's own error, whose text is what the model reads:
    /// `Display + Send`.
    type Error: ToolFailure + Send;

    /// Name and description.
    fn info(&self) -> ToolInfo;

    /// Runs the tool.
    fn call(
        &self,
        args: Self::Args,
        ctx: &Ctx<S>,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// A tool with side effects: every call goes through the idempotent
/// wrapper (claim, run once, record, replay).
///
/// `#[write_tool]` implements this; implement it by hand for tools known
/// only at run time.
pub trait WriteTool<S>: Send + Sync + 'static {
    /// The arguments: `Serialize + Deserialize + JsonSchema + Send`. They
    /// are re-serialized to derive the key, so the model's formatting never
    /// changes it.
    type Args: WriteArgs + Send;
    /// The result, recorded and replayed, so it must round-trip:
    /// `Serialize + Deserialize + Send`.
    type Output: WriteOutput + Send;
    /// The tool's own error, whose text is what the model reads and what
    /// is recorded for a permanent failure: `Display + Send`.
    type Error: ToolFailure + Send;

    /// Name and description.
    fn info(&self) -> ToolInfo;

    /// Settings; unset ones take the registry's defaults.
    fn options(&self) -> WriteOptions {
        WriteOptions::new()
    }

    /// Whether `error` is permanent: recorded and replayed to duplicates
    /// until the TTL, instead of releasing the key for a retry. Default:
    /// every error is transient.
    fn is_permanent(&self, error: &Self::Error) -> bool {
        let _ = error;
        false
    }

    /// Whether `error` leaves the operation's outcome unknown (a timeout
    /// talking to the downstream: the request may have landed), so the
    /// tool's [`OnUncertain`] policy decides what happens next, as after a
    /// lapsed claim. Default: no error does. Asked before
    /// [`is_permanent`](Self::is_permanent).
    fn is_uncertain(&self, error: &Self::Error) -> bool {
        let _ = error;
        false
    }

    /// Asks the downstream whether the operation with these arguments
    /// took effect, when an earlier attempt's outcome is uncertain and the
    /// tool's policy is [`OnUncertain::Verify`]: [`Verified::Done`] with
    /// the result to record (the body does not run), [`Verified::NotDone`]
    /// (it runs), or [`Verified::Unknown`] (the record is left unknown for
    /// an operator, as with [`OnUncertain::Refuse`]). An error (the
    /// downstream could not be asked) settles nothing: the claim lapses
    /// with its lease and the next duplicate verifies again. `args` are a
    /// copy of the call's (the body gets its own); `ctx` is the claim the
    /// verification runs under (the key, its attempt, the tenant and
    /// state). Default: cannot tell.
    fn verify(
        &self,
        args: Self::Args,
        ctx: &WriteCtx<S>,
    ) -> impl Future<Output = Result<Verified<Self::Output>, String>> + Send {
        let _ = (args, ctx);
        std::future::ready(Ok(Verified::Unknown))
    }

    /// Whether this call needs a person's approval before it runs, for a
    /// tool whose [`Approval`] is [`Decided`](Approval::Decided) (a charge
    /// above a limit): asked with the call's arguments and context before
    /// its key is claimed. Default: every call does.
    fn needs_approval(&self, args: &Self::Args, ctx: &Ctx<S>) -> bool {
        let _ = (args, ctx);
        true
    }

    /// Runs the operation. Pass `ctx.idem_key()` downstream.
    fn call(
        &self,
        args: Self::Args,
        ctx: &WriteCtx<S>,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// What a downstream says of an operation whose outcome was uncertain
/// ([`WriteTool::verify`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified<T> {
    /// It happened, with this result: recorded and answered to every
    /// duplicate; the body does not run.
    Done(T),
    /// It did not happen (and will not): the body runs.
    NotDone,
    /// It cannot tell: the record is left unknown for an operator.
    Unknown,
}

/// Whether a tool only reads or also writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// No side effects; never stored.
    Read,
    /// Side effects; idempotent through the store.
    Write,
}

/// A registered tool as the model is told of it; what each [`Provider`](crate::Provider) writes its tools from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ToolDef {
    /// The tool's name.
    pub name: String,
    /// The tool's description.
    pub description: String,
    /// Read or write.
    pub kind: ToolKind,
    /// JSON Schema of the arguments: an object root with an explicit
    /// `required` and no root `title`.
    pub input_schema: Value,
    /// How a write tool scopes its keys (`None` for read tools): only a
    /// `global` tool is idempotent whatever run it is called in.
    #[serde(serialize_with = "scope_name")]
    pub scope: Option<ScopeKind>,
    /// MCP's `destructiveHint` (always `false` for read tools).
    pub destructive: bool,
    /// MCP's `openWorldHint`.
    pub open_world: bool,
    /// JSON Schema of the result when it is known and an object (MCP's
    /// `outputSchema`); see [`ToolInfo::output_schema`].
    pub output_schema: Option<Value>,
}

/// A scope by its name (`"run"`, `"global"`), as [`ToolDef`] shows it.
fn scope_name<S: serde::Serializer>(scope: &Option<ScopeKind>, s: S) -> Result<S::Ok, S::Error> {
    scope.map(ScopeKind::name).serialize(s)
}
