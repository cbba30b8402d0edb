//! What the macros' generated code reaches through. Not a public API: it
//! changes without notice.

pub use schemars;
pub use serde;
pub use serde_json;

pub use crate::registry::{CallThroughRegistry, InvalidTool, Registration, marker};
pub use crate::tool::{ReadArgs, ReadOutput, ToolFailure, WriteArgs, WriteOutput};
pub use crate::{
    Approval, Ctx, IntoTool, OnInFlight, OnStoreError, OnUncertain, ReadTool, ScopeKind, ToolInfo,
    Verified, WriteCtx, WriteOptions, WriteTool,
};

/// `ctx` without its state: what the `verify` of a tool that works with any
/// state is given.
pub fn stateless<S>(ctx: &WriteCtx<S>) -> WriteCtx<()> {
    ctx.stateless()
}

/// `ctx` without its state: what the approval function of a tool that
/// works with any state is given.
pub fn stateless_call<S>(ctx: &Ctx<S>) -> Ctx<()> {
    ctx.stateless()
}

/// What a function that decides approval (`approval = path`) answers:
/// `bool`.
#[diagnostic::on_unimplemented(
    message = "a function that decides approval returns `bool`, not `{Self}`",
    label = "returns `{Self}`",
    note = "it is a plain `fn`: an `async fn` returns a future, and cannot decide, because the decision is made before the call is claimed and does not wait"
)]
pub trait Decision {
    fn decided(self) -> bool;
}

impl Decision for bool {
    fn decided(self) -> bool {
        self
    }
}

/// A function that decides approval, called with `Args`: the tool's
/// parameters, each by reference, in the tool's order, then `&Ctx` if the
/// tool takes its context.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot decide whether a call needs a person's approval",
    label = "not `fn(&param, .., &Ctx) -> bool`",
    note = "a function that decides approval takes the tool's parameters, each by reference, in the order the tool declares them, then `&Ctx` if the tool takes its context, and returns `bool`"
)]
pub trait Decides<Args> {
    type Answer: Decision;
    fn decide(&self, args: Args) -> Self::Answer;
}

macro_rules! decides {
    ($($arg:ident),*) => {
        impl<$($arg,)* R: Decision, F: Fn($($arg),*) -> R> Decides<($($arg,)*)> for F {
            type Answer = R;
            #[allow(non_snake_case)]
            fn decide(&self, ($($arg,)*): ($($arg,)*)) -> R {
                self($($arg),*)
            }
        }
    };
}
decides!();
decides!(A);
decides!(A, B);
decides!(A, B, C);
decides!(A, B, C, D);
decides!(A, B, C, D, E);
decides!(A, B, C, D, E, G);
decides!(A, B, C, D, E, G, H);
decides!(A, B, C, D, E, G, H, I);
decides!(A, B, C, D, E, G, H, I, J);
decides!(A, B, C, D, E, G, H, I, J, K);
decides!(A, B, C, D, E, G, H, I, J, K, L);
decides!(A, B, C, D, E, G, H, I, J, K, L, M);
decides!(A, B, C, D, E, G, H, I, J, K, L, M, N);
decides!(A, B, C, D, E, G, H, I, J, K, L, M, N, O);
decides!(A, B, C, D, E, G, H, I, J, K, L, M, N, O, P);
decides!(A, B, C, D, E, G, H, I, J, K, L, M, N, O, P, Q);

/// Whether the call with `args` needs a person's approval, as `decides`
/// says (the generated `needs_approval` of a tool with `approval = path`).
pub fn needs_approval<Args, F: Decides<Args>>(decides: &F, args: Args) -> bool {
    decides.decide(args).decided()
}

/// The result type of a tool, for [`OutputSchemaKnown`] /
/// [`OutputSchemaUnknown`]: `(&&OutputType::<T>::new()).output_schema()`
/// is `T`'s schema when `T: JsonSchema` (autoref specialisation picks
/// the first), `None` otherwise.
pub struct OutputType<T: ?Sized>(std::marker::PhantomData<T>);

impl<T: ?Sized> OutputType<T> {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        OutputType(std::marker::PhantomData)
    }
}

pub trait OutputSchemaKnown {
    fn output_schema(&self) -> Option<serde_json::Value>;
}

impl<T: schemars::JsonSchema> OutputSchemaKnown for &OutputType<T> {
    fn output_schema(&self) -> Option<serde_json::Value> {
        crate::schema::output_schema::<T>()
    }
}

/// The output schema of result type `$t`, or `None` (see [`OutputType`]).
/// A macro of this crate's, so that the trait imports it needs are not the
/// user's code: no `unused_imports` to allow.
#[macro_export]
#[doc(hidden)]
macro_rules! __idem_output_schema {
    ($t:ty) => {{
        use $crate::__private::{OutputSchemaKnown as _, OutputSchemaUnknown as _};
        (&&$crate::__private::OutputType::<$t>::new()).output_schema()
    }};
}
pub use crate::__idem_output_schema as output_schema;

pub trait OutputSchemaUnknown {
    fn output_schema(&self) -> Option<serde_json::Value>;
}

impl<T: ?Sized> OutputSchemaUnknown for OutputType<T> {
    fn output_schema(&self) -> Option<serde_json::Value> {
        None
    }
}

/// Splits a tool function's return type alias into its result and error.
#[diagnostic::on_unimplemented(
    message = "a tool must return `Result<T, E>`, not `{Self}`",
    label = "not a `Result`",
    note = "`T` is what the model reads back (it must be `Serialize`), `E` the error it reads instead (it must be `Display`)"
)]
pub trait ToolResult {
    type Ok;
    type Err;
}

impl<T, E> ToolResult for Result<T, E> {
    type Ok = T;
    type Err = E;
}

/// Spanned checks the macros emit at the user's types, so that a missing
/// trait reads as a sentence about that type.
pub const fn assert_read_args<T: ReadArgs>() {}
/// See [`assert_read_args`].
pub const fn assert_write_args<T: WriteArgs>() {}
/// See [`assert_read_args`].
pub const fn assert_read_output<T: ReadOutput>() {}
/// See [`assert_read_args`].
pub const fn assert_write_output<T: WriteOutput>() {}
/// See [`assert_read_args`].
pub const fn assert_failure<T: ToolFailure>() {}
/// See [`assert_read_args`].
pub const fn assert_send_failure<T: SendFailure>() {}
/// See [`assert_read_args`].
pub const fn assert_read_ctx<T: ReadContext>() {}
/// See [`assert_read_args`].
pub const fn assert_write_ctx<T: WriteContext>() {}

/// A tool's context under any name: `Ctx<S>`, `WriteCtx<S>`, or an alias
/// of one (`type AppCtx = WriteCtx<App>`); the state type it names.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is taken for this tool's context, but it is neither `Ctx<S>` nor `WriteCtx<S>`",
    label = "a parameter taken by reference is the context",
    note = "a tool's arguments are owned (deserialized from the model's JSON): take this one by value, e.g. `String` rather than `&String`"
)]
pub trait ContextOf {
    type State;
}
impl<S> ContextOf for Ctx<S> {
    type State = S;
}
impl<S> ContextOf for WriteCtx<S> {
    type State = S;
}

/// The context a `#[read_tool]` takes.
#[diagnostic::on_unimplemented(
    message = "a `#[read_tool]` takes `&Ctx<S>`, and `{Self}` is not one",
    label = "not a read tool's context",
    note = "`&WriteCtx` belongs to `#[write_tool]`: if this tool has side effects, make it a `#[write_tool]`"
)]
pub trait ReadContext: ContextOf {}
impl<S> ReadContext for Ctx<S> {}

/// The context a `#[write_tool]` takes.
#[diagnostic::on_unimplemented(
    message = "a `#[write_tool]` takes `&WriteCtx<S>`, and `{Self}` is not one",
    label = "not a write tool's context",
    note = "a write tool's context carries its idempotency key (`ctx.idem_key()`), which it passes downstream: take `&WriteCtx<S>`"
)]
pub trait WriteContext: ContextOf {}
impl<S> WriteContext for WriteCtx<S> {}

/// What a tool's error must be besides displayable: a call runs on any
/// thread of the runtime, so its error must move between threads.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's error: it must be `Send`",
    label = "the error type of this tool",
    note = "a tool's call may run on any thread of the runtime, so its error must be `Send`: for a boxed error write `Box<dyn std::error::Error + Send + Sync>` (what `anyhow::Error` is)"
)]
pub trait SendFailure: Send {}
impl<T: Send> SendFailure for T {}

/// What a `#[read_tool]` parameter's type must be.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a read tool's parameter: it must implement `Deserialize` and `JsonSchema`",
    label = "the type of this parameter",
    note = "each parameter is a property of the tool's JSON schema, deserialized from the model's JSON: add `#[derive(Deserialize, JsonSchema)]` to `{Self}`"
)]
pub trait ReadParam: serde::de::DeserializeOwned + schemars::JsonSchema {}
impl<T: serde::de::DeserializeOwned + schemars::JsonSchema> ReadParam for T {}

/// What a `#[write_tool]` parameter's type must be.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a write tool's parameter: it must implement `Serialize`, `Deserialize` and `JsonSchema`",
    label = "the type of this parameter",
    note = "each parameter is a property of the tool's JSON schema, deserialized from the model's JSON and re-serialized to derive the idempotency key: add `#[derive(Serialize, Deserialize, JsonSchema)]` to `{Self}`"
)]
pub trait WriteParam:
    serde::Serialize + serde::de::DeserializeOwned + schemars::JsonSchema
{
}
impl<T: serde::Serialize + serde::de::DeserializeOwned + schemars::JsonSchema> WriteParam for T {}

/// See [`assert_read_args`].
pub const fn assert_read_param<T: ReadParam>() {}
/// See [`assert_read_args`].
pub const fn assert_write_param<T: WriteParam>() {}
