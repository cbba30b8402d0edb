//! What a write tool's attribute sets, as code: its `WriteOptions`, its
//! `is_permanent`, and the result and error types of its return type.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{PathArguments, Type};

use crate::ast::ToolFn;
use crate::attr::{Attrs, FieldList, InFlight, Scope, StoreErrorPolicy, UncertainPolicy};
use crate::krate::Private;

/// The body of `is_permanent`: the `permanent_errors` predicate (checked
/// against the error type where the user wrote it), or never.
pub(super) fn is_permanent(attrs: &Attrs) -> TokenStream {
    match &attrs.permanent_errors {
        Some(expr) => {
            let check = quote_spanned! {expr.span()=>
                let __idem_permanent: fn(&Self::Error) -> bool = #expr;
            };
            quote! {
                #check
                __idem_permanent(__idem_error)
            }
        }
        None => quote! {
            let _ = __idem_error;
            false
        },
    }
}

/// The result and error types: written out when the return type is spelled
/// `Result<T, E>` (so errors point at `T` or `E`), projected through
/// `ToolResult` for an alias such as `anyhow::Result<T>`.
pub(super) fn split_result(private: &Private, ret: &Type) -> (TokenStream, TokenStream) {
    // A type a `macro_rules!` passed as `$ret:ty` arrives in a group.
    if let Type::Group(group) = ret {
        return split_result(private, &group.elem);
    }
    if let Type::Path(tp) = ret
        && tp.qself.is_none()
        && let Some(last) = tp.path.segments.last()
        && last.ident == "Result"
        && let PathArguments::AngleBracketed(ab) = &last.arguments
        && ab.args.len() == 2
        && let (Some(syn::GenericArgument::Type(ok)), Some(syn::GenericArgument::Type(err))) =
            (ab.args.first(), ab.args.last())
    {
        return (quote!(#ok), quote!(#err));
    }
    let span = ret.span();
    (
        quote_spanned!(span=> <#ret as #private::ToolResult>::Ok),
        quote_spanned!(span=> <#ret as #private::ToolResult>::Err),
    )
}

pub(super) fn write_options(private: &Private, tool: &ToolFn<'_>, attrs: &Attrs) -> TokenStream {
    let millis = |ms: u64| quote!(::core::time::Duration::from_millis(#ms));
    let mut chain = quote!(#private::WriteOptions::new());
    if let Some(d) = &attrs.lease {
        let d = millis(d.millis);
        chain = quote!(#chain.lease(#d));
    }
    if let Some(d) = &attrs.ttl {
        let d = millis(d.millis);
        chain = quote!(#chain.ttl(#d));
    }
    if let Some(d) = &attrs.max_hold {
        let d = millis(d.millis);
        chain = quote!(#chain.max_hold(#d));
    }
    if let Some(bytes) = attrs.max_result_bytes {
        chain = quote!(#chain.max_result_bytes(#bytes));
    }
    if let Some(scope) = &attrs.scope {
        let scope = match scope {
            Scope::Run => quote!(#private::ScopeKind::Run),
            Scope::Global => quote!(#private::ScopeKind::Global),
        };
        chain = quote!(#chain.scope(#scope));
    }
    if let Some(version) = attrs.version {
        chain = quote!(#chain.version(#version));
    }
    if let Some(list) = &attrs.key {
        let names = json_paths(tool, list);
        chain = quote!(#chain.key_fields(&[#(#names),*]));
    }
    if let Some(list) = &attrs.check {
        let names = json_paths(tool, list);
        chain = quote!(#chain.check_fields(&[#(#names),*]));
    }
    if let Some(list) = &attrs.ignore {
        let names = json_paths(tool, list);
        chain = quote!(#chain.ignore_fields(&[#(#names),*]));
    }
    if let Some(on) = &attrs.on_in_flight {
        let on = match on {
            InFlight::Reject => quote!(#private::OnInFlight::Reject),
            InFlight::Wait(d) => {
                let d = millis(d.millis);
                quote!(#private::OnInFlight::Wait(#d))
            }
        };
        chain = quote!(#chain.on_in_flight(#on));
    }
    if let Some(policy) = &attrs.on_store_error {
        let policy = match policy {
            StoreErrorPolicy::FailClosed => quote!(#private::OnStoreError::FailClosed),
            StoreErrorPolicy::Run => quote!(#private::OnStoreError::Run),
        };
        chain = quote!(#chain.on_store_error(#policy));
    }
    if let Some(policy) = &attrs.on_uncertain {
        let policy = match policy {
            UncertainPolicy::Rerun => quote!(#private::OnUncertain::Rerun),
            UncertainPolicy::Refuse => quote!(#private::OnUncertain::Refuse),
        };
        chain = quote!(#chain.on_uncertain(#policy));
    }
    if let Some(b) = &attrs.destructive {
        chain = quote!(#chain.destructive(#b));
    }
    if let Some(b) = &attrs.open_world {
        chain = quote!(#chain.open_world(#b));
    }
    chain
}

/// A field list's paths as the arguments' JSON names them: flat parameters
/// by their JSON names (`#[serde(rename)]`), an `#[args]` struct's fields as
/// written (the runtime checks them against its schema).
fn json_paths(tool: &ToolFn<'_>, list: &FieldList) -> Vec<String> {
    list.fields
        .iter()
        .map(|f| {
            let first = tool
                .json_name(f.first())
                .unwrap_or_else(|| f.first().unraw().to_string());
            std::iter::once(first)
                .chain(f.rest())
                .collect::<Vec<_>>()
                .join(".")
        })
        .collect()
}
