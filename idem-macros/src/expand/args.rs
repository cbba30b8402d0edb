//! The arguments of a tool with flat parameters: the struct they are
//! gathered in (with the derives and the per-type checks), and the pattern
//! the inner function takes it apart with.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::ast::{Param, ToolFn};
use crate::kind::Kind;
use crate::krate::Private;

/// The arguments struct of a tool with flat parameters, and the pattern
/// that takes it apart into the parameters, as the inner function's first
/// parameter.
///
/// A field is generic (`__IdemArgs<__T0, ..>`, instantiated with the
/// parameter's type) so that serde's and schemars' derives always compile
/// and a type that lacks a trait is reported once, by a spanned check at
/// that type. A parameter with serde or schemars attributes (`with`,
/// `default = ".."`) or a `#[cfg]` gets its own type instead, which those
/// need.
pub(super) fn flat_args(
    private: &Private,
    kind: Kind,
    tool: &ToolFn<'_>,
) -> (TokenStream, TokenStream, TokenStream) {
    let assert_param = match kind {
        Kind::Read => quote!(assert_read_param),
        Kind::Write => quote!(assert_write_param),
    };
    let mut params = Vec::new();
    let mut concrete = Vec::new();
    let mut fields = Vec::new();
    let mut checks = Vec::new();
    let mut pattern = Vec::new();
    for (i, param) in tool.params.iter().enumerate() {
        let Param::Flat {
            ident,
            mutability,
            ty,
            optional,
            field_attrs,
            cfgs,
        } = param
        else {
            continue;
        };
        let own_type = !cfgs.is_empty()
            || field_attrs
                .iter()
                .any(|a| a.path().is_ident("serde") || a.path().is_ident("schemars"));
        let field_ty = if own_type {
            quote!(#ty)
        } else {
            let t = format_ident!("__T{}", i);
            params.push(t.clone());
            match optional {
                Some(inner) => {
                    concrete.push(quote!(#inner));
                    quote!(::core::option::Option<#t>)
                }
                None => {
                    concrete.push(quote!(#ty));
                    quote!(#t)
                }
            }
        };
        let skip = optional.is_some().then(|| optional_field(field_attrs));
        fields.push(quote! {
            #(#cfgs)*
            #(#field_attrs)*
            #skip
            pub #ident: #field_ty
        });
        checks.push(quote_spanned! {ty.span()=>
            #(#cfgs)*
            #private::#assert_param::<#ty>();
        });
        pattern.push(quote!(#(#cfgs)* #mutability #ident));
    }
    let def = args_struct(private, kind, &params, &fields, &checks);
    let args_ty = quote!(__IdemArgs<#(#concrete),*>);
    let pattern = quote!(__IdemArgs { #(#pattern,)* }: #args_ty);
    (args_ty, def, pattern)
}

/// The arguments struct `__IdemArgs<params>` with `fields`, and the
/// spanned `checks` of its parameters' types.
fn args_struct(
    private: &Private,
    kind: Kind,
    params: &[syn::Ident],
    fields: &[TokenStream],
    checks: &[TokenStream],
) -> TokenStream {
    let derives = args_derives(private, kind);
    let serde_crate = private.module_str("serde");
    let schemars_crate = private.module_str("schemars");
    // The bounds serde would infer, but for `Default`, which it asks of
    // the type inside an `Option` field with `default`: an `Option<Order>`
    // parameter is optional whether `Order` has a default or not.
    let bound = params
        .iter()
        .map(|t| format!("{t}: {serde_crate}::Deserialize<'de>"))
        .collect::<Vec<_>>()
        .join(", ");
    quote! {
        #[doc(hidden)]
        #[derive(#derives)]
        #[serde(crate = #serde_crate)]
        #[serde(bound(deserialize = #bound))]
        #[schemars(crate = #schemars_crate)]
        pub struct __IdemArgs<#(#params),*> {
            #(#fields,)*
        }
        const _: () = {
            #(#checks)*
        };
    }
}

/// What the arguments struct derives: a read tool's arguments are only
/// read, a write tool's also re-serialized to derive the key.
fn args_derives(private: &Private, kind: Kind) -> TokenStream {
    match kind {
        Kind::Read => quote! {
            #private::serde::Deserialize,
            #private::schemars::JsonSchema
        },
        Kind::Write => quote! {
            #private::serde::Serialize,
            #private::serde::Deserialize,
            #private::schemars::JsonSchema
        },
    }
}

/// What an `Option` parameter needs to be optional in the schema and
/// absent when `None`: `default` and `skip_serializing_if`, each unless
/// the parameter's own serde attributes set it.
fn optional_field(attrs: &[&syn::Attribute]) -> TokenStream {
    let keys = crate::ast::serde_keys(attrs);
    let default = (!keys.iter().any(|k| k == "default")).then(|| quote!(default,));
    let skip = (!keys.iter().any(|k| k == "skip_serializing_if"))
        .then(|| quote!(skip_serializing_if = "::core::option::Option::is_none",));
    if default.is_none() && skip.is_none() {
        return quote!();
    }
    quote!(#[serde(#default #skip)])
}
