//! The path generated code reaches the facade by: `::idem`, or what the
//! attribute's `crate = ".."` names (a user who renamed the dependency, or
//! a crate that re-exports idem), as serde's `crate` attribute does. One
//! expansion runs at a time on a thread: the path is set for its duration.

use std::cell::RefCell;

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};

thread_local! {
    static FACADE: RefCell<Option<syn::Path>> = const { RefCell::new(None) };
}

/// The facade's `__private` module, as generated code names it:
/// `#PRIVATE::WriteOptions`.
pub(crate) struct Private;

pub(crate) const PRIVATE: Private = Private;

impl ToTokens for Private {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let facade = facade();
        tokens.extend(quote!(#facade::__private));
    }
}

/// The facade's path: `crate = ".."`, or `::idem`.
fn facade() -> TokenStream {
    FACADE.with(|f| match &*f.borrow() {
        Some(path) => path.to_token_stream(),
        None => quote!(::idem),
    })
}

/// `module` of `__private` as a string, for attributes that take a path
/// in a string (`#[serde(crate = "..")]`).
pub(crate) fn private_str(module: &str) -> String {
    let path = facade().to_string().replace(' ', "");
    format!("{path}::__private::{module}")
}

/// Sets the facade's path for the expansion running on this thread
/// (`None`: `::idem`).
pub(crate) fn set(path: Option<syn::Path>) {
    FACADE.with(|f| *f.borrow_mut() = path);
}
