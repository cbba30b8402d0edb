//! The annotated function, classified: borrows the input, keeps its tokens
//! for spans.

use syn::{Attribute, FnArg, Ident, ItemFn, Pat, PathArguments, Type};

use crate::symbol::ARGS;

/// Which context type a parameter is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CtxKind {
    Read,
    Write,
}

impl CtxKind {
    pub(crate) fn type_name(self) -> &'static str {
        match self {
            CtxKind::Read => "Ctx",
            CtxKind::Write => "WriteCtx",
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
}

/// A parameter of the tool function.
pub(crate) enum Param<'a> {
    /// A flat argument: one property of the schema.
    Flat {
        ident: &'a Ident,
        ty: &'a Type,
        /// `T` of a parameter written `Option<T>`: optional in the schema.
        optional: Option<&'a Type>,
        /// Its `///` lines and `#[serde]` / `#[schemars]` attributes.
        field_attrs: Vec<&'a Attribute>,
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
    /// The doc comment, joined, if any.
    pub(crate) doc: Option<String>,
}

impl<'a> ToolFn<'a> {
    pub(crate) fn from_item(item: &'a ItemFn) -> ToolFn<'a> {
        ToolFn {
            item,
            params: item.sig.inputs.iter().map(classify).collect(),
            doc: doc_text(&item.attrs),
        }
    }

    pub(crate) fn ctx(&self) -> Option<&CtxParam<'a>> {
        self.params.iter().find_map(|p| match p {
            Param::Ctx(c) => Some(c),
            _ => None,
        })
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
        ty: &pt.ty,
        optional: option_inner(&pt.ty),
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

/// The serialized name a `#[serde(rename = "..")]` or
/// `#[serde(rename(serialize = ".."))]` among `attrs` gives.
fn serde_rename(attrs: &[&Attribute]) -> Option<String> {
    let mut name = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        // A malformed attribute is serde's to report.
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
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
            } else if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let _content;
                syn::parenthesized!(_content in meta.input);
            }
            Ok(())
        });
    }
    name
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
/// and trimmed; `None` when there are none or they are blank.
pub(crate) fn doc_text(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| {
            line.strip_prefix(' ')
                .unwrap_or(&line)
                .trim_end()
                .to_owned()
        })
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}
