//! The macros' output compiles under strict lints, clippy's included (CI
//! runs clippy on every target with `-D warnings`), in a crate that shadows
//! the names generated code could trip over. A test without the harness: it
//! passes by compiling and running `main`.
#![deny(warnings, unused_qualifications, missing_docs, unused_results)]
#![deny(clippy::all)]

// Names generated code must not rely on.
#[allow(dead_code)]
struct Option;
#[allow(dead_code)]
struct String;
#[allow(dead_code)]
struct Ok;
#[allow(dead_code)]
struct Box;
#[allow(dead_code)]
mod serde {}
#[allow(dead_code)]
mod schemars {}
#[allow(dead_code)]
mod idem_runtime {}
#[allow(dead_code)]
trait Future {}
#[allow(dead_code)]
trait Send {}

type Result<T> = ::std::result::Result<T, Error>;

/// The tools' error.
#[derive(Debug)]
pub struct Error;

impl ::std::fmt::Display for Error {
    fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
        f.write_str("error")
    }
}

/// The application state.
pub struct State {
    /// A greeting.
    pub greeting: &'static str,
}

/// Greet someone.
#[idem::read_tool]
pub async fn greet(
    /// Who to greet.
    name: ::std::string::String,
    /// How often.
    times: ::std::option::Option<u8>,
    ctx: &idem::Ctx<State>,
) -> Result<::std::string::String> {
    ::std::result::Result::Ok(format!(
        "{} {name} x{}",
        ctx.state().greeting,
        times.unwrap_or(1)
    ))
}

/// Record a visit, once per run.
#[idem::write_tool(lease = "10s", key = [visitor], version = 3)]
pub async fn record_visit(
    visitor: u64,
    note: ::std::string::String,
    ctx: &idem::WriteCtx,
) -> Result<u64> {
    let _ = (note, ctx.idem_key());
    ::std::result::Result::Ok(visitor)
}

fn main() {
    let greet = "a local binding named like the tool";
    let record_visit = greet.len();
    let _ = record_visit;
    let registry = idem::Registry::builder(State { greeting: "hello" })
        .tool(self::greet)
        .tool(self::record_visit)
        .build();
    assert!(registry.is_ok());
}
