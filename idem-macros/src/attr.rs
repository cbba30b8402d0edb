//! The `#[read_tool(..)]` / `#[write_tool(..)]` arguments.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Ident, LitBool, LitInt, LitStr, Token};

use crate::ctxt::Ctxt;
use crate::kind::Kind;
use crate::symbol::*;
use idem_rules::{Approval, OnInFlight, OnStoreError, OnUncertain, ScopeKind, SettingError};
use std::time::Duration;

/// One entry of `key = [..]`, `check = [..]` or `ignore = [..]`: a field,
/// or a path into nested objects (`order.id`), as the user wrote it.
pub(crate) struct KeyPath {
    pub(crate) segments: Vec<Ident>,
}

impl KeyPath {
    /// The parameter or field the path starts at.
    pub(crate) fn first(&self) -> &Ident {
        &self.segments[0]
    }

    /// The segments after the first, without `r#`.
    pub(crate) fn rest(&self) -> impl Iterator<Item = String> + '_ {
        use syn::ext::IdentExt;
        self.segments[1..].iter().map(|s| s.unraw().to_string())
    }

    /// The whole path, `order.id`, without `r#`.
    pub(crate) fn dotted(&self) -> String {
        use syn::ext::IdentExt;
        let first = self.first().unraw().to_string();
        std::iter::once(first)
            .chain(self.rest())
            .collect::<Vec<_>>()
            .join(".")
    }
}

impl ToTokens for KeyPath {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                Token![.](segment.span()).to_tokens(tokens);
            }
            segment.to_tokens(tokens);
        }
    }
}

/// A list of fields (`key = [a, b.c]`) and the span of its brackets.
pub(crate) struct FieldList {
    pub(crate) span: Span,
    pub(crate) fields: Vec<KeyPath>,
}

/// The attribute's settings, each with the tokens it came from.
#[derive(Default)]
pub(crate) struct Attrs {
    pub(crate) name: Option<LitStr>,
    /// A string literal, or a macro that expands to one (`concat!`,
    /// `include_str!`).
    pub(crate) description: Option<TokenStream>,
    pub(crate) lease: Option<Duration>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) max_result_bytes: Option<usize>,
    pub(crate) scope: Option<ScopeKind>,
    /// `key = [..]`, `check = [..]` and `ignore = [..]`: the field roles,
    /// each with the span of its brackets.
    pub(crate) key: Option<FieldList>,
    pub(crate) check: Option<FieldList>,
    pub(crate) ignore: Option<FieldList>,
    /// `hide = [..]`: fields records do not show operators.
    pub(crate) hide: Option<FieldList>,
    pub(crate) version: Option<u32>,
    pub(crate) on_in_flight: Option<OnInFlight>,
    pub(crate) on_store_error: Option<OnStoreError>,
    /// `on_uncertain = ".."`, and where it was written.
    pub(crate) on_uncertain: Option<(OnUncertain, Span)>,
    /// `verify = path`: the function that asks the downstream.
    pub(crate) verify: Option<syn::Expr>,
    /// `approval = "never" | "required" | "ask"`, or `approval = path`: the
    /// function that says whether a call needs one.
    pub(crate) approval: Option<ApprovalAttr>,
    /// `approval_window = ".."`, and where it was written.
    pub(crate) approval_window: Option<(Duration, Span)>,
    /// `approval_wait = ".."`, and where it was written.
    pub(crate) approval_wait: Option<(Duration, Span)>,
    /// `uncertain_wait = ".."`, and where it was written.
    pub(crate) uncertain_wait: Option<(Duration, Span)>,
    pub(crate) permanent_errors: Option<syn::Expr>,
    pub(crate) uncertain_errors: Option<syn::Expr>,
    pub(crate) destructive: Option<LitBool>,
    pub(crate) open_world: Option<LitBool>,
    /// The facade's path, when not `::idem`.
    pub(crate) krate: Option<syn::Path>,
}

impl Attrs {
    /// Parses `tokens`, the attribute's arguments, reporting every problem.
    pub(crate) fn parse(cx: &mut Ctxt, kind: Kind, tokens: TokenStream) -> Attrs {
        let mut attrs = Attrs::default();
        let mut given: Vec<String> = Vec::new();
        let parser = syn::meta::parser(|meta| {
            let Some(ident) = meta.path.get_ident().map(Ident::to_string) else {
                cx.error_spanned_by(&meta.path, unknown_key_message(kind, "this path"));
                return skip_value(&meta);
            };
            if !kind.keys().contains(&ident.as_str()) {
                let message = if kind == Kind::Read && WRITE_KEYS.contains(&ident.as_str()) {
                    let keys: Vec<String> = READ_KEYS.iter().map(|k| format!("`{k}`")).collect();
                    format!(
                        "`{ident}` only applies to `#[write_tool]`: a read tool never touches the store; `#[read_tool]` accepts {}",
                        keys.join(", ")
                    )
                } else {
                    unknown_key_message(kind, &format!("`{ident}`"))
                };
                cx.error_spanned_by(&meta.path, message);
                return skip_value(&meta);
            }
            if given.contains(&ident) {
                cx.error_spanned_by(&meta.path, format!("duplicate key `{ident}`: give it once"));
                return skip_value(&meta);
            }
            given.push(ident.clone());
            if let Err(e) = attrs.parse_key(&ident, &meta) {
                cx.syn_error(e);
                return skip_value(&meta);
            }
            Ok(())
        });
        if let Err(e) = syn::parse::Parser::parse2(parser, tokens) {
            cx.syn_error(e);
        }
        attrs
    }

    fn parse_key(&mut self, ident: &str, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
        if !meta.input.peek(Token![=]) && ![DESTRUCTIVE, OPEN_WORLD].contains(&ident) {
            return Err(meta.error(needs_value(ident)));
        }
        let duration = || parse_duration(ident, meta);
        match ident {
            NAME => self.name = Some(meta.value()?.parse()?),
            DESCRIPTION => self.description = Some(parse_description(meta)?),
            LEASE => self.lease = Some(duration()?),
            TTL => self.ttl = Some(duration()?),
            MAX_HOLD => self.max_hold = Some(duration()?),
            MAX_RESULT_BYTES => self.max_result_bytes = Some(parse_max_result_bytes(meta)?),
            SCOPE => self.scope = Some(parse_named(meta, ScopeKind::parse)?),
            KEY => self.key = Some(parse_field_list(meta)?),
            CHECK => self.check = Some(parse_field_list(meta)?),
            IGNORE => self.ignore = Some(parse_field_list(meta)?),
            HIDE => self.hide = Some(parse_field_list(meta)?),
            VERSION => self.version = Some(parse_version(meta)?),
            ON_IN_FLIGHT => self.on_in_flight = Some(parse_named(meta, OnInFlight::parse)?),
            ON_STORE_ERROR => self.on_store_error = Some(parse_named(meta, OnStoreError::parse)?),
            ON_UNCERTAIN => {
                self.on_uncertain = Some((parse_on_uncertain(meta)?, meta.path.span()));
            }
            VERIFY => self.verify = Some(meta.value()?.parse()?),
            APPROVAL => self.approval = Some(parse_approval(meta)?),
            APPROVAL_WINDOW => self.approval_window = Some((duration()?, meta.path.span())),
            APPROVAL_WAIT => self.approval_wait = Some((duration()?, meta.path.span())),
            UNCERTAIN_WAIT => self.uncertain_wait = Some((duration()?, meta.path.span())),
            PERMANENT_ERRORS => self.permanent_errors = Some(meta.value()?.parse()?),
            UNCERTAIN_ERRORS => self.uncertain_errors = Some(meta.value()?.parse()?),
            DESTRUCTIVE => self.destructive = Some(parse_flag(meta)?),
            OPEN_WORLD => self.open_world = Some(parse_flag(meta)?),
            CRATE => self.krate = Some(parse_crate(meta)?),
            _ => return Err(meta.error("unhandled key")),
        }
        Ok(())
    }
}

/// What a key written without its value (`#[write_tool(approval)]`) is
/// told: what to write.
fn needs_value(key: &str) -> String {
    let example = match key {
        APPROVAL => {
            return "`approval` needs a value: `approval = \"required\"` (a person approves each \
                    operation before it runs), `approval = \"ask\"` (and over MCP the person at \
                    the client is asked), or the path of a function that decides call by call: \
                    `approval = over_limit`"
                .to_owned();
        }
        NAME => "name = \"charge_card\"",
        DESCRIPTION => "description = \"Charge a card once per order.\"",
        LEASE => "lease = \"30s\"",
        TTL => "ttl = \"24h\"",
        MAX_HOLD => "max_hold = \"5m\"",
        MAX_RESULT_BYTES => "max_result_bytes = 65536",
        SCOPE => "scope = \"global\"",
        KEY | CHECK | IGNORE | HIDE => {
            return format!("`{key}` needs its fields: `{key} = [order_id]`");
        }
        VERSION => "version = 2",
        ON_IN_FLIGHT => "on_in_flight = \"wait(5s)\"",
        ON_STORE_ERROR => "on_store_error = \"fail_closed\"",
        ON_UNCERTAIN => "on_uncertain = \"refuse\"",
        VERIFY => "verify = charge_went_through",
        APPROVAL_WINDOW => "approval_window = \"30m\"",
        APPROVAL_WAIT => "approval_wait = \"10m\"",
        UNCERTAIN_WAIT => "uncertain_wait = \"10m\"",
        PERMANENT_ERRORS => "permanent_errors = is_declined",
        UNCERTAIN_ERRORS => "uncertain_errors = is_timeout",
        CRATE => "crate = \"my_idem\"",
        _ => return format!("`{key}` needs a value: `{key} = ..`"),
    };
    format!("`{key}` needs a value: `{example}`")
}

fn parse_description(meta: &ParseNestedMeta<'_>) -> syn::Result<TokenStream> {
    let value: syn::Expr = meta.value()?.parse()?;
    match &value {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(lit),
            ..
        }) if lit.value().trim().is_empty() => Err(syn::Error::new_spanned(
            lit,
            "the description is empty: say what the tool does and when to call it",
        )),
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(_),
            ..
        })
        | syn::Expr::Macro(_) => Ok(value.to_token_stream()),
        other => Err(syn::Error::new_spanned(
            other,
            "`description` is a string literal, or a macro that gives one (`concat!`, `include_str!`)",
        )),
    }
}

/// `crate = "my_idem"`: a path, in a string as serde takes it.
fn parse_crate(meta: &ParseNestedMeta<'_>) -> syn::Result<syn::Path> {
    let lit: LitStr = meta.value()?.parse()?;
    lit.parse::<syn::Path>().map_err(|_| {
        syn::Error::new(
            lit.span(),
            "`crate` takes the path idem is known by in this crate, in a string: `crate = \"my_idem\"`",
        )
    })
}

fn parse_max_result_bytes(meta: &ParseNestedMeta<'_>) -> syn::Result<usize> {
    let lit: syn::Lit = meta.value()?.parse()?;
    let bytes = match &lit {
        syn::Lit::Int(int) => int
            .base10_parse::<usize>()
            .ok()
            .filter(|b| *b >= idem_rules::MIN_RESULT_BYTES),
        _ => None,
    };
    bytes.ok_or_else(|| {
        syn::Error::new_spanned(
            &lit,
            format!(
                "`max_result_bytes` is a whole number of bytes, at least {} (room for an error message), e.g. `max_result_bytes = 65536`",
                idem_rules::MIN_RESULT_BYTES
            ),
        )
    })
}

/// What `approval = ..` says.
pub(crate) enum ApprovalAttr {
    /// A name: `"never"`, `"required"` or `"ask"`, and where it was written.
    Named(Approval, Span),
    /// A path to the function that decides, call by call.
    Decided(syn::Expr),
}

/// `approval = "never" | "required" | "ask"`, or `approval = path`.
fn parse_approval(meta: &ParseNestedMeta<'_>) -> syn::Result<ApprovalAttr> {
    let value: syn::Expr = meta.value()?.parse()?;
    match &value {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(lit),
            ..
        }) => Approval::parse(&lit.value())
            .map(|approval| ApprovalAttr::Named(approval, lit.span()))
            .map_err(|e| match lit.parse::<syn::Path>() {
                // Maybe a function's path in quotes, as serde writes
                // `default = "path"`.
                Ok(path) => {
                    let path = path.to_token_stream().to_string().replace(' ', "");
                    syn::Error::new_spanned(
                        lit,
                        format!(
                            "{e}; if `{path}` is a function that decides, write its path \
                             without quotes: `approval = {path}`"
                        ),
                    )
                }
                Err(_) => syn::Error::new_spanned(lit, e),
            }),
        syn::Expr::Path(_) => Ok(ApprovalAttr::Decided(value)),
        other => Err(syn::Error::new_spanned(
            other,
            "`approval` is \"never\", \"required\", \"ask\", or the path of a function of the tool's \
             parameters (each by reference) that says whether this call needs a person's \
             approval: `approval = over_limit`",
        )),
    }
}

/// `on_uncertain = "rerun" | "refuse"`; `verify` is a key of its own.
fn parse_on_uncertain(meta: &ParseNestedMeta<'_>) -> syn::Result<OnUncertain> {
    let lit: LitStr = meta.value()?.parse()?;
    OnUncertain::parse(&lit.value()).map_err(|e| {
        syn::Error::new_spanned(
            &lit,
            format!("{e}; to ask the downstream first, write `{VERIFY} = path::to::fn` instead"),
        )
    })
}

/// A string read by `parse`, one of idem's named settings; its error is
/// spanned at the string.
fn parse_named<T>(
    meta: &ParseNestedMeta<'_>,
    parse: impl FnOnce(&str) -> Result<T, SettingError<'_>>,
) -> syn::Result<T> {
    let lit: LitStr = meta.value()?.parse()?;
    parse(&lit.value()).map_err(|e| syn::Error::new_spanned(&lit, e))
}

/// `key = [a, b.c]` (or `check`, `ignore`): the fields, or paths into
/// nested objects, and the span of the brackets. An empty list is left to
/// the role rules to report.
fn parse_field_list(meta: &ParseNestedMeta<'_>) -> syn::Result<FieldList> {
    let input = meta.value()?;
    let content;
    let brackets = syn::bracketed!(content in input);
    let fields: Punctuated<KeyPath, Token![,]> =
        content.parse_terminated(parse_key_path, Token![,])?;
    Ok(FieldList {
        span: brackets.span.join(),
        fields: fields.into_iter().collect(),
    })
}

/// `order_id`, or `order.id` for a field of a nested object. A tuple
/// index or a list index is refused saying what a path can name.
fn parse_key_path(input: syn::parse::ParseStream<'_>) -> syn::Result<KeyPath> {
    if input.peek(syn::Lit) {
        let lit: syn::Lit = input.parse()?;
        return Err(syn::Error::new_spanned(
            lit,
            "a field path names fields by name: write the parameter's name (`order_id`), or a field of a nested object (`order.id`)",
        ));
    }
    let mut segments = vec![Ident::parse_any_ident(input)?];
    loop {
        if input.peek(syn::token::Bracket) {
            let index: proc_macro2::TokenTree = input.parse()?;
            return Err(syn::Error::new_spanned(
                index,
                format!(
                    "a field path cannot index into a list: a role applies to the whole of `{}` or to none of it",
                    KeyPath { segments }.dotted()
                ),
            ));
        }
        if !input.peek(Token![.]) {
            return Ok(KeyPath { segments });
        }
        let _: Token![.] = input.parse()?;
        if input.peek(syn::LitInt) || input.peek(syn::LitFloat) {
            let index: syn::Lit = input.parse()?;
            let whole = KeyPath { segments }.dotted();
            return Err(syn::Error::new_spanned(
                index,
                format!(
                    "a field path names fields, and a tuple's elements have no names: key on the tuple whole (`{whole}`), or make it a struct with named fields and name one (`{whole}.start`)"
                ),
            ));
        }
        segments.push(Ident::parse_any_ident(input)?);
    }
}

fn parse_version(meta: &ParseNestedMeta<'_>) -> syn::Result<u32> {
    let lit: LitInt = meta.value()?.parse()?;
    lit.base10_parse::<u32>().map_err(|_| {
        syn::Error::new_spanned(&lit, "`version` is a whole number from 0 to 4294967295")
    })
}

/// `Ident::parse_any` so that `key = [type]` works for raw-named fields.
trait ParseAnyIdent {
    fn parse_any_ident(input: syn::parse::ParseStream<'_>) -> syn::Result<Ident>;
}

impl ParseAnyIdent for Ident {
    fn parse_any_ident(input: syn::parse::ParseStream<'_>) -> syn::Result<Ident> {
        use syn::ext::IdentExt;
        Ident::parse_any(input)
    }
}

fn unknown_key_message(kind: Kind, what: &str) -> String {
    let keys = kind.keys();
    let list = keys
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let suggestion = what.trim_matches('`').to_owned();
    let close = keys
        .iter()
        .filter(|k| edit_distance(k, &suggestion) <= 2)
        .min_by_key(|k| edit_distance(k, &suggestion));
    match close {
        Some(k) => format!(
            "unknown key {what} in `#[{}]`: did you mean `{k}`? The keys are {list}",
            kind.attr_name()
        ),
        None => format!(
            "unknown key {what} in `#[{}]`: the keys are {list}",
            kind.attr_name()
        ),
    }
}

/// Consumes a key's value after an error, so parsing can go on.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        let value = meta.value()?;
        if value.peek(syn::token::Bracket) {
            let content;
            syn::bracketed!(content in value);
            let _: TokenStream = content.parse()?;
        } else {
            let _: syn::Expr = value.parse()?;
        }
    } else if meta.input.peek(syn::token::Paren) {
        let _ = meta.parse_nested_meta(|m| skip_value(&m));
    }
    Ok(())
}

/// `lease = "30s"`: a duration literal, named `key` in errors.
fn parse_duration(key: &str, meta: &ParseNestedMeta<'_>) -> syn::Result<Duration> {
    match meta.value()?.parse()? {
        syn::Lit::Str(lit) => {
            idem_rules::parse_duration(&lit.value()).map_err(|e| syn::Error::new_spanned(&lit, e))
        }
        syn::Lit::Int(int) => Err(syn::Error::new_spanned(
            &int,
            format!(
                "write durations as a string with a unit: `{key} = \"{}s\"` for seconds, or ms, m, h, d",
                int.base10_digits()
            ),
        )),
        other => Err(syn::Error::new_spanned(
            other,
            format!(
                "`{key}` is a duration: write it as a string with a unit, e.g. `{key} = \"30s\"`"
            ),
        )),
    }
}

/// `destructive` alone means `destructive = true`.
fn parse_flag(meta: &ParseNestedMeta<'_>) -> syn::Result<LitBool> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse()
    } else {
        Ok(LitBool::new(true, meta.path.span()))
    }
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}
