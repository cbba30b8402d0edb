//! Code generation: the tool value, its arguments struct and its
//! `ReadTool` / `WriteTool` implementation.

mod args;
mod call;
mod settings;

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Ident, ItemFn, Type};

use self::args::flat_args;
use self::call::{call_expr, inner_fn, tool_type};
use self::settings::{error_predicate, needs_approval, split_result, verify, write_options};
use crate::ast::ToolFn;
use crate::attr::Attrs;
use crate::kind::Kind;
use crate::krate::Private;

/// Generated code for a checked tool function: a hidden unit type that is
/// the tool, the stand-in function under the user's name, and (in an
/// anonymous const) the arguments struct, the type checks and the
/// `ReadTool` / `WriteTool` implementation.
///
/// `ret` is the function's return type (validation rejected functions
/// without one).
pub(crate) fn expand(
    kind: Kind,
    tool: &ToolFn<'_>,
    attrs: &Attrs,
    ret: &Type,
    private: Private,
) -> TokenStream {
    let parts = Parts::new(kind, tool, attrs, ret, private);
    let private = &parts.private;
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
            __idem_token: #private::CallThroughRegistry<#tool_ty>,
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
    /// The facade's `__private`, as every generated path starts.
    private: Private,
    /// The hidden unit type that is the tool.
    tool_ty: Ident,
    name: String,
    /// An expression of the description: a literal or a `concat!`.
    description: TokenStream,
    /// The application state type: the one the context names, or `__S`.
    state: TokenStream,
    /// The tool works with any state (`__S`, not a parameter of the
    /// user's): it cannot use the state.
    any_state: bool,
    /// `<__S: ..>` when the tool works with any state, else nothing.
    impl_generics: TokenStream,
    args_ty: TokenStream,
    /// The struct of the flat parameters (nothing for an `#[args]` type).
    args_struct: TokenStream,
    /// The typed pattern that takes the flat parameters' struct apart
    /// (nothing for an `#[args]` type).
    flat_pattern: TokenStream,
    /// The body of `call`: the user's function and the call.
    call_body: TokenStream,
    /// The future `call` returns, spanned at the user's function.
    future: TokenStream,
    ok_ty: TokenStream,
    err_ty: TokenStream,
}

impl<'a> Parts<'a> {
    fn new(kind: Kind, tool: &ToolFn<'a>, attrs: &Attrs, ret: &Type, private: Private) -> Self {
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
            (Some(alias), _) => quote!(<#alias as #private::ContextOf>::State),
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
            None => flat_args(&private, kind, tool),
        };
        let generic_state = (generic && ctx.is_some()).then_some(&state_bound);
        let body_fn = inner_fn(tool, generic_state, &pattern);
        let flat_pattern = pattern.clone();
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
        let (ok_ty, err_ty) = split_result(&private, ret);
        Parts {
            item,
            private,
            tool_ty: tool_type(ident),
            name,
            description,
            state,
            any_state: generic && tool.state_param().is_none(),
            impl_generics,
            args_ty,
            args_struct,
            flat_pattern,
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
            private,
            name,
            description,
            ok_ty,
            ..
        } = self;
        quote! {
            fn info(&self) -> #private::ToolInfo {
                #private::ToolInfo::new(#name, #description)
                    .with_output_schema(#private::output_schema!(#ok_ty))
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
        let (private, ok_ty, err_ty) = (&self.private, &self.ok_ty, &self.err_ty);
        let args_check = tool.args_param().map(|ty| {
            quote_spanned! {ty.span()=> #private::#assert_args::<#ty>(); }
        });
        let assert_ctx = match kind {
            Kind::Read => quote!(assert_read_ctx),
            Kind::Write => quote!(assert_write_ctx),
        };
        let ctx_check = tool.ctx().and_then(|c| c.alias).map(|alias| {
            quote_spanned! {alias.span()=> #private::#assert_ctx::<#alias>(); }
        });
        let ok_check = quote_spanned! {ok_ty.span()=> #private::#assert_output::<#ok_ty>(); };
        let err_check = quote_spanned! {err_ty.span()=>
            #private::assert_failure::<#err_ty>();
            #private::assert_send_failure::<#err_ty>();
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
        self.tool_impl(Kind::Read, quote!())
    }

    fn write_impl(&self, tool: &ToolFn<'_>, attrs: &Attrs) -> TokenStream {
        let private = &self.private;
        let options = write_options(private, tool, attrs);
        let permanent = error_predicate(attrs.permanent_errors.as_ref());
        let uncertain = error_predicate(attrs.uncertain_errors.as_ref());
        let verify = attrs.verify.as_ref().map(|path| {
            let state = &self.state;
            verify(
                private,
                tool,
                path,
                &self.flat_pattern,
                state,
                self.any_state,
            )
        });
        let approval = match &attrs.approval {
            Some(crate::attr::ApprovalAttr::Decided(path)) => Some(needs_approval(
                private,
                tool,
                path,
                &self.state,
                self.any_state,
            )),
            _ => None,
        };
        let settings = quote! {
            fn options(&self) -> #private::WriteOptions {
                #options
            }

            #approval

            fn is_permanent(&self, __idem_error: &Self::Error) -> bool {
                #permanent
            }

            fn is_uncertain(&self, __idem_error: &Self::Error) -> bool {
                #uncertain
            }

            #verify
        };
        self.tool_impl(Kind::Write, settings)
    }

    /// The implementation of `ReadTool` or `WriteTool`, with `items`
    /// beside `info` and `call`.
    ///
    /// Its `where` clause repeats the trait's bounds on the argument,
    /// result and error types under a binder (`for<'__idem>`). The
    /// compiler does not reject a bound with a binder that cannot hold, as
    /// it does one on concrete types: the implementation just does not
    /// hold. So a type that lacks a trait is reported once, by the spanned
    /// check at that type, and a registration of the tool says the tool is
    /// not one yet.
    fn tool_impl(&self, kind: Kind, items: TokenStream) -> TokenStream {
        let (trait_name, ctx_ty, args_bound, output_bound) = match kind {
            Kind::Read => (
                quote!(ReadTool),
                quote!(Ctx),
                quote!(ReadArgs),
                quote!(ReadOutput),
            ),
            Kind::Write => (
                quote!(WriteTool),
                quote!(WriteCtx),
                quote!(WriteArgs),
                quote!(WriteOutput),
            ),
        };
        let Parts {
            private,
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
        // The function's bounds on its state; its lifetimes are its own.
        let predicates = self
            .item
            .sig
            .generics
            .where_clause
            .iter()
            .flat_map(|w| &w.predicates)
            .filter(|p| !matches!(p, syn::WherePredicate::Lifetime(_)));
        let where_clause = quote! {
            where
                #(#predicates,)*
                for<'__idem> #args_ty: #private::#args_bound + ::core::marker::Send,
                for<'__idem> #ok_ty: #private::#output_bound + ::core::marker::Send,
                for<'__idem> #err_ty: #private::ToolFailure + ::core::marker::Send,
        };
        let info = self.info();
        quote! {
            impl #impl_generics #private::#trait_name<#state> for #tool_ty #where_clause {
                type Args = #args_ty;
                type Output = #ok_ty;
                type Error = #err_ty;

                #info

                #items

                fn call(
                    &self,
                    __idem_args: Self::Args,
                    __idem_ctx: &#private::#ctx_ty<#state>,
                ) -> #future {
                    #call_body
                }
            }
        }
    }
}
