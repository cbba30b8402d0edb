//! Every rule a tool function must follow (docs/spec.md, "Tool functions"),
//! each reported at the offending tokens.

use proc_macro2::Span;
use quote::ToTokens;
use syn::ReturnType;

use idem_rules::{
    APPROVAL_WINDOW, Approval, OnStoreError, OnUncertain, Problem, Role, WaitError, Waits,
};

use crate::ast::{CtxKind, Param, ToolFn};
use crate::attr::{ApprovalAttr, Attrs, KeyPath};
use crate::ctxt::Ctxt;
use crate::kind::Kind;

pub(crate) fn check(cx: &mut Ctxt, kind: Kind, tool: &ToolFn<'_>, attrs: &Attrs) {
    let sig = &tool.item.sig;
    let attr = kind.attr_name();

    if sig.asyncness.is_none() {
        cx.error_spanned_by(
            sig.fn_token,
            format!(
                "a `#[{attr}]` function must be `async`: write `async fn {}(..)`",
                sig.ident
            ),
        );
    }
    // Lifetimes are the function's own business: a tool may name them.
    let generic = sig
        .generics
        .params
        .iter()
        .any(|p| !matches!(p, syn::GenericParam::Lifetime(_)))
        || sig.generics.where_clause.is_some();
    if generic && tool.state_param().is_none() {
        cx.error_spanned_by(
            &sig.generics,
            "a tool function can be generic only over its application state: give its parameters concrete types, and write `async fn f<S: YourBound>(.., ctx: &WriteCtx<S>)` for a tool that works with any state meeting a bound (or `&WriteCtx` without a state type for any state at all)",
        );
    }
    if let Some(variadic) = &sig.variadic {
        cx.error_spanned_by(variadic, "a tool function cannot be variadic");
    }
    if let Some(unsafety) = &sig.unsafety {
        cx.error_spanned_by(
            unsafety,
            "a tool cannot be an `unsafe fn`: the model calls it with arguments nobody checked against the function's safety contract. Make the function safe and put an `unsafe { .. }` block inside, where the contract is upheld",
        );
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(
            abi,
            "a tool function cannot declare an ABI: remove `extern`; it is called from Rust by the registry",
        );
    }
    check_return(cx, attr, &sig.output);
    check_owned_result(cx, kind, &sig.output);
    check_name(cx, tool, attrs);
    if attrs.description.is_none() && tool.doc.is_none() {
        cx.error_spanned_by(
            &sig.ident,
            format!(
                "tool `{}` has no description: add a doc comment (`/// What it does and when to call it.`) or `#[{attr}(description = \"...\")]`; the model reads it to decide when to call the tool",
                sig.ident
            ),
        );
    }
    check_params(cx, kind, tool);
    check_roles(cx, tool, attrs);
    check_hidden(cx, tool, attrs);
    check_approval(cx, tool, attrs);
    if let (Some(_), Some((_, span))) = (&attrs.verify, &attrs.on_uncertain) {
        cx.error_at(
            *span,
            "`verify = ..` is this tool's policy for an uncertain outcome (ask the downstream; refuse if it cannot tell): remove `on_uncertain`",
        );
    }
}

/// A tool that needs a person's approval may never run without a claim,
/// which `on_store_error = "run"` would let it; an approval window is for
/// a tool that asks for approvals; a function that decides takes at most
/// [`MAX_DECISION_ARGUMENTS`] (what `__private::Decides` is written for).
fn check_approval(cx: &mut Ctxt, tool: &ToolFn<'_>, attrs: &Attrs) {
    if let Some(ApprovalAttr::Decided(path)) = &attrs.approval
        && tool.params.len() > MAX_DECISION_ARGUMENTS
    {
        cx.error_spanned_by(
            path,
            format!(
                "a function that decides approval is given each of the tool's parameters, and this tool has {} (at most {MAX_DECISION_ARGUMENTS}): take the arguments as one `#[args]` struct, and give the function a reference to it",
                tool.params.len()
            ),
        );
    }
    let asks = match &attrs.approval {
        Some(ApprovalAttr::Named(Approval::Never, _)) | None => false,
        Some(_) => true,
    };
    if let (false, Some((_, span))) = (asks, &attrs.approval_window) {
        cx.error_at(
            *span,
            "`approval_window` is how long a person's approval stays good, and this tool asks for none: give `approval = \"required\"` (or \"ask\", or a function that decides), or remove `approval_window`",
        );
    }
    check_waits(cx, attrs);
    if asks && attrs.on_store_error == Some(OnStoreError::Run) {
        let message = "a tool that needs a person's approval never runs without a claim, which `on_store_error = \"run\"` would let it do: remove `on_store_error`";
        match &attrs.approval {
            Some(ApprovalAttr::Named(_, span)) => cx.error_at(*span, message),
            Some(ApprovalAttr::Decided(path)) => cx.error_spanned_by(path, message),
            None => {}
        }
    }
}

/// A wait for a person only where the tool asks one, and no longer than an
/// approval stays good: the rule every front shares
/// ([`idem_rules::Waits`]), spanned at the wait.
fn check_waits(cx: &mut Ctxt, attrs: &Attrs) {
    let approval = match &attrs.approval {
        Some(ApprovalAttr::Named(approval, _)) => *approval,
        Some(ApprovalAttr::Decided(_)) => Approval::Decided,
        None => Approval::Never,
    };
    let on_uncertain = match (&attrs.verify, &attrs.on_uncertain) {
        (Some(_), _) => OnUncertain::Verify,
        (None, Some((policy, _))) => *policy,
        (None, None) => OnUncertain::Rerun,
    };
    let waits = Waits {
        approval,
        approval_window: attrs.approval_window.map_or(APPROVAL_WINDOW, |(w, _)| w),
        approval_wait: attrs.approval_wait.map(|(wait, _)| wait),
        on_uncertain,
        uncertain_wait: attrs.uncertain_wait.map(|(wait, _)| wait),
    };
    if let Err(e) = waits.check() {
        let given = match e {
            WaitError::NothingToResolve => &attrs.uncertain_wait,
            _ => &attrs.approval_wait,
        };
        let span = given.map_or_else(Span::call_site, |(_, span)| span);
        cx.error_at(span, e.to_string());
    }
}

/// The most arguments (the tool's parameters, its context among them) a
/// function that decides approval is called with.
const MAX_DECISION_ARGUMENTS: usize = 16;

fn check_return(cx: &mut Ctxt, attr: &str, output: &ReturnType) {
    let message = format!(
        "a `#[{attr}]` function must return `Result<T, E>`: `T` is the result the model reads (it must be `Serialize`), `E` the error it reads instead (it must be `Display`)"
    );
    match output {
        ReturnType::Default => cx.error_at(
            proc_macro2::Span::call_site(),
            format!("{message}; this function returns `()`"),
        ),
        ReturnType::Type(_, ty) => {
            if !may_be_result(ty) {
                cx.error_spanned_by(ty, message);
            }
        }
    }
}

/// Whether `ty` may be a `Result`: `Result<T, E>` itself, or a path that
/// may name an alias of one (`anyhow::Result<T>`, `type Res<T> = ..`, a
/// macro's `$ret`), which the generated code then checks. Types that are
/// surely something else are refused here, at the type.
fn may_be_result(ty: &syn::Type) -> bool {
    const NOT_RESULTS: &[&str] = &[
        "String", "str", "bool", "char", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16",
        "i32", "i64", "i128", "isize", "f32", "f64", "Vec", "Option", "HashMap", "BTreeMap",
        "HashSet", "BTreeSet", "Value", "Box", "Arc", "Rc",
    ];
    match ty {
        syn::Type::Group(g) => may_be_result(&g.elem),
        syn::Type::Paren(p) => may_be_result(&p.elem),
        syn::Type::Path(tp) => tp
            .path
            .segments
            .last()
            .is_some_and(|s| !NOT_RESULTS.contains(&s.ident.to_string().as_str())),
        _ => false,
    }
}

fn check_name(cx: &mut Ctxt, tool: &ToolFn<'_>, attrs: &Attrs) {
    let (name, tokens) = match &attrs.name {
        Some(lit) => (lit.value(), lit.to_token_stream()),
        None => (
            tool.item.sig.ident.unraw_string(),
            tool.item.sig.ident.to_token_stream(),
        ),
    };
    if name.len() > 64 {
        cx.error_spanned_by(
            tokens,
            format!(
                "the tool name `{name}` is {} bytes long; providers accept at most 64: choose a shorter `name = \"...\"`",
                name.len()
            ),
        );
    } else if !idem_rules::valid_tool_name(&name) {
        cx.error_spanned_by(
            tokens,
            format!(
                "invalid tool name `{name}`: use ASCII letters, digits, `_` and `-`, starting with a letter or `_` (what OpenAI, Anthropic, Gemini and MCP all accept)"
            ),
        );
    }
}

trait UnrawString {
    fn unraw_string(&self) -> String;
}

impl UnrawString for syn::Ident {
    fn unraw_string(&self) -> String {
        use syn::ext::IdentExt;
        self.unraw().to_string()
    }
}

fn check_params(cx: &mut Ctxt, kind: Kind, tool: &ToolFn<'_>) {
    let mut ctx_seen = false;
    let mut args_seen = false;
    let has_flat = tool.flat().next().is_some();
    for param in &tool.params {
        match param {
            Param::Receiver { arg } => cx.error_spanned_by(
                arg,
                "a tool is a free function, not a method: remove `self` and reach shared state through the context (`ctx.state()`)",
            ),
            Param::Unnamed { arg } => cx.error_spanned_by(
                arg,
                "a tool parameter must be a plain name (`query: String`): it becomes a property of the tool's JSON schema. To take a struct apart, mark it `#[args]` and destructure it in the body",
            ),
            Param::Ctx(c) => {
                if ctx_seen {
                    cx.error_spanned_by(c.ty, "a tool takes at most one context parameter");
                }
                ctx_seen = true;
                match (kind, c.kind) {
                    (Kind::Read, CtxKind::Write) => cx.error_spanned_by(
                        c.ty,
                        "`&WriteCtx` belongs to `#[write_tool]`: a `#[read_tool]` takes `&Ctx<S>` or no context. If this tool has side effects, make it a `#[write_tool]`",
                    ),
                    (Kind::Write, CtxKind::Read) => cx.error_spanned_by(
                        c.ty,
                        "a `#[write_tool]` takes `&WriteCtx<S>`, not `&Ctx<S>`: its `idem_key()` is what you pass downstream (e.g. as a payment API's Idempotency-Key), so that even a duplicate that slips past the store is caught there",
                    ),
                    _ if !c.shared_ref => cx.error_spanned_by(
                        c.ty,
                        format!(
                            "take the context by shared reference: `ctx: &{}<..>`",
                            c.kind.type_name()
                        ),
                    ),
                    _ => {}
                }
            }
            Param::Args { marker, .. } => {
                if args_seen {
                    cx.error_spanned_by(
                        marker,
                        "only one parameter can be `#[args]`: it holds all of the tool's arguments",
                    );
                } else if has_flat {
                    cx.error_spanned_by(
                        marker,
                        "`#[args]` takes all the arguments in one struct, so it cannot be mixed with other argument parameters: move them into the struct, or drop `#[args]` and list every argument as a parameter",
                    );
                }
                args_seen = true;
            }
            Param::Flat { ty, .. } => check_param_type(cx, ty),
        }
    }
    if kind == Kind::Write && !tool.params.iter().any(|p| matches!(p, Param::Ctx(_))) {
        cx.error_spanned_by(
            &tool.item.sig.ident,
            format!(
                "a `#[write_tool]` must take the idempotency context: add a parameter `ctx: &WriteCtx<YourState>` (or `&WriteCtx` for any state) and pass `ctx.idem_key()` downstream, e.g. as a payment API's Idempotency-Key, so that a retry of `{}` is recognised there too",
                tool.item.sig.ident
            ),
        );
    }
}

/// A parameter's type must be owned and named: it is deserialized from the
/// model's JSON, and outlives the call that made it.
fn check_param_type(cx: &mut Ctxt, ty: &syn::Type) {
    match ty {
        syn::Type::Reference(r) => cx.error_spanned_by(
            ty,
            format!(
                "a tool parameter must own its value: it is deserialized from the model's JSON, which is gone once the call starts. Take {} instead",
                owned_suggestion(&r.elem)
            ),
        ),
        syn::Type::ImplTrait(_) => cx.error_spanned_by(
            ty,
            "a tool parameter needs a concrete type (it is deserialized from JSON and described in the tool's schema): replace `impl ..` with the type itself, e.g. `String` or `Vec<u64>`",
        ),
        _ => {}
    }
}

/// Tokens as a user would write them: `std::error::Error`, `Vec<u8>`.
fn as_written(tokens: &impl ToTokens) -> String {
    tokens
        .to_token_stream()
        .to_string()
        .replace(" :: ", "::")
        .replace(":: ", "::")
        .replace(" < ", "<")
        .replace(" <", "<")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(" ,", ",")
}

/// What to write instead of a reference to `elem`.
fn owned_suggestion(elem: &syn::Type) -> String {
    match elem {
        syn::Type::Path(p) if p.path.is_ident("str") => "`String`".to_owned(),
        syn::Type::Slice(s) => format!("`Vec<{}>`", as_written(&s.elem)),
        other => format!("`{}`", as_written(other)),
    }
}

/// The result `T` of `Result<T, E>` must be owned too: a write tool's result
/// is recorded and replayed (so it must deserialize into an owned value), a
/// read tool's serialized after the call (so it may borrow only `'static`
/// data).
fn check_owned_result(cx: &mut Ctxt, kind: Kind, output: &ReturnType) {
    let ReturnType::Type(_, ty) = output else {
        return;
    };
    let mut ty = &**ty;
    while let syn::Type::Group(g) = ty {
        ty = &g.elem;
    }
    let syn::Type::Path(tp) = ty else { return };
    let Some(last) = tp.path.segments.last() else {
        return;
    };
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return;
    };
    if let Some(syn::GenericArgument::Type(err)) = args.args.iter().nth(1) {
        check_error_is_send(cx, err);
    }
    if let Some(syn::GenericArgument::Type(ok @ syn::Type::Reference(r))) = args.args.first()
        && (kind == Kind::Write || r.lifetime.as_ref().is_none_or(|l| l.ident != "static"))
    {
        cx.error_spanned_by(
            ok,
            format!(
                "a tool's result must own its value: it is serialized after the call (and a write tool's recorded and replayed to duplicates). Return {} instead",
                owned_suggestion(&r.elem)
            ),
        );
    }
}

/// `Box<dyn Error>` without `Send`: the usual way to end up with an error
/// a tool cannot have, named with its fix (other types are checked by the
/// compiler, at the same tokens).
fn check_error_is_send(cx: &mut Ctxt, err: &syn::Type) {
    let syn::Type::Path(tp) = err else { return };
    let Some(last) = tp.path.segments.last() else {
        return;
    };
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return;
    };
    let Some(syn::GenericArgument::Type(syn::Type::TraitObject(object))) = args.args.first() else {
        return;
    };
    let is_send = object.bounds.iter().any(|bound| {
        matches!(bound, syn::TypeParamBound::Trait(t)
            if t.path.segments.last().is_some_and(|s| s.ident == "Send"))
    });
    if last.ident == "Box" && !is_send {
        cx.error_spanned_by(
            err,
            format!(
                "a tool's error must be `Send` (a call may run on any thread of the runtime): write `Box<{} + Send + Sync>`",
                as_written(object)
            ),
        );
    }
}

/// The field roles (`key`, `check`, `ignore`): by the rules `idem-rules`
/// writes down for the runtime too, and, for flat parameters, each list
/// naming parameters only. An `#[args]` struct's fields are not visible
/// here: `Registry::build` checks them against its schema.
fn check_roles(cx: &mut Ctxt, tool: &ToolFn<'_>, attrs: &Attrs) {
    let lists = [
        (Role::Key, attrs.key.as_ref()),
        (Role::Check, attrs.check.as_ref()),
        (Role::Ignore, attrs.ignore.as_ref()),
    ];
    let dotted = lists
        .map(|(_, list)| list.map(|l| l.fields.iter().map(KeyPath::dotted).collect::<Vec<_>>()));
    let paths = dotted.each_ref().map(|d| {
        d.as_ref()
            .map(|d| d.iter().map(String::as_str).collect::<Vec<_>>())
    });
    let params: Vec<String> = tool.flat().map(|(ident, _)| ident.unraw_string()).collect();
    let arguments: Vec<&str> = params.iter().map(String::as_str).collect();
    let known = tool.args_param().is_none().then_some(arguments.as_slice());
    let list_of = |role: Role| lists.iter().find(|(r, _)| *r == role).and_then(|(_, l)| *l);
    idem_rules::check_roles(
        paths[0].as_deref(),
        paths[1].as_deref(),
        paths[2].as_deref(),
        known,
        |fault| {
            let Some(list) = list_of(fault.role) else {
                return;
            };
            match (fault.problem, list.fields.get(fault.index)) {
                (Problem::Repeated { .. } | Problem::InsideIgnored { .. }, Some(path)) => {
                    cx.error_spanned_by(path, fault);
                }
                _ => cx.error_at(list.span, fault),
            }
        },
    );
    let Some(known) = known else { return };
    for (role, list) in lists {
        for path in list.into_iter().flat_map(|l| &l.fields) {
            let first = path.first().unraw_string();
            let list_param = tool
                .flat()
                .find(|(ident, _)| ident.unraw_string() == first)
                .filter(|(_, ty)| is_list(ty));
            if let (Some((_, ty)), Some(into)) = (list_param, path.segments.get(1)) {
                cx.error_spanned_by(
                    into,
                    format!(
                        "`{first}` is a list (`{}`), and a role cannot reach into its items: give the whole `{first}` a role instead (`{} = [{first}]`)",
                        ty.to_token_stream().to_string().replace(' ', ""),
                        role.attribute(),
                    ),
                );
            }
            if !known.contains(&first.as_str()) {
                let names: Vec<String> = known.iter().map(|n| format!("`{n}`")).collect();
                cx.error_spanned_by(
                    path.first(),
                    format!(
                        "`{}` names `{first}`, which is not a parameter of this tool; the parameters are {}",
                        role.attribute(),
                        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                    ),
                );
            }
        }
    }
}

/// `hide = [..]`: for flat parameters, each path starts at a parameter
/// (an `#[args]` struct's fields are checked by `Registry::build`).
fn check_hidden(cx: &mut Ctxt, tool: &ToolFn<'_>, attrs: &Attrs) {
    if tool.args_param().is_some() {
        return;
    }
    let params: Vec<String> = tool.flat().map(|(ident, _)| ident.unraw_string()).collect();
    for path in attrs.hide.iter().flat_map(|l| &l.fields) {
        let first = path.first().unraw_string();
        if !params.contains(&first) {
            let names: Vec<String> = params.iter().map(|n| format!("`{n}`")).collect();
            cx.error_spanned_by(
                path.first(),
                format!(
                    "`hide` names `{first}`, which is not a parameter of this tool; the parameters are {}",
                    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                ),
            );
        }
    }
}

/// Whether `ty` is written as a list: an array, a slice or one of the
/// standard collections of items (through an `Option`), as a flat
/// parameter's type names it.
fn is_list(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Array(_) | syn::Type::Slice(_) => true,
        syn::Type::Path(tp) => tp.path.segments.last().is_some_and(|last| {
            let name = last.ident.to_string();
            match name.as_str() {
                "Vec" | "VecDeque" | "LinkedList" | "HashSet" | "BTreeSet" | "BinaryHeap" => true,
                "Option" | "Box" => match &last.arguments {
                    syn::PathArguments::AngleBracketed(a) => a.args.iter().any(
                        |arg| matches!(arg, syn::GenericArgument::Type(inner) if is_list(inner)),
                    ),
                    _ => false,
                },
                _ => false,
            }
        }),
        syn::Type::Paren(p) => is_list(&p.elem),
        syn::Type::Group(g) => is_list(&g.elem),
        _ => false,
    }
}
