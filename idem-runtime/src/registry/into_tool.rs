//! What `RegistryBuilder::tool` accepts, and the plumbing the macros'
//! output reaches (through `__private`): a `#[read_tool]` / `#[write_tool]`
//! function's name stands for its tool type.

use std::marker::PhantomData;

use super::entry::{RegisteredRead, RegisteredWrite, UnpreparedTool};
use crate::tool::{ReadTool, WriteTool};

/// A tool ready to be registered; made by [`IntoTool`].
#[doc(hidden)]
pub struct Registration<S>(pub(super) Box<dyn UnpreparedTool<S>>);

/// Something [`RegistryBuilder::tool`](crate::RegistryBuilder::tool) accepts: a [`ReadTool`] or a
/// [`WriteTool`]. `M` tells the two apart and is inferred.
#[diagnostic::on_unimplemented(
    message = "this is not a tool usable with a registry of state `{S}`",
    label = "not a read or write tool for state `{S}`",
    note = "pass the name of a function annotated with `#[read_tool]` or `#[write_tool]`, or a type implementing `ReadTool<{S}>` or `WriteTool<{S}>`",
    note = "a tool whose context names a state type (`&Ctx<MyState>`) only registers with `Registry::builder(MyState {{ .. }})`; one whose argument, result or error types lack a trait registers once the errors at those types are fixed"
)]
pub trait IntoTool<S, M> {
    #[doc(hidden)]
    fn into_erased(self) -> Registration<S>;
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
    fn into_erased(self) -> Registration<S> {
        IntoTool::<S, marker::Read>::into_erased(T::default())
    }
}

impl<S, T, F> IntoTool<S, marker::WriteFn<T>> for F
where
    S: Send + Sync + 'static,
    F: Fn(CallThroughRegistry<T>) -> std::convert::Infallible,
    T: WriteTool<S> + Default,
{
    fn into_erased(self) -> Registration<S> {
        IntoTool::<S, marker::Write>::into_erased(T::default())
    }
}

impl<S, F> IntoTool<S, marker::Invalid> for F
where
    F: Fn(CallThroughRegistry<InvalidTool>) -> std::convert::Infallible,
{
    fn into_erased(self) -> Registration<S> {
        // Unreachable: the crate that named this tool did not compile.
        panic!("this tool failed to compile")
    }
}

impl<S: Send + Sync + 'static, T: ReadTool<S>> IntoTool<S, marker::Read> for T {
    fn into_erased(self) -> Registration<S> {
        let info = self.info();
        Registration(Box::new(RegisteredRead {
            tool: self,
            info,
            _state: PhantomData,
        }))
    }
}

impl<S: Send + Sync + 'static, T: WriteTool<S>> IntoTool<S, marker::Write> for T {
    fn into_erased(self) -> Registration<S> {
        let info = self.info();
        let options = self.options();
        Registration(Box::new(RegisteredWrite {
            tool: self,
            info,
            options,
            _state: PhantomData,
        }))
    }
}
