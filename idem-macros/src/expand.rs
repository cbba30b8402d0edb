//! Code generation: the tool value, its arguments struct and its
//! `ReadTool` / `WriteTool` implementation.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, PathArguments, Type};

use crate::ast::{Param, ToolFn};
use crate::attr::{Attrs, InFlight, Scope};
use crate::kind::Kind;

/// Generated code for a checked tool function: a hidden unit type that is
/// the tool, the stand-in function under the user's name, and (in an
/// anonymous const) the arguments struct, the type checks and the
/// `ReadTool` / `WriteTool` implementation.
///
/// `ret` is the function's return type (validation rejected functions
/// without one).
pub(crate) fn expand(kind: Kind, tool: &ToolFn<'_>, attrs: &Attrs, ret: &Type) -> TokenStream {
    let parts = Parts::new(kind, tool, attrs, ret);
    let tool_impl = match kind {
        Kind::Read => parts.read_impl(),
        Kind::Write => parts.write_impl(tool, attrs),
    };
    let checks = parts.checks(kind, tool);
    let Parts {
        item,
        tool_ty,
        args_struct,
        ..
    } = &parts;
    let (vis, ident) = (&item.vis, &item.sig.ident);
    let cfgs: Vec<_> = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .collect();
    let struct_doc = parts.struct_doc();
    // A deprecated tool warns where it is registered, where the user can
    // allow it.
    let deprecated: Vec<_> = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("deprecated"))
        .collect();
    // Named in the const block below, so that an unregistered tool is no
    // dead code (no `allow` that a `#![forbid(dead_code)]` crate refuses);
    // but not a deprecated one, which naming would warn about.
    let name_it = deprecated.is_empty().then(|| quote!(let _ = #ident;));

    // The function's name stays a function (so `let search = ..` elsewhere
    // still binds), but one that only `RegistryBuilder::tool` can use: its
    // parameter cannot be built. The tool itself is a hidden unit type.
    quote! {
        #(#cfgs)*
        #[doc(hidden)]
        #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug, ::core::default::Default)]
        #vis struct #tool_ty;

        #(#cfgs)*
        #struct_doc
        #(#deprecated)*
        #vis fn #ident(
            __idem_token: ::idem::__private::CallThroughRegistry<#tool_ty>,
        ) -> ::core::convert::Infallible {
            __idem_token.unreachable()
        }

        #(#cfgs)*
        const _: () = {
            #name_it
            let _ = #tool_ty;
            #args_struct
            #checks
            #tool_impl
        };
    }
}

/// The pieces both kinds of tool are generated from.
struct Parts<'a> {
    item: &'a ItemFn,
    /// The hidden unit type that is the tool.
    tool_ty: Ident,
    name: String,
    /// An expression of the description: a literal or a `concat!`.
    description: TokenStream,
    /// The application state type: the one the context names, or `__S`.
    state: TokenStream,
    /// `<__S: ..>` when the tool works with any state, else nothing.
    impl_generics: TokenStream,
    args_ty: TokenStream,
    /// The struct of the flat parameters (nothing for an `#[args]` type).
    args_struct: TokenStream,
    /// The body of `call`: the user's function and the call.
    call_body: TokenStream,
    /// The future `call` returns, spanned at the user's function.
    future: TokenStream,
    ok_ty: TokenStream,
    err_ty: TokenStream,
}

impl<'a> Parts<'a> {
    fn new(kind: Kind, tool: &ToolFn<'a>, attrs: &Attrs, ret: &Type) -> Self {
        let item = tool.item;
        let ident = &item.sig.ident;
        let name = attrs
            .name
            .as_ref()
            .map_or_else(|| ident.unraw().to_string(), |l| l.value());
        let description = attrs
            .description
            .clone()
            .or_else(|| tool.doc.clone())
            .unwrap_or_else(|| quote!(""));

        // The application state: the one the context names, or any.
        let ctx = tool.ctx();
        let alias = ctx.and_then(|c| c.alias);
        let generic = alias.is_none() && ctx.is_none_or(|c| c.state.is_none());
        let state = match (alias, ctx.and_then(|c| c.state)) {
            (Some(alias), _) => quote!(<#alias as ::idem::__private::ContextOf>::State),
            (None, Some(ty)) => quote!(#ty),
            (None, None) => quote!(__S),
        };
        let state_bound = quote!(__S: ::core::marker::Send + ::core::marker::Sync + 'static);
        let impl_generics = match tool.state_param() {
            // The user's own state parameter, with the bounds a registry's
            // state needs besides theirs.
            Some(param) => {
                let (ident, bounds) = (&param.ident, &param.bounds);
                let plus = (!bounds.is_empty()).then(|| quote!(+));
                quote!(<#ident: #bounds #plus ::core::marker::Send + ::core::marker::Sync + 'static>)
            }
            None if generic => quote!(<#state_bound>),
            None => quote!(),
        };

        // The arguments: the `#[args]` type, or a struct of the flat parameters.
        let (args_ty, args_struct, pattern) = match tool.args_param() {
            Some(ty) => (quote!(#ty), quote!(), quote!()),
            None => flat_args(kind, tool),
        };
        let generic_state = (generic && ctx.is_some()).then_some(&state_bound);
        let body_fn = inner_fn(tool, generic_state, &pattern);
        let call = call_expr(tool);
        // A read tool's context is unused when the function takes none.
        let discard_ctx =
            (kind == Kind::Read && ctx.is_none()).then(|| quote!(let _ = __idem_ctx;));
        // Point a "future is not `Send`" error at the user's function.
        let future = quote_spanned! {ident.span()=>
            impl ::core::future::Future<
                Output = ::core::result::Result<Self::Output, Self::Error>,
            > + ::core::marker::Send
        };
        let (ok_ty, err_ty) = split_result(ret);
        Parts {
            item,
            tool_ty: tool_type(ident),
            name,
            description,
            state,
            impl_generics,
            args_ty,
            args_struct,
            call_body: quote! {
                #body_fn
                #discard_ctx
                #call
            },
            future,
            ok_ty,
            err_ty,
        }
    }

    /// The doc comment of the stand-in function: the user's, or one made
    /// from the description.
    fn struct_doc(&self) -> TokenStream {
        let docs: Vec<_> = self
            .item
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("doc"))
            .collect();
        if docs.is_empty() {
            let intro = format!(" The `{}` tool: ", self.name);
            let description = &self.description;
            quote!(#[doc = ::core::concat!(#intro, #description)])
        } else {
            quote!(#(#docs)*)
        }
    }

    fn info(&self) -> TokenStream {
        let Parts {
            name,
            description,
            ok_ty,
            ..
        } = self;
        quote! {
            fn info(&self) -> ::idem::__private::ToolInfo {
                ::idem::__private::ToolInfo::new(#name, #description)
                    .with_output_schema(::idem::__private::output_schema!(#ok_ty))
            }
        }
    }

    /// Compile-time checks of the argument, result and error types, each
    /// spanned at the type so that a missing trait is reported there.
    fn checks(&self, kind: Kind, tool: &ToolFn<'_>) -> TokenStream {
        let (assert_args, assert_output) = match kind {
            Kind::Read => (quote!(assert_read_args), quote!(assert_read_output)),
            Kind::Write => (quote!(assert_write_args), quote!(assert_write_output)),
        };
        let (ok_ty, err_ty) = (&self.ok_ty, &self.err_ty);
        let args_check = tool.args_param().map(|ty| {
            quote_spanned! {ty.span()=> ::idem::__private::#assert_args::<#ty>(); }
        });
        let assert_ctx = match kind {
            Kind::Read => quote!(assert_read_ctx),
            Kind::Write => quote!(assert_write_ctx),
        };
        let ctx_check = tool.ctx().and_then(|c| c.alias).map(|alias| {
            quote_spanned! {alias.span()=> ::idem::__private::#assert_ctx::<#alias>(); }
        });
        let ok_check =
            quote_spanned! {ok_ty.span()=> ::idem::__private::#assert_output::<#ok_ty>(); };
        let err_check = quote_spanned! {err_ty.span()=>
            ::idem::__private::assert_failure::<#err_ty>();
            ::idem::__private::assert_send_failure::<#err_ty>();
        };
        quote! {
            const _: () = {
                #args_check
                #ctx_check
                #ok_check
                #err_check
            };
        }
    }

    fn read_impl(&self) -> TokenStream {
        self.tool_impl(quote!(ReadToolFn), quote!(Ctx), quote!())
    }

    fn write_impl(&self, tool: &ToolFn<'_>, attrs: &Attrs) -> TokenStream {
        let options = write_options(tool, attrs);
        let permanent = is_permanent(attrs);
        let settings = quote! {
            fn options(&self) -> ::idem::__private::WriteOptions {
                #options
            }

            fn is_permanent(&self, __idem_error: &Self::Error) -> bool {
                #permanent
            }
        };
        self.tool_impl(quote!(WriteToolFn), quote!(WriteCtx), settings)
    }

    /// The implementation of `trait_name` (`ReadToolFn` or `WriteToolFn`)
    /// whose `call` takes a `ctx_ty`, with `items` beside `info` and `call`.
    fn tool_impl(
        &self,
        trait_name: TokenStream,
        ctx_ty: TokenStream,
        items: TokenStream,
    ) -> TokenStream {
        let Parts {
            tool_ty,
            state,
            impl_generics,
            args_ty,
            call_body,
            future,
            ok_ty,
            err_ty,
            ..
        } = self;
        let where_clause = &self.item.sig.generics.where_clause;
        let info = self.info();
        quote! {
            impl #impl_generics ::idem::__private::#trait_name<#state> for #tool_ty #where_clause {
                type Args = #args_ty;
                type Output = #ok_ty;
                type Error = #err_ty;

                #info

                #items

                fn call(
                    &self,
                    __idem_args: Self::Args,
                    __idem_ctx: &::idem::__private::#ctx_ty<#state>,
                ) -> #future {
                    #call_body
                }
            }
        }
    }
}

/// The hidden type that is tool `ident`: `__IdemTool` and its name in
/// upper camel case (`charge_card` → `__IdemToolChargeCard`), a name no
/// lint objects to.
fn tool_type(ident: &Ident) -> Ident {
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
fn call_expr(tool: &ToolFn<'_>) -> TokenStream {
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

/// The body of `is_permanent`: the `permanent_errors` predicate (checked
/// against the error type where the user wrote it), or never.
fn is_permanent(attrs: &Attrs) -> TokenStream {
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
fn split_result(ret: &Type) -> (TokenStream, TokenStream) {
    // A type a `macro_rules!` passed as `$ret:ty` arrives in a group.
    if let Type::Group(group) = ret {
        return split_result(&group.elem);
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
        quote_spanned!(span=> <#ret as ::idem::__private::ToolResult>::Ok),
        quote_spanned!(span=> <#ret as ::idem::__private::ToolResult>::Err),
    )
}

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
fn flat_args(kind: Kind, tool: &ToolFn<'_>) -> (TokenStream, TokenStream, TokenStream) {
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
            ::idem::__private::#assert_param::<#ty>();
        });
        pattern.push(quote!(#(#cfgs)* #mutability #ident));
    }
    let derives = args_derives(kind);
    let def = quote! {
        #[doc(hidden)]
        #[derive(#derives)]
        #[serde(crate = "::idem::__private::serde")]
        #[schemars(crate = "::idem::__private::schemars")]
        pub struct __IdemArgs<#(#params),*> {
            #(#fields,)*
        }
        const _: () = {
            #(#checks)*
        };
    };
    let args_ty = quote!(__IdemArgs<#(#concrete),*>);
    let pattern = quote!(__IdemArgs { #(#pattern,)* }: #args_ty);
    (args_ty, def, pattern)
}

/// What the arguments struct derives: a read tool's arguments are only
/// read, a write tool's also re-serialized to derive the key.
fn args_derives(kind: Kind) -> TokenStream {
    match kind {
        Kind::Read => quote! {
            ::idem::__private::serde::Deserialize,
            ::idem::__private::schemars::JsonSchema
        },
        Kind::Write => quote! {
            ::idem::__private::serde::Serialize,
            ::idem::__private::serde::Deserialize,
            ::idem::__private::schemars::JsonSchema
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

/// The user's function, untouched but for its name, the attributes the
/// macro consumed, the state type of a state-generic context, and its flat
/// parameters, which become one struct pattern (`flat`) where the first of
/// them stood.
fn inner_fn(
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
    // A state-generic context adds `__S`; a function generic over its
    // state keeps its own parameter.
    let generics = match generic_state {
        Some(bound) => quote!(<#bound>),
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

fn write_options(tool: &ToolFn<'_>, attrs: &Attrs) -> TokenStream {
    let millis = |ms: u64| quote!(::core::time::Duration::from_millis(#ms));
    let mut chain = quote!(::idem::__private::WriteOptions::new());
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
            Scope::Run => quote!(::idem::__private::ScopeKind::Run),
            Scope::Global => quote!(::idem::__private::ScopeKind::Global),
        };
        chain = quote!(#chain.scope(#scope));
    }
    if let Some(version) = attrs.version {
        chain = quote!(#chain.version(#version));
    }
    if let Some((_, fields)) = &attrs.key {
        // Flat parameters by their JSON names; an `#[args]` struct's fields
        // as written (the runtime checks them against its schema).
        let names = fields.iter().map(|f| {
            let first = tool
                .json_name(f.first())
                .unwrap_or_else(|| f.first().unraw().to_string());
            std::iter::once(first)
                .chain(f.rest())
                .collect::<Vec<_>>()
                .join(".")
        });
        chain = quote!(#chain.key_fields(&[#(#names),*]));
    }
    if let Some(on) = &attrs.on_in_flight {
        let on = match on {
            InFlight::Reject => quote!(::idem::__private::OnInFlight::Reject),
            InFlight::Wait(d) => {
                let d = millis(d.millis);
                quote!(::idem::__private::OnInFlight::Wait(#d))
            }
        };
        chain = quote!(#chain.on_in_flight(#on));
    }
    if let Some(b) = &attrs.destructive {
        chain = quote!(#chain.destructive(#b));
    }
    if let Some(b) = &attrs.open_world {
        chain = quote!(#chain.open_world(#b));
    }
    chain
}
