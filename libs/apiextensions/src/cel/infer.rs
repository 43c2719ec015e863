//! Declarations of actual values, for the cost of one evaluation of an admission expression.
//!
//! The cel crate does not track cost while it interprets, so kapi estimates the cost of an
//! evaluation with the checker's model over the values it runs on, as CRD rules do
//! ([`super::types::with_actual_sizes`]). Admission values have no schema (`object` is
//! `dyn`), so their types are read off the values themselves: objects become objects with the
//! fields the expression names (names it selects that a value lacks are `dyn` of size 0, so
//! `has(object.x)` still checks), lists list their merged elements, strings their length.
//! What the expression never names is left out, which keeps the work per evaluation small.

use std::collections::{BTreeMap, BTreeSet};

use cel::common::ast::{operators as op, Expr, IdedExpr, LiteralValue};
use cel::objects::Key;
use cel::Value;

use super::authz;
use super::check::{Est, TypeError};
use super::compile::find;
use super::types::{Decl, Ty};

/// The field names an expression selects or indexes with a string literal: the only fields of
/// an object whose declarations matter to its cost.
pub(crate) fn field_names(e: &IdedExpr) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    find(e, &mut |x| {
        match &x.expr {
            Expr::Select(s) => {
                names.insert(s.field.clone());
            }
            Expr::Call(c) if matches!(c.func_name.as_str(), op::INDEX | op::OPT_INDEX | op::OPT_SELECT) => {
                if let Some(Expr::Literal(LiteralValue::String(s))) = c.args.get(1).map(|a| &a.expr) {
                    names.insert(s.inner().to_string());
                }
            }
            _ => {}
        }
        false
    });
    names
}

/// The declaration of `v` with the fields in `names`.
pub(crate) fn infer(v: &Value, names: &BTreeSet<String>) -> Decl {
    match v {
        Value::Null => Decl::scalar(Ty::Null),
        Value::Bool(_) => Decl::scalar(Ty::Bool),
        Value::Int(_) => Decl::scalar(Ty::Int),
        Value::UInt(_) => Decl::scalar(Ty::Uint),
        Value::Float(_) => Decl::scalar(Ty::Double),
        Value::String(s) => Decl::new(Ty::String, s.chars().count() as u64),
        Value::Bytes(b) => Decl::new(Ty::Bytes, b.len() as u64),
        Value::Duration(_) => Decl::scalar(Ty::Duration),
        Value::Timestamp(_) => Decl::scalar(Ty::Timestamp),
        Value::List(items) => {
            let elem = items.iter().map(|x| infer(x, names)).reduce(merge).unwrap_or_else(|| Decl::new(Ty::Dyn, 0));
            Decl::new(Ty::List(Box::new(elem)), items.len() as u64)
        }
        Value::Map(m) => {
            let mut fields = BTreeMap::new();
            for name in names {
                let d = match m.map.get(&Key::String(name.clone().into())) {
                    Some(x) => infer(x, names),
                    None => Decl::new(Ty::Dyn, 0),
                };
                fields.insert(name.clone(), d);
            }
            Decl::new(Ty::Object(fields), m.map.len() as u64)
        }
        Value::Opaque(o) => match o.runtime_type_name() {
            authz::AUTHORIZER => Decl::scalar(Ty::Opaque(authz::AUTHORIZER)),
            authz::PATH_CHECK => Decl::scalar(Ty::Opaque(authz::PATH_CHECK)),
            authz::GROUP_CHECK => Decl::scalar(Ty::Opaque(authz::GROUP_CHECK)),
            authz::RESOURCE_CHECK => Decl::scalar(Ty::Opaque(authz::RESOURCE_CHECK)),
            authz::DECISION => Decl::scalar(Ty::Opaque(authz::DECISION)),
            _ => Decl::new(Ty::Dyn, 0),
        },
        _ => Decl::new(Ty::Dyn, 0),
    }
}

fn size_of(d: &Decl) -> u64 {
    d.max
}

/// Two values' declarations as one (elements of a list): the larger bounds, the union of
/// fields; values of different types are `dyn` of the larger size.
fn merge(a: Decl, b: Decl) -> Decl {
    let max = size_of(&a).max(size_of(&b));
    let ty = match (a.ty, b.ty) {
        (Ty::Null, t) | (t, Ty::Null) => t,
        (Ty::Object(mut x), Ty::Object(y)) => {
            for (k, d) in y {
                let merged = match x.remove(&k) {
                    Some(old) => merge(old, d),
                    None => d,
                };
                x.insert(k, merged);
            }
            Ty::Object(x)
        }
        (Ty::List(x), Ty::List(y)) => Ty::List(Box::new(merge(*x, *y))),
        (x, y) if x == y => x,
        _ => Ty::Dyn,
    };
    Decl::new(ty, max)
}

/// The checker extension of cost estimates over inferred declarations: what the compile-time
/// signatures type as unbounded (an object indexed by a string, optional field access,
/// `value()` and `orValue()`) keeps the bounds of the values at hand.
pub(crate) fn estimate(id: u64, f: &str, member: bool, a: &[&Est]) -> Option<Result<Est, TypeError>> {
    if let Some(r) = super::expression::functions(id, f, member, a) {
        return Some(r);
    }
    let fields_merged = |d: &Decl| match &d.ty {
        Ty::Object(fields) => fields.values().cloned().reduce(merge),
        _ => None,
    };
    let est = |d: Decl| Some(Ok(Est { d, cost: 1 }));
    match (f, a) {
        (op::INDEX, [x, _]) => est(fields_merged(&x.d)?),
        (op::OPT_INDEX | op::OPT_SELECT, [x, _]) => {
            let d = fields_merged(&x.d)?;
            est(Decl::new(Ty::Optional(Box::new(d.ty)), d.max))
        }
        ("value", [x]) if member => match &x.d.ty {
            Ty::Optional(t) => est(Decl::new((**t).clone(), x.d.max)),
            _ => None,
        },
        ("orValue", [x, y]) if member => match &x.d.ty {
            Ty::Optional(t) => {
                let ty = if **t == y.d.ty { y.d.ty.clone() } else { Ty::Dyn };
                est(Decl::new(ty, x.d.max.max(y.d.max)))
            }
            _ => None,
        },
        _ => None,
    }
}
