//! Compilation of one `x-kubernetes-validations` rule (kube's `compileRule`): parse with the
//! shared environment, type-check against the schema node (`self`, `oldSelf`), estimate the
//! worst-case cost, and do the same for `messageExpression`.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::{ParseErrors, Program};
use serde_json::Value;

use super::check::{Checker, Est, TypeError};
use super::time;
use super::types::{Decl, Ty};

/// One rule as written in the schema.
#[derive(Debug, Clone, Default)]
pub struct RuleSpec {
    /// `rule`.
    pub rule: String,
    /// `message`.
    pub message: String,
    /// `messageExpression`.
    pub message_expression: String,
    /// `reason` (None: FieldValueInvalid).
    pub reason: Option<String>,
    /// `fieldPath`.
    pub field_path: String,
    /// `optionalOldSelf` as written (None when absent).
    pub optional_old_self: Option<bool>,
}

impl RuleSpec {
    /// Reads a rule from its JSON form (lenient: wrong types read as absent).
    pub fn from_json(v: &Value) -> RuleSpec {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        RuleSpec {
            rule: s("rule"),
            message: s("message"),
            message_expression: s("messageExpression"),
            reason: v.get("reason").and_then(Value::as_str).map(str::to_string),
            field_path: s("fieldPath"),
            optional_old_self: v.get("optionalOldSelf").and_then(Value::as_bool),
        }
    }
}

/// A compiled rule, shared read-only between requests.
#[derive(Debug)]
pub struct CompiledRule {
    /// The rule as written.
    pub spec: RuleSpec,
    pub(crate) program: Option<Program>,
    pub(crate) message_program: Option<Program>,
    /// Whether the rule refers to `oldSelf` (a transition rule).
    pub uses_old_self: bool,
    /// Estimated worst-case cost of one evaluation.
    pub max_cost: u64,
    /// Estimated worst-case cost of the message expression.
    pub message_max_cost: u64,
    /// kube's compile error detail (`compilation failed: ...`), if any.
    pub error: Option<String>,
    /// The message expression's error detail, if any.
    pub message_error: Option<String>,
}

/// Renders parse errors as cel-go's `Issues.String()`.
pub(crate) fn parse_issues(src: &str, errs: &ParseErrors) -> String {
    let mut out = Vec::new();
    for e in &errs.errors {
        let (line, col) = (e.pos.0.max(1) as usize, e.pos.1.max(0) as usize);
        out.push(issue(src, line, col, &e.msg));
    }
    out.join("\n")
}

fn issue(src: &str, line: usize, col: usize, msg: &str) -> String {
    let text = src.lines().nth(line - 1).unwrap_or("");
    format!("ERROR: <input>:{line}:{}: {msg}\n | {text}\n | {}^", col + 1, ".".repeat(col))
}

pub(crate) fn type_issue(src: &str, p: &Program, e: &TypeError) -> String {
    let off = p.source_info().offset_for(e.id).map_or(0, |(s, _)| s as usize);
    let before = src.get(..off).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count();
    issue(src, line, col, &e.msg)
}

/// The first expression in `e` (itself included, depth first) for which `pred` holds.
pub(crate) fn find<'a>(e: &'a IdedExpr, pred: &mut impl FnMut(&IdedExpr) -> bool) -> Option<&'a IdedExpr> {
    if pred(e) {
        return Some(e);
    }
    let entries = |entries: &'a [cel::common::ast::IdedEntryExpr]| -> Vec<&'a IdedExpr> {
        entries
            .iter()
            .flat_map(|x| match &x.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect()
    };
    let children: Vec<&IdedExpr> = match &e.expr {
        Expr::Select(s) => vec![&s.operand],
        Expr::Call(c) => c.target.as_deref().into_iter().chain(c.args.iter()).collect(),
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => entries(&m.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    };
    children.into_iter().find_map(|c| find(c, pred))
}

/// Whether `e` mentions the identifier `name`.
pub(crate) fn mentions(e: &IdedExpr, name: &str) -> bool {
    find(e, &mut |x| matches!(&x.expr, Expr::Ident(n) if n == name)).is_some()
}

/// cel-go's duration and timestamp literal validators, which kube runs after type checking: a
/// string literal that `duration()` or `timestamp()` would refuse at run time fails compilation.
pub(crate) fn literal_error(e: &IdedExpr) -> Option<TypeError> {
    let bad = find(e, &mut |x| match &x.expr {
        Expr::Call(c) if c.target.is_none() && c.args.len() == 1 => match (&c.args[0].expr, c.func_name.as_str()) {
            (Expr::Literal(LiteralValue::String(s)), "duration") => time::go_duration(s.inner()).is_none(),
            (Expr::Literal(LiteralValue::String(s)), "timestamp") => time::rfc3339(s.inner()).is_none(),
            _ => false,
        },
        _ => false,
    })?;
    let Expr::Call(c) = &bad.expr else { return None };
    Some(TypeError { id: c.args[0].id, msg: format!("invalid {} argument", c.func_name) })
}

/// The variables of a rule at a node typed `decl`.
pub(crate) fn variables(decl: &Decl, optional_old_self: bool) -> Vec<(String, Decl)> {
    let old =
        if optional_old_self { Decl::new(Ty::Optional(Box::new(decl.ty.clone())), decl.max) } else { decl.clone() };
    vec![("self".to_string(), decl.clone()), ("oldSelf".to_string(), old)]
}

fn check(p: &Program, vars: Vec<(String, Decl)>) -> Result<Est, TypeError> {
    let r = Checker::new(vars).check(p.expression())?;
    match literal_error(p.expression()) {
        Some(e) => Err(e),
        None => Ok(r),
    }
}

/// Compiles `spec` for a node typed `decl`.
pub(crate) fn compile_rule(spec: &RuleSpec, decl: &Decl) -> CompiledRule {
    let mut out = CompiledRule {
        spec: spec.clone(),
        program: None,
        message_program: None,
        uses_old_self: false,
        max_cost: 0,
        message_max_cost: 0,
        error: None,
        message_error: None,
    };
    if spec.rule.trim().is_empty() {
        return out;
    }
    let Some(env) = super::environment() else {
        out.error = Some("unexpected compilation error: CEL environment unavailable".into());
        return out;
    };
    let optional = spec.optional_old_self.unwrap_or(false);
    let program = match env.compile(&spec.rule) {
        Ok(p) => p,
        Err(e) => {
            out.error = Some(format!("compilation failed: {}", parse_issues(&spec.rule, &e)));
            return out;
        }
    };
    match check(&program, variables(decl, optional)) {
        Err(e) => {
            out.error = Some(format!("compilation failed: {}", type_issue(&spec.rule, &program, &e)));
            return out;
        }
        Ok(r) if !matches!(r.d.ty, Ty::Bool | Ty::Dyn) => {
            out.error = Some("cel expression must evaluate to a bool".into());
            return out;
        }
        Ok(r) => out.max_cost = r.cost,
    }
    out.uses_old_self = mentions(program.expression(), "oldSelf");
    out.program = Some(program);
    if !spec.message_expression.is_empty() {
        let src = &spec.message_expression;
        match env.compile(src) {
            Err(e) => {
                out.message_error = Some(format!("messageExpression compilation failed: {}", parse_issues(src, &e)))
            }
            Ok(p) => match check(&p, variables(decl, optional)) {
                Err(e) => {
                    out.message_error =
                        Some(format!("messageExpression compilation failed: {}", type_issue(src, &p, &e)))
                }
                Ok(r) if !matches!(r.d.ty, Ty::String | Ty::Dyn) => {
                    out.message_error = Some("messageExpression must evaluate to a string".into())
                }
                Ok(r) => {
                    out.message_max_cost = r.cost;
                    out.message_program = Some(p);
                }
            },
        }
    }
    out
}

/// kube's `getCostErrorMessage`.
pub(crate) fn cost_error_message(name: &str, cost: u64, limit: u64) -> String {
    let f = cost as f64 / limit as f64;
    let factor = if f > 100.0 {
        "more than 100x".to_string()
    } else if f < 1.5 {
        format!("{f:.6}x")
    } else {
        format!("{f:.1}x")
    };
    format!("{name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")
}
