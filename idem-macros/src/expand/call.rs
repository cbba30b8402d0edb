//! The user's function inside the generated `call`, and the call of it:
//! renamed nowhere, its flat parameters taken as one struct, a
//! state-generic context given its state, the hidden tool type named.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::{FnArg, Ident, PathArguments, Type};

use crate::ast::{Param, ToolFn};

/// The hidden type that is tool `ident`: `__IdemTool` and its name in
/// upper camel case (`charge_card` → `__IdemToolChargeCard`), a name no
/// lint objects to.
pub(super) fn tool_type(ident: &Ident) -> Ident {
    let camel: String = ident
        .unraw()
        .to_string()
        .split('_')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect();
    format_ident!("__IdemTool{}", camel, span = ident.span())
}

/// The call of the user's function (spanned at its name): the arguments
/// (the `#[args]` struct, or the struct of the flat parameters, which the
/// inner function takes apart where the first of them stood) and the
/// context, in the order the function takes them.
pub(super) fn call_expr(tool: &ToolFn<'_>) -> TokenStream {
    let mut flat_passed = false;
    let call_args = tool.params.iter().filter_map(|p| match p {
        Param::Flat { .. } if flat_passed => None,
        Param::Flat { .. } => {
            flat_passed = true;
            Some(quote!(__idem_args))
        }
        Param::Args { .. } => Some(quote!(__idem_args)),
        _ => Some(quote!(__idem_ctx)),
    });
    let ident = &tool.item.sig.ident;
    quote_spanned! {ident.span()=>
        #ident(#(#call_args),*)
    }
}

/// The user's function, untouched but for its name, the attributes the
/// macro consumed, the state type of a state-generic context, and its flat
/// parameters, which become one struct pattern (`flat`) where the first of
/// them stood.
pub(super) fn inner_fn(
    tool: &ToolFn<'_>,
    generic_state: Option<&TokenStream>,
    flat: &TokenStream,
) -> TokenStream {
    let item = tool.item;
    let attrs = item
        .attrs
        .iter()
        // `#[deprecated]` stays on the function users name: on the inner
        // function, only the generated call would trip it.
        .filter(|a| {
            let p = a.path();
            !(p.is_ident("doc") || p.is_ident("cfg") || p.is_ident("deprecated"))
        });
    let mut flat_written = false;
    let inputs = item
        .sig
        .inputs
        .iter()
        .zip(&tool.params)
        .filter_map(|(arg, param)| match (arg, param) {
            (_, Param::Flat { .. }) if flat_written => None,
            (_, Param::Flat { .. }) => {
                flat_written = true;
                Some(flat.clone())
            }
            (FnArg::Typed(pt), _) => {
                let attrs = pt.attrs.iter().filter(|a| {
                    let p = a.path();
                    !(p.is_ident("doc")
                        || p.is_ident("args")
                        || p.is_ident("serde")
                        || p.is_ident("schemars"))
                });
                let pat = &pt.pat;
                let mut ty = (*pt.ty).clone();
                if generic_state.is_some() {
                    add_state_param(&mut ty);
                }
                Some(quote!(#(#attrs)* #pat: #ty))
            }
            (FnArg::Receiver(r), _) => Some(quote!(#r)),
        });
    // A state-generic context adds `__S` after the function's lifetimes;
    // a function generic over its state keeps its own parameter.
    let generics = match generic_state {
        Some(bound) => {
            let lifetimes = item.sig.generics.lifetimes();
            quote!(<#(#lifetimes,)* #bound>)
        }
        None => {
            let generics = &item.sig.generics;
            quote!(#generics)
        }
    };
    let where_clause = &item.sig.generics.where_clause;
    let name = &item.sig.ident;
    let output = &item.sig.output;
    let asyncness = &item.sig.asyncness;
    let block = &item.block;
    quote! {
        #(#attrs)*
        #asyncness fn #name #generics (#(#inputs),*) #output #where_clause #block
    }
}

/// `&WriteCtx` → `&WriteCtx<__S>`: leaves every other type alone.
fn add_state_param(ty: &mut Type) {
    let Type::Reference(r) = ty else { return };
    let Type::Path(tp) = &mut *r.elem else { return };
    let Some(last) = tp.path.segments.last_mut() else {
        return;
    };
    if (last.ident == "Ctx" || last.ident == "WriteCtx") && last.arguments.is_none() {
        let s = syn::Ident::new("__S", Span::call_site());
        last.arguments = PathArguments::AngleBracketed(syn::parse_quote!(<#s>));
    }
}
