//! The path generated code reaches the facade by: `::idem`, or what the
//! attribute's `crate = ".."` names (a user who renamed the dependency, or
//! a crate that re-exports idem), as serde's `crate` attribute does. It is
//! made once per expansion from the parsed attribute and handed to every
//! step that writes a path.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};

/// The facade's `__private` module, as generated code names it:
/// `#private::WriteOptions`.
#[derive(Clone)]
pub(crate) struct Private {
    /// The facade's path: `crate = ".."`, or `::idem`.
    facade: TokenStream,
}

impl Private {
    /// Under the facade `krate` names (`crate = ".."`), or `::idem`.
    pub(crate) fn of(krate: Option<&syn::Path>) -> Private {
        Private {
            facade: krate.map_or_else(|| quote!(::idem), ToTokens::to_token_stream),
        }
    }

    /// `module` of `__private` as a string, for attributes that take a
    /// path in a string (`#[serde(crate = "..")]`).
    pub(crate) fn module_str(&self, module: &str) -> String {
        let path = self.facade.to_string().replace(' ', "");
        format!("{path}::__private::{module}")
    }
}

impl ToTokens for Private {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let facade = &self.facade;
        tokens.extend(quote!(#facade::__private));
    }
}
