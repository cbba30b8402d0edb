//! The attribute macros of [idem](https://docs.rs/idem): `#[read_tool]` and
//! `#[write_tool]`. Use them through the `idem` crate, which documents them.
//!
//! Each runs parse → validate → expand: `attr` reads the attribute's
//! keys, `ast` classifies the function's parameters, `valid` checks
//! every rule and reports all violations at once at the offending tokens,
//! and `expand` generates the tool. On error the function is replaced by a
//! stub that still names a tool, so the rest of the crate compiles without
//! secondary errors.

mod ast;
mod attr;
mod ctxt;
mod expand;
mod kind;
mod krate;
mod place;
mod symbol;
mod valid;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{ItemFn, ReturnType};

use crate::kind::Kind;
use crate::krate::Private;

/// Turns an `async fn` into a read tool. See the `idem` crate.
#[proc_macro_attribute]
pub fn read_tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let block = place::enclosing_block(proc_macro::Span::call_site());
    expand_tool(Kind::Read, block, attr.into(), item.into()).into()
}

/// Turns an `async fn` into an idempotent write tool. See the `idem` crate.
#[proc_macro_attribute]
pub fn write_tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let block = place::enclosing_block(proc_macro::Span::call_site());
    expand_tool(Kind::Write, block, attr.into(), item.into()).into()
}

/// The tool, or the errors; `block` is the `impl` or trait the attribute
/// stands in, if it stands in one.
fn expand_tool(
    kind: Kind,
    block: Option<place::Block>,
    attr: TokenStream2,
    item: TokenStream2,
) -> TokenStream2 {
    if let Some(block) = block {
        // Said first and alone: what the expansion would add inside the
        // block is about items the user never wrote.
        return misplaced(kind, block, item);
    }
    let item: ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(e) => {
            let message = format!("`#[{}]` goes on an `async fn`: {e}", kind.attr_name());
            let error = syn::Error::new(e.span(), message).into_compile_error();
            return quote!(#item #error);
        }
    };
    let mut cx = ctxt::Ctxt::default();
    let attrs = attr::Attrs::parse(&mut cx, kind, attr);
    // The path every step writes, the stub's included.
    let private = Private::of(attrs.krate.as_ref());
    match try_expand(kind, cx, &attrs, &item, &private) {
        Ok(tokens) => tokens,
        Err(e) => stub(&item, e, &private),
    }
}

fn try_expand(
    kind: Kind,
    mut cx: ctxt::Ctxt,
    attrs: &attr::Attrs,
    item: &ItemFn,
    private: &Private,
) -> Result<TokenStream2, syn::Error> {
    let tool = ast::ToolFn::from_item(item);
    valid::check(&mut cx, kind, &tool, attrs);
    cx.check()?;
    let ReturnType::Type(_, ret) = &item.sig.output else {
        return Err(syn::Error::new_spanned(
            &item.sig,
            "a tool must return `Result<T, E>`",
        ));
    };
    Ok(expand::expand(kind, &tool, attrs, ret, private.clone()))
}

/// A tool inside an `impl` block or a trait: the error saying where it
/// goes, and the function as written, or the stub where it parses as one.
fn misplaced(kind: Kind, block: place::Block, item: TokenStream2) -> TokenStream2 {
    // A function with a body, or a trait's without one.
    let parsed = syn::parse2::<ItemFn>(item.clone());
    let name = match &parsed {
        Ok(f) => format!("`{}`", f.sig.ident),
        Err(_) => syn::parse2::<syn::TraitItemFn>(item.clone()).map_or_else(
            |_| "the function".to_owned(),
            |f| format!("`{}`", f.sig.ident),
        ),
    };
    let message = format!(
        "`#[{attr}]` goes on a free function at module level, not on a function in {block}: \
         move {name} out of it, to the module around it; what the tool needs from `self` \
         goes in the registry's state, which it reaches through its context (`ctx.state()`)",
        attr = kind.attr_name(),
        block = block.as_str(),
    );
    let error = syn::Error::new(proc_macro2::Span::call_site(), message);
    match parsed {
        Ok(item) => stub(&item, error, &Private::of(None)),
        Err(_) => {
            let error = error.into_compile_error();
            quote!(#item #error)
        }
    }
}

/// On error: the errors, plus a function of the same name that registers
/// as a tool, so that `registry.tool(name)` adds no error of its own.
fn stub(item: &ItemFn, error: syn::Error, private: &Private) -> TokenStream2 {
    let vis = &item.vis;
    let ident = &item.sig.ident;
    let error = error.into_compile_error();
    // The crate fails to compile already; the `allow` keeps a dead-code
    // warning from adding to its errors.
    quote! {
        #error
        #[allow(dead_code)]
        #vis fn #ident(
            __idem_token: #private::CallThroughRegistry<#private::InvalidTool>,
        ) -> ::core::convert::Infallible {
            __idem_token.unreachable()
        }
    }
}
