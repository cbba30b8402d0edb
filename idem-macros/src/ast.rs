//! The annotated function, classified: borrows the input, keeps its tokens
//! for spans.

use proc_macro2::TokenStream;
use syn::{Attribute, FnArg, Ident, ItemFn, Pat, PathArguments, Type};

use crate::symbol::ARGS;

/// Which context type a parameter is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CtxKind {
    Read,
    Write,
    /// Another name for one of the two (`type AppCtx = WriteCtx<App>`),
    /// which the generated code resolves and checks.
    Alias,
}

impl CtxKind {
    pub(crate) fn type_name(self) -> &'static str {
        match self {
            CtxKind::Read => "Ctx",
            CtxKind::Write => "WriteCtx",
            CtxKind::Alias => "WriteCtx",
        }
    }
}

/// A context parameter: `ctx: &WriteCtx<Shop>`.
pub(crate) struct CtxParam<'a> {
    pub(crate) kind: CtxKind,
    /// The whole parameter type, for spans.
    pub(crate) ty: &'a Type,
    /// `&T` (true) or something else (by value, `&mut`).
    pub(crate) shared_ref: bool,
    /// `None` when written without a state type: the tool is state-generic.
    pub(crate) state: Option<&'a Type>,
    /// For an alias, the type behind the reference (`AppCtx`).
    pub(crate) alias: Option<&'a Type>,
}

/// A parameter of the tool function.
pub(crate) enum Param<'a> {
    /// A flat argument: one property of the schema.
    Flat {
        ident: &'a Ident,
        /// `mut`, when the parameter is declared so.
        mutability: Option<syn::token::Mut>,
        ty: &'a Type,
        /// `T` of a parameter written `Option<T>`: optional in the schema.
        optional: Option<&'a Type>,
        /// Its `///` lines and `#[serde]` / `#[schemars]` attributes.
        field_attrs: Vec<&'a Attribute>,
        /// Its `#[cfg(..)]` attributes.
        cfgs: Vec<&'a Attribute>,
    },
    /// The one `#[args]` struct.
    Args {
        /// The `#[args]` attribute.
        marker: &'a Attribute,
        ty: &'a Type,
    },
    /// `&Ctx<S>` / `&WriteCtx<S>`.
    Ctx(CtxParam<'a>),
    /// A parameter whose pattern is not a plain name.
    Unnamed { arg: &'a FnArg },
    /// `self`.
    Receiver { arg: &'a FnArg },
}

/// The function as the macros see it.
pub(crate) struct ToolFn<'a> {
    pub(crate) item: &'a ItemFn,
    pub(crate) params: Vec<Param<'a>>,
    /// The description the doc comment gives: a string literal, or a
    /// `concat!` of its lines where one is a macro (`#[doc =
    /// include_str!(..)]`); `None` without a doc comment, or a blank one.
    pub(crate) doc: Option<TokenStream>,
}

impl<'a> ToolFn<'a> {
    pub(crate) fn from_item(item: &'a ItemFn) -> ToolFn<'a> {
        let mut params: Vec<Param<'a>> = item.sig.inputs.iter().map(classify).collect();
        if !params.iter().any(|p| matches!(p, Param::Ctx(_))) {
            // Without a context under its own name, the first parameter
            // taken by reference to a named type is the context under
            // another (`ctx: &AppCtx`); arguments are never borrowed. The
            // generated code checks that it is one.
            let found = params
                .iter()
                .enumerate()
                .find_map(|(i, p)| context_alias(p).map(|alias| (i, alias)));
            if let Some((i, alias)) = found {
                params[i] = Param::Ctx(alias);
            }
        }
        ToolFn {
            item,
            params,
            doc: doc_description(&item.attrs),
        }
    }

    pub(crate) fn ctx(&self) -> Option<&CtxParam<'a>> {
        self.params.iter().find_map(|p| match p {
            Param::Ctx(c) => Some(c),
            _ => None,
        })
    }

    /// The type parameter the function is generic over, when that is its
    /// only generic parameter but for lifetimes and its context's state is
    /// it (`async fn f<S: Bound>(.., ctx: &WriteCtx<S>)`).
    pub(crate) fn state_param(&self) -> Option<&'a syn::TypeParam> {
        let generics = &self.item.sig.generics;
        let mut params = generics
            .params
            .iter()
            .filter(|p| !matches!(p, syn::GenericParam::Lifetime(_)));
        let (Some(syn::GenericParam::Type(param)), None) = (params.next(), params.next()) else {
            return None;
        };
        let state = self.ctx()?.state?;
        match state {
            Type::Path(tp) if tp.qself.is_none() && tp.path.is_ident(&param.ident) => Some(param),
            _ => None,
        }
    }

    pub(crate) fn args_param(&self) -> Option<&'a Type> {
        self.params.iter().find_map(|p| match p {
            Param::Args { ty, .. } => Some(*ty),
            _ => None,
        })
    }

    /// The name flat parameter `ident` has in the arguments' JSON: its
    /// `#[serde(rename = "..")]` (the serialized name, when the two
    /// differ), else its name without `r#`. `None` if no such parameter.
    pub(crate) fn json_name(&self, ident: &Ident) -> Option<String> {
        use syn::ext::IdentExt;
        let wanted = ident.unraw();
        self.params.iter().find_map(|p| match p {
            Param::Flat {
                ident, field_attrs, ..
            } if ident.unraw() == wanted => {
                Some(serde_rename(field_attrs).unwrap_or_else(|| wanted.to_string()))
            }
            _ => None,
        })
    }

    pub(crate) fn flat(&self) -> impl Iterator<Item = (&'a Ident, &'a Type)> + '_ {
        self.params.iter().filter_map(|p| match p {
            Param::Flat { ident, ty, .. } => Some((*ident, *ty)),
            _ => None,
        })
    }
}

fn classify(arg: &FnArg) -> Param<'_> {
    let FnArg::Typed(pt) = arg else {
        return Param::Receiver { arg };
    };
    if let Some(ctx) = ctx_param(&pt.ty) {
        return Param::Ctx(ctx);
    }
    if let Some(marker) = pt.attrs.iter().find(|a| a.path().is_ident(ARGS)) {
        return Param::Args { marker, ty: &pt.ty };
    }
    let Pat::Ident(pi) = &*pt.pat else {
        return Param::Unnamed { arg };
    };
    if pi.by_ref.is_some() || pi.subpat.is_some() {
        return Param::Unnamed { arg };
    }
    Param::Flat {
        ident: &pi.ident,
        mutability: pi.mutability,
        ty: &pt.ty,
        optional: option_inner(&pt.ty),
        cfgs: pt
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("cfg"))
            .collect(),
        field_attrs: pt
            .attrs
            .iter()
            .filter(|a| {
                a.path().is_ident("doc")
                    || a.path().is_ident("serde")
                    || a.path().is_ident("schemars")
            })
            .collect(),
    }
}

/// Calls `visit` with each key of the `#[serde(..)]` attributes among
/// `attrs` (`default`, `with`, `rename`, ...) and its tokens; the value of
/// a key `visit` did not read (it returns `false`) is skipped. A malformed
/// attribute is serde's to report.
fn for_each_serde_key(
    attrs: &[&Attribute],
    mut visit: impl FnMut(&str, &syn::meta::ParseNestedMeta<'_>) -> syn::Result<bool>,
) {
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(Ident::to_string)
                .unwrap_or_default();
            if visit(&key, &meta)? {
                return Ok(());
            }
            if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let _content;
                syn::parenthesized!(_content in meta.input);
            }
            Ok(())
        });
    }
}

/// The keys of the `#[serde(..)]` attributes among `attrs`.
pub(crate) fn serde_keys(attrs: &[&Attribute]) -> Vec<String> {
    let mut keys = Vec::new();
    for_each_serde_key(attrs, |key, _| {
        keys.push(key.to_owned());
        Ok(false)
    });
    keys
}

/// The serialized name a `#[serde(rename = "..")]` or
/// `#[serde(rename(serialize = ".."))]` among `attrs` gives.
fn serde_rename(attrs: &[&Attribute]) -> Option<String> {
    let mut name = None;
    for_each_serde_key(attrs, |key, meta| {
        if key != "rename" {
            return Ok(false);
        }
        if meta.input.peek(syn::Token![=]) {
            let lit: syn::LitStr = meta.value()?.parse()?;
            name = Some(lit.value());
        } else {
            meta.parse_nested_meta(|inner| {
                let lit: syn::LitStr = inner.value()?.parse()?;
                if inner.path.is_ident("serialize") {
                    name = Some(lit.value());
                }
                Ok(())
            })?;
        }
        Ok(true)
    });
    name
}

/// A flat parameter `&T` with `T` a type named like a context (`AppCtx`,
/// `ShopContext`): the context under another name. Any other borrowed
/// parameter stays an argument, refused with the owned type to take.
fn context_alias<'a>(param: &Param<'a>) -> Option<CtxParam<'a>> {
    let Param::Flat { ty, .. } = param else {
        return None;
    };
    let Type::Reference(r) = ty else { return None };
    let Type::Path(tp) = &*r.elem else {
        return None;
    };
    let named_like_a_context = tp.path.segments.last().is_some_and(|s| {
        let name = s.ident.to_string();
        name.ends_with("Ctx") || name.ends_with("Context")
    });
    if r.mutability.is_some() || tp.qself.is_some() || !named_like_a_context {
        return None;
    }
    Some(CtxParam {
        kind: CtxKind::Alias,
        ty,
        shared_ref: true,
        state: None,
        alias: Some(&*r.elem),
    })
}

/// `&Ctx<..>`, `&WriteCtx`, `WriteCtx<..>`, ...: any type whose last path
/// segment is `Ctx` or `WriteCtx`, behind a reference or not.
fn ctx_param(ty: &Type) -> Option<CtxParam<'_>> {
    let (inner, shared_ref) = match ty {
        Type::Reference(r) => (&*r.elem, r.mutability.is_none()),
        other => (other, false),
    };
    let Type::Path(tp) = inner else {
        return None;
    };
    let last = tp.path.segments.last()?;
    let kind = if last.ident == "Ctx" {
        CtxKind::Read
    } else if last.ident == "WriteCtx" {
        CtxKind::Write
    } else {
        return None;
    };
    let state = match &last.arguments {
        PathArguments::AngleBracketed(ab) => ab.args.iter().find_map(|a| match a {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        }),
        _ => None,
    };
    Some(CtxParam {
        kind,
        ty,
        shared_ref,
        state,
        alias: None,
    })
}

/// `T` when `ty` is written `Option<T>` (any path ending in `Option`).
fn option_inner(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Path(tp) if tp.qself.is_none() => {
            let last = tp.path.segments.last()?;
            if last.ident != "Option" {
                return None;
            }
            let PathArguments::AngleBracketed(ab) = &last.arguments else {
                return None;
            };
            match ab.args.first() {
                Some(syn::GenericArgument::Type(inner)) if ab.args.len() == 1 => Some(inner),
                _ => None,
            }
        }
        Type::Group(g) => option_inner(&g.elem),
        _ => None,
    }
}

/// The `///` lines, each stripped of one leading space, joined by newlines
/// and trimmed, as a string literal; where a line is a macro
/// (`#[doc = concat!(..)]`), a `concat!` of the lines. `None` when there are
/// none or they are blank.
pub(crate) fn doc_description(attrs: &[Attribute]) -> Option<TokenStream> {
    let values: Vec<&syn::Expr> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => Some(&nv.value),
            _ => None,
        })
        .collect();
    fn line(value: &syn::Expr) -> Result<String, &syn::Expr> {
        match value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => {
                let text = s.value();
                Ok(text
                    .strip_prefix(' ')
                    .unwrap_or(&text)
                    .trim_end()
                    .to_owned())
            }
            other => Err(other),
        }
    }
    if values.iter().all(|v| line(v).is_ok()) {
        let lines: Vec<String> = values.iter().filter_map(|v| line(v).ok()).collect();
        let text = lines.join("\n").trim().to_owned();
        return (!text.is_empty()).then(|| quote::quote!(#text));
    }
    let mut pieces = Vec::new();
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            pieces.push(quote::quote!("\n"));
        }
        pieces.push(match line(value) {
            Ok(text) => quote::quote!(#text),
            Err(expr) => quote::quote!(#expr),
        });
    }
    Some(quote::quote!(::core::concat!(#(#pieces),*)))
}
