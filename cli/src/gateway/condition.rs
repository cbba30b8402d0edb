//! `approval_when`: a tool's condition for a person's approval, written in
//! CEL (the Common Expression Language: what Kubernetes and Envoy write
//! their policies in) over the call's arguments, by their names, and the
//! call's tenant as `tenant`:
//!
//! ```toml
//! [tools.refund]
//! approval = "required"
//! approval_when = "amount_cents > 10000 || currency != 'EUR'"
//! ```
//!
//! Checked when the gateway starts, against the tool's input schema: a
//! condition that does not parse, names a field the schema does not hold,
//! or compares a field with a literal of another type is refused, naming
//! the tool, the field and where in the condition. At a call, one that
//! cannot be decided (a field the call left out, a value of an unexpected
//! type) is decided the safe way: the operation needs an approval, and the
//! gateway logs why.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};
use serde_json::{Map, Value};

/// The name a condition gives the call's tenant.
const TENANT: &str = "tenant";

/// A tool's `approval_when`, compiled and checked.
pub(crate) struct Condition {
    /// As written, for the log.
    text: String,
    program: cel::Program,
    /// The standard environment, made once.
    env: Arc<cel::Env>,
}

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Condition").field(&self.text).finish()
    }
}

/// Where in a condition, and what is wrong there.
struct Fault {
    /// The node's id, whose place the program's source info holds.
    at: u64,
    why: String,
}

impl Condition {
    /// `text` as CEL, or why it does not parse (the parser's message, with
    /// the line and column). Whether it fits a tool's input is
    /// [`checked`](Self::checked).
    pub(crate) fn parse(text: &str) -> Result<Condition, String> {
        let program = cel::Program::compile(text).map_err(|e| e.to_string())?;
        Ok(Condition {
            text: text.to_owned(),
            program,
            env: Arc::new(cel::Env::stdlib()),
        })
    }

    /// The condition as written.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Whether the condition fits a tool whose input schema is `schema`:
    /// every name it reads is a field of the schema (or `tenant`, which the
    /// schema must then not hold), and every field it compares with a
    /// literal has the literal's type. The error says what, where.
    pub(crate) fn checked(&self, schema: &Value) -> Result<(), String> {
        let none = Map::new();
        let fields = schema.get("properties").and_then(Value::as_object);
        let mut faults = Vec::new();
        Checker {
            fields: fields.unwrap_or(&none),
            bound: Vec::new(),
            faults: &mut faults,
        }
        .walk(self.program.expression());
        match faults.into_iter().next() {
            None => Ok(()),
            Some(fault) => Err(self.placed(&fault)),
        }
    }

    /// `fault`'s message, with where in the condition it is: its line and
    /// column, and the line marked under it.
    fn placed(&self, fault: &Fault) -> String {
        let info = self.program.source_info();
        let offset = info
            .offset_for(fault.at)
            .map_or(0, |(start, _)| start as usize);
        let before: Vec<char> = self.text.chars().take(offset).collect();
        let line = before.iter().filter(|c| **c == '\n').count();
        let column = before.iter().rev().take_while(|c| **c != '\n').count();
        let shown = self.text.lines().nth(line).unwrap_or_default();
        format!(
            "{}:{}: {}\n| {shown}\n| {}^",
            line + 1,
            column + 1,
            fault.why,
            " ".repeat(column)
        )
    }

    /// Whether the call with `arguments` by `tenant` needs an approval, or
    /// why the condition cannot tell.
    pub(crate) fn holds(
        &self,
        arguments: &Map<String, Value>,
        tenant: Option<&str>,
    ) -> Result<bool, String> {
        let mut context = cel::Context::with_env(self.env.clone());
        for (name, value) in arguments {
            context.add_variable_from_value(name.as_str(), cel_value(value));
        }
        let tenant = tenant.map_or(cel::Value::Null, |t| cel::Value::from(t.to_owned()));
        context.add_variable_from_value(TENANT, tenant);
        match self.program.execute(&context) {
            Ok(cel::Value::Bool(holds)) => Ok(holds),
            Ok(other) => Err(format!("it gave {other:?}, not true or false")),
            Err(cel::ExecutionError::UndeclaredReference(name)) => {
                Err(format!("the call gave no `{name}`"))
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// [`holds`](Self::holds), deciding the safe way when it cannot tell:
    /// the operation of `tool` needs an approval, and the log says why.
    pub(crate) fn needs_approval(
        &self,
        tool: &str,
        arguments: &Map<String, Value>,
        tenant: Option<&str>,
    ) -> bool {
        self.holds(arguments, tenant).unwrap_or_else(|why| {
            tracing::warn!(
                tool,
                condition = %self.text,
                "approval_when cannot be decided for this call ({why}): it needs an approval"
            );
            true
        })
    }
}

/// A JSON value as CEL reads it: an integer as `int` (or `uint` past
/// `i64`), any other number as `double`, an object as a map.
fn cel_value(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::from(s.clone()),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(cel_value).collect())),
        Value::Object(object) => {
            let map: HashMap<String, cel::Value> = object
                .iter()
                .map(|(k, v)| (k.clone(), cel_value(v)))
                .collect();
            cel::Value::from(map)
        }
    }
}

/// The kinds of value a schema (or a literal) admits, as a condition
/// compares them: numbers of any JSON type compare with each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Number,
    String,
    Bool,
    Null,
    List,
    Map,
}

impl Kind {
    fn named(json_type: &str) -> Option<Kind> {
        Some(match json_type {
            "integer" | "number" => Kind::Number,
            "string" => Kind::String,
            "boolean" => Kind::Bool,
            "null" => Kind::Null,
            "array" => Kind::List,
            "object" => Kind::Map,
            _ => return None,
        })
    }

    /// How a message names it.
    fn spoken(self) -> &'static str {
        match self {
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Bool => "a boolean",
            Kind::Null => "null",
            Kind::List => "a list",
            Kind::Map => "an object",
        }
    }
}

/// The kinds `schema` admits: its `type` (one or a list), or those of the
/// schemas of its `anyOf` / `oneOf`; empty when it does not say.
fn kinds(schema: &Value) -> Vec<Kind> {
    let mut found = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) => found.extend(Kind::named(t)),
        Some(Value::Array(ts)) => {
            found.extend(ts.iter().filter_map(Value::as_str).filter_map(Kind::named))
        }
        _ => {}
    }
    for any in ["anyOf", "oneOf"] {
        for branch in schema
            .get(any)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            found.extend(kinds(branch));
        }
    }
    found
}

/// The kind of a literal (a negated number is one).
fn literal(expr: &Expr) -> Option<Kind> {
    match expr {
        Expr::Literal(value) => Some(match value {
            LiteralValue::Boolean(_) => Kind::Bool,
            LiteralValue::Bytes(_) => return None,
            LiteralValue::Double(_) | LiteralValue::Int(_) | LiteralValue::UInt(_) => Kind::Number,
            LiteralValue::Null => Kind::Null,
            LiteralValue::String(_) => Kind::String,
        }),
        Expr::Call(call) if call.func_name == operators::NEGATE && call.args.len() == 1 => {
            literal(&call.args[0].expr).filter(|k| *k == Kind::Number)
        }
        _ => None,
    }
}

/// Walks a condition, finding the names the schema does not hold and the
/// comparisons of a field with a literal of another type.
struct Checker<'a> {
    /// The schema's fields, by name.
    fields: &'a Map<String, Value>,
    /// The names a macro binds where the walk is (`x` in `list.all(x, ..)`).
    bound: Vec<String>,
    faults: &'a mut Vec<Fault>,
}

impl Checker<'_> {
    fn walk(&mut self, node: &IdedExpr) {
        match &node.expr {
            Expr::Ident(name) => self.name(node.id, name),
            Expr::Select(select) => self.walk(&select.operand),
            Expr::Call(call) => {
                if let [left, right] = call.args.as_slice() {
                    self.compared(&call.func_name, left, right);
                }
                call.target.iter().for_each(|t| self.walk(t));
                call.args.iter().for_each(|a| self.walk(a));
            }
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range);
                let bound = [Some(&c.iter_var), c.iter_var2.as_ref(), Some(&c.accu_var)];
                let n = self.bound.len();
                self.bound.extend(bound.into_iter().flatten().cloned());
                for part in [&c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                    self.walk(part);
                }
                self.bound.truncate(n);
            }
            Expr::List(list) => list.elements.iter().for_each(|e| self.walk(e)),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(e) = &entry.expr {
                        self.walk(&e.key);
                        self.walk(&e.value);
                    }
                }
            }
            Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => {}
        }
    }

    /// A name read at node `at`: a field, `tenant`, or one a macro binds.
    fn name(&mut self, at: u64, name: &str) {
        if self.bound.iter().any(|b| b == name) {
            return;
        }
        let why = match (self.fields.contains_key(name), name == TENANT) {
            (true, false) => return,
            (false, true) => return,
            (true, true) => {
                "`tenant` is a field of the tool's input, and the condition cannot tell \
                 it from the call's tenant"
                    .to_owned()
            }
            (false, false) => {
                let mut names: Vec<&str> = self.fields.keys().map(String::as_str).collect();
                names.sort_unstable();
                let hint = match super::spelling::closest(name, &names) {
                    Some(near) => format!(" (did you mean `{near}`?)"),
                    None => String::new(),
                };
                format!(
                    "`{name}` is not a field of the tool's input{hint}; its fields are {}, and \
                     the call's tenant is `tenant`",
                    listed(&names)
                )
            }
        };
        self.faults.push(Fault { at, why });
    }

    /// `left` and `right`, the operands of `op`: a field compared with a
    /// literal (either way round), or a field `in` a list of literals,
    /// must admit the literal's kind.
    fn compared(&mut self, op: &str, left: &IdedExpr, right: &IdedExpr) {
        let ordering = [
            operators::GREATER,
            operators::GREATER_EQUALS,
            operators::LESS,
            operators::LESS_EQUALS,
        ];
        let equality = [operators::EQUALS, operators::NOT_EQUALS];
        let (field, literals) = if ordering.contains(&op) || equality.contains(&op) {
            match (self.field(left), self.field(right)) {
                (Some(f), None) => (f, vec![right]),
                (None, Some(f)) => (f, vec![left]),
                _ => return,
            }
        } else if op == operators::IN {
            match (self.field(left), &right.expr) {
                (Some(f), Expr::List(list)) => (f, list.elements.iter().collect()),
                _ => return,
            }
        } else {
            return;
        };
        let (name, admits) = field;
        if admits.is_empty() {
            return;
        }
        for given in literals {
            let Some(kind) = literal(&given.expr) else {
                continue;
            };
            let null_test = kind == Kind::Null && equality.contains(&op);
            if admits.contains(&kind) || null_test {
                continue;
            }
            let schema: Vec<&str> = admits.iter().map(|k| k.spoken()).collect();
            self.faults.push(Fault {
                at: given.id,
                why: format!(
                    "`{name}` is {} in the tool's input schema, and is compared with {}",
                    schema.join(" or "),
                    kind.spoken()
                ),
            });
        }
    }

    /// The field `node` reads, when it is one of the schema's (by its
    /// name): its name and the kinds its schema admits.
    fn field<'n>(&self, node: &'n IdedExpr) -> Option<(&'n str, Vec<Kind>)> {
        match &node.expr {
            Expr::Ident(name) if !self.bound.contains(name) => self
                .fields
                .get(name)
                .map(|schema| (name.as_str(), kinds(schema))),
            _ => None,
        }
    }
}

/// `names` as a message lists them: `a`, `b` and `c`.
fn listed(names: &[&str]) -> String {
    match names {
        [] => "none".to_owned(),
        [one] => format!("`{one}`"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(|n| format!("`{n}`")).collect();
            format!("{} and `{last}`", rest.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "amount_cents": {"type": "integer"},
                "currency": {"type": "string"},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "items": {"type": "array"},
            },
            "required": ["amount_cents", "currency"],
        })
    }

    fn checked(text: &str) -> Result<Condition, String> {
        let condition = Condition::parse(text)?;
        condition.checked(&schema())?;
        Ok(condition)
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn a_condition_decides_by_the_arguments_and_the_tenant() {
        let c = checked("amount_cents > 10000 || currency != 'EUR'").expect("fits");
        let call = |a: Value| c.holds(&args(a), None);
        assert_eq!(
            call(json!({"amount_cents": 500, "currency": "EUR"})),
            Ok(false)
        );
        assert_eq!(
            call(json!({"amount_cents": 20000, "currency": "EUR"})),
            Ok(true)
        );
        assert_eq!(
            call(json!({"amount_cents": 500, "currency": "USD"})),
            Ok(true)
        );
        let c = checked("tenant == 'acme' && amount_cents >= 100.5").expect("fits");
        let a = args(json!({"amount_cents": 200, "currency": "EUR"}));
        assert_eq!(c.holds(&a, Some("acme")), Ok(true));
        assert_eq!(c.holds(&a, Some("other")), Ok(false));
        assert_eq!(c.holds(&a, None), Ok(false), "no tenant is null");
        let c = checked("items.exists(i, i > 3) && currency in ['EUR', 'USD']").expect("fits");
        let a = args(json!({"amount_cents": 1, "currency": "EUR", "items": [1, 5]}));
        assert_eq!(c.holds(&a, None), Ok(true));
    }

    #[test]
    fn a_condition_that_cannot_be_decided_needs_an_approval() {
        let c = checked("note == 'urgent'").expect("fits");
        let a = args(json!({"amount_cents": 1, "currency": "EUR"}));
        assert_eq!(c.holds(&a, None), Err("the call gave no `note`".to_owned()));
        assert!(c.needs_approval("refund", &a, None), "undecided: approval");
        let c = checked("amount_cents").expect("fits");
        assert!(c.holds(&a, None).is_err(), "not a boolean");
        assert!(c.needs_approval("refund", &a, None));
        let c = checked("amount_cents > 5").expect("fits");
        let wrong = args(json!({"amount_cents": "lots", "currency": "EUR"}));
        assert!(
            c.needs_approval("refund", &wrong, None),
            "a value of another type"
        );
    }

    #[test]
    fn a_condition_that_does_not_fit_the_schema_is_refused_where_it_is_wrong() {
        let err = checked("amount_cent > 10000").expect_err("refused");
        assert_eq!(
            err,
            "1:1: `amount_cent` is not a field of the tool's input (did you mean \
             `amount_cents`?); its fields are `amount_cents`, `currency`, `items` and `note`, \
             and the call's tenant is `tenant`\n| amount_cent > 10000\n| ^"
        );
        let err = checked("currency == 'EUR' && amount_cents > '10000'").expect_err("refused");
        assert!(
            err.starts_with(
                "1:37: `amount_cents` is a number in the tool's input schema, and is compared \
                 with a string"
            ),
            "{err}"
        );
        let err = checked("currency in ['EUR', 5]").expect_err("refused");
        assert!(err.starts_with("1:21: `currency` is a string"), "{err}");
        let err = checked("amount_cents > 1 &&\n  note == true").expect_err("refused");
        assert!(err.starts_with("2:11: `note` is a string or null"), "{err}");
        assert!(err.ends_with("|   note == true\n|           ^"), "{err}");
        assert!(checked("note == null").is_ok(), "null tests any field");
        let err = checked("amount_cents >").expect_err("refused");
        assert!(err.contains("Syntax error"), "{err}");
        let with_tenant = json!({"properties": {"tenant": {"type": "string"}}});
        let c = Condition::parse("tenant == 'a'").expect("parses");
        let err = c.checked(&with_tenant).expect_err("refused");
        assert!(
            err.contains("cannot tell it from the call's tenant"),
            "{err}"
        );
    }
}
