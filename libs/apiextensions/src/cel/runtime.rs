//! Evaluation of compiled rules against custom resources (kube's `schema/cel/validation.go`):
//! every value at a node with rules is checked, transition rules only where an old value
//! correlates, failures become `Cause`s with kube's wording, and one cost budget bounds the
//! whole call.

use std::sync::Arc;

use cel::common::value::Val;
use cel::objects::{Key, Map, OptionalValue};
use cel::{Context, ExecutionError, Value as CelValue};
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::check::Checker;
use super::compile::{variables, CompiledRule};
use super::time;
use super::types::{escape, with_actual_sizes};
use super::Node;
use crate::schema::{AdditionalProperties, Schema};

/// kube's `PerCallLimit`.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// kube's `RuntimeCELCostBudget`.
pub const RUNTIME_CEL_COST_BUDGET: i64 = 10_000_000;

/// JSON to CEL, typed by the schema (integers stay ints, numbers become doubles, declared
/// properties get their escaped names).
pub(crate) fn to_cel(s: Option<&Schema>, v: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match (s.map(|s| s.type_.as_str()), n.as_i64()) {
            (Some("number"), _) | (_, None) => CelValue::Float(n.as_f64().unwrap_or(0.0)),
            (_, Some(i)) => CelValue::Int(i),
        },
        Value::String(x) => match s.map(|s| (s.type_.as_str(), s.format.as_str())) {
            Some(("string", f @ ("duration" | "date" | "date-time"))) => time_value(f, x),
            _ => CelValue::String(Arc::new(x.clone())),
        },
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            CelValue::List(Arc::new(a.iter().map(|x| to_cel(items, x)).collect()))
        }
        Value::Object(m) => {
            let mut out = std::collections::HashMap::new();
            for (k, x) in m {
                let (key, child) = match s.and_then(|s| s.properties.get(k)) {
                    Some(p) => (escape(k).unwrap_or_else(|| k.clone()), Some(p)),
                    None => match s.and_then(|s| s.additional_properties.as_ref()) {
                        Some(AdditionalProperties::Schema(ap)) => (k.clone(), Some(&**ap)),
                        _ => (k.clone(), None),
                    },
                };
                out.insert(Key::String(Arc::new(key)), to_cel(child, x));
            }
            CelValue::Map(Map { map: Arc::new(out) })
        }
    }
}

/// A string of a `duration`, `date` or `date-time` schema as kube converts it; one that does
/// not parse (schema validation refuses it first) is an [`Unparsed`] carrying kube's message
/// (for dates, without Go's trailing `cannot parse ... as ...` detail).
fn time_value(format: &str, x: &str) -> CelValue {
    let parsed = match format {
        "duration" => time::openapi_duration(x).map(|n| CelValue::Duration(chrono::Duration::nanoseconds(n))),
        "date" => time::date(x).map(CelValue::Timestamp),
        _ => time::date_time(x).map(CelValue::Timestamp),
    };
    parsed.unwrap_or_else(|| {
        let message = match format {
            "duration" => format!("Invalid duration {x}: unable to parse {x} as duration"),
            "date" => format!("Invalid date formatted string {x}: parsing time {x:?} as \"2006-01-02\""),
            _ => format!("Invalid date-time formatted string {x}: parsing time {x:?} as \"2006-01-02T15:04:05Z07:00\""),
        };
        CelValue::Opaque(Arc::new(Unparsed(message)))
    })
}

/// kube's error value for a formatted string that does not parse: using it fails the rule with
/// this message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unparsed(String);

impl cel::objects::Opaque for Unparsed {
    fn runtime_type_name(&self) -> &str {
        "kapi.unparsed"
    }
}

/// The message of the first [`Unparsed`] value in `v`.
fn unparsed(v: &CelValue) -> Option<String> {
    match v {
        CelValue::Opaque(o) => o.downcast_ref::<Unparsed>().map(|u| u.0.clone()),
        CelValue::List(l) => l.iter().find_map(unparsed),
        CelValue::Map(m) => m.map.values().find_map(unparsed),
        _ => None,
    }
}

/// kube's field path rendering.
pub(crate) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn invalid_omit(path: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("{path}: Invalid value: {detail}"),
        field: path.into(),
    }
}

/// The state of one validation call.
pub(crate) struct Run {
    pub budget: i64,
    pub causes: Vec<Cause>,
}

fn exec_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        // cel-go's text when `duration(s)` or `timestamp(s)` does not parse
        ExecutionError::FunctionError { function, .. } if function == "duration" || function == "timestamp" => {
            let ty = if function == "duration" { "Duration" } else { "Timestamp" };
            format!("type conversion error from 'string' to 'google.protobuf.{ty}'")
        }
        other => other.to_string(),
    }
}

impl Run {
    fn value_error(&mut self, path: &str, s: &Schema, detail: String) {
        self.causes.push(Cause::invalid(path, &Value::from(s.type_.clone()), &detail));
    }

    /// Evaluates the rules of `node` on `v` (old: the correlated old value; `ratchet`: errors of
    /// rules without oldSelf are dropped because the value is unchanged).
    pub(crate) fn node(&mut self, node: &Node, s: &Schema, path: &str, v: &Value, old: Option<&Value>, ratchet: bool) {
        if v.is_null() || self.budget < 0 {
            return;
        }
        if !node.rules.is_empty() {
            if self.budget <= 0 {
                self.value_error(
                    path,
                    s,
                    "validation failed due to running out of cost budget, no further validation rules will be run"
                        .into(),
                );
                self.budget = -1;
                return;
            }
            self.rules(node, s, path, v, old, ratchet);
            if self.budget < 0 {
                return;
            }
        }
        match v {
            Value::Object(m) => {
                let correlatable = s.x_kubernetes_map_type.as_deref().is_none_or(|t| t == "granular" || t == "atomic");
                let old_map = old.and_then(Value::as_object).filter(|_| correlatable);
                for (k, x) in m {
                    let (cn, cs) = match (node.properties.get(k), s.properties.get(k)) {
                        (Some(cn), Some(cs)) => (cn, cs),
                        _ => match (&node.additional, &s.additional_properties) {
                            (Some(cn), Some(AdditionalProperties::Schema(cs))) if !s.properties.contains_key(k) => {
                                (&**cn, &**cs)
                            }
                            _ => continue,
                        },
                    };
                    let o = old_map.and_then(|om| om.get(k));
                    let r = match o {
                        Some(o) => o == x,
                        None => ratchet,
                    };
                    let p = if s.properties.contains_key(k) { child(path, k) } else { format!("{path}[{k}]") };
                    self.node(cn, cs, &p, x, o, r);
                    if self.budget < 0 {
                        return;
                    }
                }
            }
            Value::Array(a) => {
                let (Some(cn), Some(cs)) = (node.items.as_deref(), s.items.as_deref()) else { return };
                let keys = &s.x_kubernetes_list_map_keys;
                let map_list = s.x_kubernetes_list_type.as_deref() == Some("map") && !keys.is_empty();
                let old_items = old.and_then(Value::as_array);
                for (i, x) in a.iter().enumerate() {
                    let o = if map_list {
                        let key = |y: &Value| keys.iter().map(|k| y.get(k).cloned()).collect::<Vec<_>>();
                        old_items.and_then(|oi| oi.iter().find(|y| key(y) == key(x)))
                    } else {
                        None
                    };
                    let r = match o {
                        Some(o) => o == x,
                        None => ratchet,
                    };
                    self.node(cn, cs, &format!("{path}[{i}]"), x, o, r);
                    if self.budget < 0 {
                        return;
                    }
                }
            }
            _ => {}
        }
    }

    fn rules(&mut self, node: &Node, s: &Schema, path: &str, v: &Value, old: Option<&Value>, ratchet: bool) {
        let Some(env) = super::environment() else { return };
        let Some(decl) = node.decl.as_ref() else { return };
        let self_val = to_cel(Some(s), v);
        let old_val = old.map(|o| to_cel(Some(s), o));
        let actual = with_actual_sizes(decl, v);
        for rule in &node.rules {
            let Some(program) = &rule.program else { continue };
            let optional = rule.spec.optional_old_self.unwrap_or(false);
            if rule.uses_old_self && old.is_none() && !optional {
                continue;
            }
            let mut ctx = Context::with_env(env.clone());
            let bind = |ctx: &mut Context, name: &str, val: CelValue| -> Result<(), ExecutionError> {
                let b: Box<dyn Val> = val.try_into()?;
                ctx.add_variable_as_val(name, b);
                Ok(())
            };
            let mut bound = bind(&mut ctx, "self", self_val.clone());
            if optional {
                let o = match &old_val {
                    Some(o) => OptionalValue::of(o.clone()),
                    None => OptionalValue::none(),
                };
                bound = bound.and(bind(&mut ctx, "oldSelf", CelValue::Opaque(Arc::new(o))));
            } else if let Some(o) = &old_val {
                bound = bound.and(bind(&mut ctx, "oldSelf", o.clone()));
            }
            let rule_text = rule_error_string(rule);
            let cost = Checker::new(variables(&actual, optional)).check(program.expression()).map_or(1, |e| e.cost);
            if cost as i64 > self.budget {
                self.value_error(
                    path,
                    s,
                    "validation failed due to running out of cost budget, no further validation rules will be run"
                        .into(),
                );
                self.budget = -1;
                return;
            }
            if cost > PER_CALL_LIMIT {
                self.value_error(path, s, format!("'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {rule_text}"));
                self.budget = -1;
                return;
            }
            self.budget -= cost as i64;
            let result = bound.and_then(|_| program.execute(&ctx));
            if result.is_err() {
                if let Some(m) = unparsed(&self_val).or_else(|| old_val.as_ref().and_then(unparsed)) {
                    self.value_error(path, s, format!("{m} evaluating rule: {rule_text}"));
                    continue;
                }
            }
            match result {
                Ok(CelValue::Bool(true)) => continue,
                Ok(CelValue::Bool(false)) => {}
                Ok(other) => {
                    self.value_error(
                        path,
                        s,
                        format!("rule did not evaluate to a bool: {other:?} evaluating rule: {rule_text}"),
                    );
                    continue;
                }
                Err(ExecutionError::NoSuchOverload(o)) => {
                    self.value_error(path, s, format!("'no such overload: {o}': call arguments did not match a supported operator, function or macro signature for rule: {rule_text}"));
                    continue;
                }
                Err(e) => {
                    self.value_error(path, s, format!("{} evaluating rule: {rule_text}", exec_error(&e)));
                    continue;
                }
            }
            let fpath = match rule.spec.field_path.trim_start_matches('.') {
                "" => path.to_string(),
                fp => child(path, fp),
            };
            let detail = self.message(rule, &ctx, &actual).unwrap_or_else(|| match rule.spec.message.trim() {
                "" => format!("failed rule: {rule_text}"),
                m => m.to_string(),
            });
            let omit = matches!(s.type_.as_str(), "object" | "array");
            let cause = match rule.spec.reason.as_deref() {
                Some("FieldValueForbidden") => Cause::forbidden(&fpath, &detail),
                Some("FieldValueRequired") => Cause::required(&fpath, &detail),
                Some("FieldValueDuplicate") if omit => Cause {
                    reason: "FieldValueDuplicate".into(),
                    message: format!("{fpath}: Duplicate value"),
                    field: fpath.clone(),
                },
                Some("FieldValueDuplicate") => Cause::duplicate(&fpath, v),
                _ if omit => invalid_omit(&fpath, &detail),
                _ => Cause::invalid(&fpath, v, &detail),
            };
            if rule.uses_old_self || !ratchet {
                self.causes.push(cause);
            }
        }
    }

    /// The message expression's result, `None` to fall back to the message or the rule.
    fn message(&mut self, rule: &CompiledRule, ctx: &Context, actual: &super::types::Decl) -> Option<String> {
        let p = rule.message_program.as_ref()?;
        let optional = rule.spec.optional_old_self.unwrap_or(false);
        let cost = Checker::new(variables(actual, optional)).check(p.expression()).map_or(1, |e| e.cost);
        self.budget -= cost as i64;
        match p.execute(ctx) {
            Ok(CelValue::String(m)) => {
                let m = m.trim();
                (!m.is_empty() && !m.contains('\n') && m.len() <= 5 * 1024).then(|| m.to_string())
            }
            _ => None,
        }
    }
}

/// kube's `ruleErrorString`: the message if any, else the rule, trimmed.
fn rule_error_string(rule: &CompiledRule) -> String {
    match rule.spec.message.trim() {
        "" => rule.spec.rule.trim().to_string(),
        m => m.to_string(),
    }
}
