//! What a write tool's attribute sets, as code: its `WriteOptions`, its
//! `is_permanent`, and the result and error types of its return type.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{PathArguments, Type};

use crate::ast::ToolFn;
use crate::attr::{ApprovalAttr, Attrs, FieldList};
use crate::krate::Private;
use idem_rules::{Approval, OnInFlight, OnUncertain};

/// The body of `is_permanent` or `is_uncertain`: the `permanent_errors` or
/// `uncertain_errors` predicate `expr` (checked against the error type
/// where the user wrote it), or never.
pub(super) fn error_predicate(expr: Option<&syn::Expr>) -> TokenStream {
    match expr {
        Some(expr) => {
            let check = quote_spanned! {expr.span()=>
                let __idem_predicate: fn(&Self::Error) -> bool = #expr;
            };
            quote! {
                #check
                __idem_predicate(__idem_error)
            }
        }
        None => quote! {
            let _ = __idem_error;
            false
        },
    }
}

/// The `verify` method of a tool with `verify = path`: the user's function
/// called with the tool's parameters (the flat ones taken out of the
/// arguments struct by `flat`, its pattern) and the context, and its
/// answer checked against the result type where the user wrote the path.
/// A tool that works with any state (`&WriteCtx` without a state type)
/// cannot use it, and its `verify` takes `&WriteCtx` as written: it is
/// given the context without the state.
pub(super) fn verify(
    private: &Private,
    tool: &ToolFn<'_>,
    path: &syn::Expr,
    flat: &TokenStream,
    state: &TokenStream,
    any_state: bool,
) -> TokenStream {
    let ctx = if any_state {
        quote!(&#private::stateless(__idem_ctx))
    } else {
        quote!(__idem_ctx)
    };
    let mut flat_taken = false;
    let mut take_apart = quote!();
    let call_args: Vec<TokenStream> = tool
        .params
        .iter()
        .map(|p| match p {
            crate::ast::Param::Flat { ident, .. } => {
                if !flat_taken {
                    flat_taken = true;
                    take_apart = quote!(let #flat = __idem_args;);
                }
                quote!(#ident)
            }
            crate::ast::Param::Args { .. } => quote!(__idem_args),
            _ => ctx.clone(),
        })
        .collect();
    let call = quote_spanned! {path.span()=>
        let __idem_verified: ::core::result::Result<#private::Verified<Self::Output>, _> =
            (#path)(#(#call_args),*).await;
    };
    quote! {
        fn verify(
            &self,
            __idem_args: Self::Args,
            __idem_ctx: &#private::WriteCtx<#state>,
        ) -> impl ::core::future::Future<
            Output = ::core::result::Result<#private::Verified<Self::Output>, ::std::string::String>,
        > + ::core::marker::Send {
            async move {
                #take_apart
                #call
                __idem_verified.map_err(|__idem_e| ::std::string::ToString::to_string(&__idem_e))
            }
        }
    }
}

/// The `needs_approval` method of a tool with `approval = path`: the
/// user's function called with the tool's parameters in the tool's order,
/// each by reference (a flat one borrowed from the arguments struct's
/// field of its name), and then, where the tool takes its context, the
/// call's `&Ctx` (without its state for a tool that works with any),
/// wherever the tool takes it. The call goes through
/// `__private::needs_approval`, whose traits say what a decision function
/// is when the path's is not one (by value, async, not `bool`): the path
/// alone carries the user's span, so that rustc's suggestions edit the
/// function, never the attribute.
pub(super) fn needs_approval(
    private: &Private,
    tool: &ToolFn<'_>,
    path: &syn::Expr,
    state: &TokenStream,
    any_state: bool,
) -> TokenStream {
    let mut borrow = Vec::new();
    let (mut call_args, mut types): (Vec<TokenStream>, Vec<TokenStream>) = (Vec::new(), Vec::new());
    let mut takes_ctx = false;
    for param in &tool.params {
        match param {
            crate::ast::Param::Flat {
                ident, cfgs, ty, ..
            } => {
                // Named at the macro's call site: a mismatch is the
                // function's, and is reported at its path, never here.
                let borrowed = syn::Ident::new(&ident.to_string(), proc_macro2::Span::call_site());
                borrow.push(quote!(#(#cfgs)* let #borrowed = &__idem_args.#ident;));
                call_args.push(quote!(#borrowed));
                types.push(quote!(&#ty));
            }
            crate::ast::Param::Args { ty, .. } => {
                call_args.push(quote!(__idem_args));
                types.push(quote!(&#ty));
            }
            crate::ast::Param::Ctx(_) => takes_ctx = true,
            _ => {}
        }
    }
    if takes_ctx {
        let (arg, ty) = match any_state {
            true => (
                quote!(&#private::stateless_call(__idem_ctx)),
                quote!(&#private::Ctx<()>),
            ),
            false => (quote!(__idem_ctx), quote!(&#private::Ctx<#state>)),
        };
        call_args.push(arg);
        types.push(ty);
    }
    // What the function is called with is stated, so that the compiler
    // judges the function against it (and suggests edits to the function),
    // rather than judging the arguments against the function.
    // Spanned at the path, so that what is wrong is shown there.
    let decide = quote_spanned! {path.span()=>
        #private::needs_approval::<(#(#types,)*), _>(&#path, (#(#call_args,)*))
    };
    quote! {
        fn needs_approval(&self, __idem_args: &Self::Args, __idem_ctx: &#private::Ctx<#state>) -> bool {
            #(#borrow)*
            #decide
        }
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
    let millis = |d: &std::time::Duration| {
        let ms = d.as_millis() as u64;
        quote!(::core::time::Duration::from_millis(#ms))
    };
    let mut chain = quote!(#private::WriteOptions::new());
    if let Some(d) = &attrs.lease {
        let d = millis(d);
        chain = quote!(#chain.lease(#d));
    }
    if let Some(d) = &attrs.ttl {
        let d = millis(d);
        chain = quote!(#chain.ttl(#d));
    }
    if let Some(d) = &attrs.max_hold {
        let d = millis(d);
        chain = quote!(#chain.max_hold(#d));
    }
    if let Some(bytes) = attrs.max_result_bytes {
        chain = quote!(#chain.max_result_bytes(#bytes));
    }
    if let Some(scope) = &attrs.scope {
        let scope = variant(quote!(#private::ScopeKind), scope);
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
    if let Some(list) = &attrs.hide {
        let names = json_paths(tool, list);
        chain = quote!(#chain.hide_fields(&[#(#names),*]));
    }
    if let Some(on) = &attrs.on_in_flight {
        let on = match on {
            OnInFlight::Reject => quote!(#private::OnInFlight::Reject),
            OnInFlight::Wait(d) => {
                let d = millis(d);
                quote!(#private::OnInFlight::Wait(#d))
            }
        };
        chain = quote!(#chain.on_in_flight(#on));
    }
    if let Some(policy) = &attrs.on_store_error {
        let policy = variant(quote!(#private::OnStoreError), policy);
        chain = quote!(#chain.on_store_error(#policy));
    }
    chain = policies(private, attrs, chain);
    if let Some(b) = &attrs.destructive {
        chain = quote!(#chain.destructive(#b));
    }
    if let Some(b) = &attrs.open_world {
        chain = quote!(#chain.open_world(#b));
    }
    chain
}

/// `chain` with the policies that take a function when one is given: what
/// happens to an uncertain outcome (`verify = path`, or `on_uncertain`) and
/// whether a person approves (`approval = path`, or a name).
fn policies(private: &Private, attrs: &Attrs, mut chain: TokenStream) -> TokenStream {
    let policy = match (&attrs.verify, &attrs.on_uncertain) {
        (Some(_), _) => Some(&OnUncertain::Verify),
        (None, Some((policy, _))) => Some(policy),
        (None, None) => None,
    };
    if let Some(policy) = policy {
        let policy = variant(quote!(#private::OnUncertain), policy);
        chain = quote!(#chain.on_uncertain(#policy));
    }
    let approval = match &attrs.approval {
        Some(ApprovalAttr::Named(approval, _)) => Some(approval),
        Some(ApprovalAttr::Decided(_)) => Some(&Approval::Decided),
        None => None,
    };
    if let Some(approval) = approval {
        let approval = variant(quote!(#private::Approval), approval);
        chain = quote!(#chain.approval(#approval));
    }
    let durations = [
        (&attrs.approval_window, quote!(approval_window)),
        (&attrs.approval_wait, quote!(approval_wait)),
        (&attrs.uncertain_wait, quote!(uncertain_wait)),
    ];
    for (given, setter) in durations {
        if let Some((duration, _)) = given {
            let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
            chain = quote!(#chain.#setter(::core::time::Duration::from_millis(#ms)));
        }
    }
    chain
}

/// `policy`'s variant under `path`: the runtime re-exports the very enums
/// the attribute was parsed into (`idem_rules`), so a variant's name is its
/// path there.
fn variant(path: TokenStream, policy: &impl std::fmt::Debug) -> TokenStream {
    let name = quote::format_ident!("{policy:?}");
    quote!(#path::#name)
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
