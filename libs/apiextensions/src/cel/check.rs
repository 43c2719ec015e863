//! A type checker and cost estimator over the cel crate's AST (the crate only parses and
//! interprets): kube refuses rules that do not type-check (unknown fields, undeclared names,
//! operators on the wrong types, a non-bool result) and rules whose worst-case cost, computed
//! from the schema's size bounds, exceeds the budget. The cost model follows cel-go's
//! `checker/cost.go` and kube's `library/cost.go` in shape: 1 per call, strings traversed at
//! 0.1 per character, regexes at 0.25 per pattern character, comprehensions multiplied by the
//! size of their range.

use std::collections::HashMap;

use cel::common::ast::{operators as op, CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

use super::library;
use super::types::{Decl, Ty, MAX_REQUEST_SIZE_BYTES};

/// A typed expression with its size bound and worst-case cost.
#[derive(Debug, Clone)]
pub(crate) struct Est {
    pub d: Decl,
    pub cost: u64,
}

/// A type error at an expression: its id (for the source position) and cel-go's message.
#[derive(Debug)]
pub(crate) struct TypeError {
    pub id: u64,
    pub msg: String,
}

/// `ceil(size * factor)`.
pub(crate) fn factor(size: u64, f: f64) -> u64 {
    (size as f64 * f).ceil() as u64
}

fn est(ty: Ty, max: u64, cost: u64) -> Est {
    Est { d: Decl::new(ty, max), cost }
}

/// Functions an embedding adds to the environment (the authorizer library of admission
/// expressions), consulted before the built-in ones: `None` for a call it does not declare.
/// Arguments are the receiver first for member calls.
pub(crate) type Extension = fn(u64, &str, bool, &[&Est]) -> Option<Result<Est, TypeError>>;

/// The checker: variables in scope (`self`, `oldSelf`, comprehension variables).
pub(crate) struct Checker {
    scopes: Vec<HashMap<String, Decl>>,
    extension: Option<Extension>,
}

fn is_num(t: &Ty) -> bool {
    matches!(t, Ty::Int | Ty::Uint | Ty::Double)
}

fn is_time(t: &Ty) -> bool {
    matches!(t, Ty::Duration | Ty::Timestamp)
}

fn known(t: &Ty) -> bool {
    !matches!(t, Ty::Dyn)
}

fn same_kind(a: &Ty, b: &Ty) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn overload_err(id: u64, f: &str, args: &[&Est]) -> TypeError {
    let names: Vec<String> = args.iter().map(|a| a.d.ty.name()).collect();
    TypeError { id, msg: format!("found no matching overload for '{f}' applied to '({})'", names.join(", ")) }
}

impl Checker {
    pub(crate) fn new(vars: Vec<(String, Decl)>) -> Self {
        Checker { scopes: vec![vars.into_iter().collect()], extension: None }
    }

    /// The same checker with `extension`'s functions declared.
    pub(crate) fn with_extension(mut self, extension: Extension) -> Self {
        self.extension = Some(extension);
        self
    }

    fn lookup(&self, name: &str) -> Option<&Decl> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    /// Types and costs `e`.
    pub(crate) fn check(&mut self, e: &IdedExpr) -> Result<Est, TypeError> {
        match &e.expr {
            Expr::Unspecified => Ok(est(Ty::Dyn, 0, 0)),
            Expr::Literal(l) => Ok(match l {
                LiteralValue::Boolean(_) => est(Ty::Bool, 0, 0),
                LiteralValue::Int(_) => est(Ty::Int, 0, 0),
                LiteralValue::UInt(_) => est(Ty::Uint, 0, 0),
                LiteralValue::Double(_) => est(Ty::Double, 0, 0),
                LiteralValue::Null => est(Ty::Null, 0, 0),
                LiteralValue::String(s) => est(Ty::String, s.inner().chars().count() as u64, 0),
                LiteralValue::Bytes(b) => est(Ty::Bytes, b.inner().len() as u64, 0),
            }),
            Expr::Ident(name) => match self.lookup(name) {
                Some(d) => Ok(Est { d: d.clone(), cost: 1 }),
                None if library::is_type_name(name) => Ok(est(Ty::Type, 0, 1)),
                None => Err(TypeError { id: e.id, msg: format!("undeclared reference to '{name}' (in container '')") }),
            },
            Expr::Select(s) => {
                // a qualified function or type name such as `optional.none` is not a select
                let operand = self.check(&s.operand)?;
                let field = match &operand.d.ty {
                    Ty::Object(fields) => match fields.get(&s.field) {
                        Some(d) => d.clone(),
                        None => return Err(TypeError { id: e.id, msg: format!("undefined field '{}'", s.field) }),
                    },
                    Ty::Map(v) => (**v).clone(),
                    Ty::Dyn => Decl::dyn_(),
                    Ty::Optional(_) => Decl::dyn_(),
                    t => {
                        return Err(TypeError {
                            id: e.id,
                            msg: format!("type '{}' does not support field selection", t.name()),
                        })
                    }
                };
                let ty = if s.test { Decl::scalar(Ty::Bool) } else { field };
                Ok(Est { d: ty, cost: operand.cost + 1 })
            }
            Expr::List(l) => {
                let mut cost = 10;
                let mut elem: Option<Decl> = None;
                for x in &l.elements {
                    let r = self.check(x)?;
                    cost += r.cost;
                    elem = Some(match elem {
                        None => r.d,
                        Some(p) if same_kind(&p.ty, &r.d.ty) => Decl { max: p.max.max(r.d.max), ..p },
                        Some(_) => Decl::dyn_(),
                    });
                }
                let elem = elem.unwrap_or_else(|| Decl::new(Ty::Dyn, 0));
                Ok(est(Ty::List(Box::new(elem)), l.elements.len() as u64, cost))
            }
            Expr::Map(m) => {
                let mut cost = 30;
                let mut val: Option<Decl> = None;
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        cost += self.check(&me.key)?.cost;
                        let v = self.check(&me.value)?;
                        cost += v.cost;
                        val = Some(match val {
                            None => v.d,
                            Some(p) if same_kind(&p.ty, &v.d.ty) => p,
                            Some(_) => Decl::dyn_(),
                        });
                    }
                }
                let val = val.unwrap_or_else(|| Decl::new(Ty::Dyn, 0));
                Ok(est(Ty::Map(Box::new(val)), m.entries.len() as u64, cost))
            }
            Expr::Struct(_) => Ok(est(Ty::Dyn, 0, 40)),
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range)?;
                let init = self.check(&c.accu_init)?;
                let (v1, v2) = match &range.d.ty {
                    Ty::List(el) => match &c.iter_var2 {
                        Some(_) => (Decl::scalar(Ty::Int), (**el).clone()),
                        None => ((**el).clone(), Decl::dyn_()),
                    },
                    Ty::Map(v) => (Decl::new(Ty::String, MAX_REQUEST_SIZE_BYTES), (**v).clone()),
                    Ty::Object(_) | Ty::Dyn => (Decl::dyn_(), Decl::dyn_()),
                    t => {
                        return Err(TypeError {
                            id: c.iter_range.id,
                            msg: format!("expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)", t.name()),
                        })
                    }
                };
                let mut scope = HashMap::new();
                scope.insert(c.iter_var.clone(), v1);
                if let Some(v) = &c.iter_var2 {
                    scope.insert(v.clone(), v2);
                }
                scope.insert(c.accu_var.clone(), init.d.clone());
                self.scopes.push(scope);
                let cond = self.check(&c.loop_cond);
                let step = self.check(&c.loop_step);
                let (cond, step) = match (cond, step) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(x), _) | (_, Err(x)) => {
                        self.scopes.pop();
                        return Err(x);
                    }
                };
                // the accumulator takes the step's type (e.g. `[] + [x]` is a list of x)
                if let Some(s) = self.scopes.last_mut() {
                    let mut acc = step.d.clone();
                    if let Ty::List(_) = acc.ty {
                        acc.max = range.d.max;
                    }
                    s.insert(c.accu_var.clone(), acc);
                }
                let result = self.check(&c.result);
                self.scopes.pop();
                let mut result = result?;
                if let Ty::List(_) = result.d.ty {
                    result.d.max = range.d.max;
                }
                let loop_cost = cond.cost.saturating_add(step.cost);
                let cost = range
                    .cost
                    .saturating_add(init.cost)
                    .saturating_add(result.cost)
                    .saturating_add(range.d.max.saturating_mul(loop_cost));
                Ok(Est { d: result.d, cost })
            }
            Expr::Call(call) => self.call(e.id, call),
        }
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> Result<Est, TypeError> {
        let f = call.func_name.as_str();
        // qualified global functions (`optional.none()`, `format.dns1123Label()`) parse as
        // member calls on an identifier that is not a variable
        if let Some(t) = &call.target {
            if let Expr::Ident(ns) = &t.expr {
                if self.lookup(ns).is_none() && library::is_namespace(ns) {
                    let args = self.args(&call.args)?;
                    let full = format!("{ns}.{f}");
                    let refs: Vec<&Est> = args.iter().collect();
                    return library::global(id, &full, &refs);
                }
            }
        }
        match f {
            op::LOGICAL_AND | op::LOGICAL_OR => {
                let a = self.check(&call.args[0])?;
                let b = self.check(&call.args[1])?;
                for x in [&a, &b] {
                    if known(&x.d.ty) && x.d.ty != Ty::Bool {
                        return Err(overload_err(id, f, &[&a, &b]));
                    }
                }
                Ok(est(Ty::Bool, 0, a.cost.saturating_add(b.cost)))
            }
            op::CONDITIONAL => {
                let c = self.check(&call.args[0])?;
                let t = self.check(&call.args[1])?;
                let e = self.check(&call.args[2])?;
                let d = if t.d.ty == e.d.ty { Decl { max: t.d.max.max(e.d.max), ..t.d } } else { Decl::dyn_() };
                Ok(Est { d, cost: c.cost.saturating_add(t.cost.max(e.cost)) })
            }
            op::NOT_STRICTLY_FALSE => self.check(&call.args[0]),
            _ => {
                let target = match &call.target {
                    Some(t) => Some(self.check(t)?),
                    None => None,
                };
                let args = self.args(&call.args)?;
                let mut refs: Vec<&Est> = Vec::new();
                if let Some(t) = &target {
                    refs.push(t);
                }
                refs.extend(args.iter());
                let base: u64 = refs.iter().map(|a| a.cost).fold(0u64, |x, y| x.saturating_add(y));
                let extended = self.extension.and_then(|x| x(id, f, target.is_some(), &refs));
                let mut r = extended
                    .or_else(|| self.operator(id, f, &refs))
                    .unwrap_or_else(|| library::function(id, f, target.is_some(), &refs))?;
                r.cost = r.cost.saturating_add(base);
                Ok(r)
            }
        }
    }

    fn args(&mut self, args: &[IdedExpr]) -> Result<Vec<Est>, TypeError> {
        args.iter().map(|a| self.check(a)).collect()
    }

    /// The operators: `None` when `f` is not one.
    fn operator(&self, id: u64, f: &str, a: &[&Est]) -> Option<Result<Est, TypeError>> {
        // A call without arguments (`cii()`) is no operator; it must not index one.
        let first = &a.first()?.d;
        let bin = a.len() == 2;
        let (x, y) = (first, a.get(1).map(|e| &e.d).unwrap_or(first));
        let dynamic = !known(&x.ty) || !known(&y.ty);
        let r = match f {
            op::EQUALS | op::NOT_EQUALS if bin => {
                let cost = match (&x.ty, &y.ty) {
                    (Ty::String | Ty::Bytes, _) | (_, Ty::String | Ty::Bytes) => factor(x.max.min(y.max), 0.1) + 1,
                    (Ty::List(_) | Ty::Map(_) | Ty::Object(_), _) => x.max.min(y.max).saturating_add(1),
                    _ => 1,
                };
                Ok(est(Ty::Bool, 0, cost))
            }
            op::LESS | op::LESS_EQUALS | op::GREATER | op::GREATER_EQUALS if bin => {
                let ok = dynamic
                    || (is_num(&x.ty) && is_num(&y.ty))
                    || (x.ty == y.ty && matches!(x.ty, Ty::String | Ty::Bytes | Ty::Bool))
                    || (x.ty == y.ty && is_time(&x.ty));
                if !ok {
                    return Some(Err(overload_err(id, f, a)));
                }
                // cel-go traverses strings and bytes; other comparisons are O(1)
                let cost = if is_time(&x.ty) { 1 } else { factor(x.max.min(y.max), 0.1) + 1 };
                Ok(est(Ty::Bool, 0, cost))
            }
            op::ADD if bin => match (&x.ty, &y.ty) {
                (Ty::String, Ty::String) | (Ty::Bytes, Ty::Bytes) => {
                    let n = x.max.saturating_add(y.max);
                    Ok(est(x.ty.clone(), n, factor(n, 0.1) + 1))
                }
                (Ty::List(e), Ty::List(f2)) => {
                    let elem = if matches!(e.ty, Ty::Dyn) && e.max == 0 { f2.clone() } else { e.clone() };
                    let n = x.max.saturating_add(y.max);
                    Ok(est(Ty::List(elem), n, factor(n, 0.1) + 1))
                }
                (t, u) if t == u && is_num(t) => Ok(est(t.clone(), 0, 1)),
                (Ty::Duration, Ty::Duration) => Ok(est(Ty::Duration, 0, 1)),
                (Ty::Timestamp, Ty::Duration) | (Ty::Duration, Ty::Timestamp) => Ok(est(Ty::Timestamp, 0, 1)),
                // with one operand dyn, cel-go types the result by the only overload the other
                // operand leaves (`'a' + dyn` is a string); a mere dyn would fail result checks
                (Ty::String | Ty::Bytes, Ty::Dyn) | (Ty::Dyn, Ty::String | Ty::Bytes) => {
                    let ty = if matches!(x.ty, Ty::Dyn) { y.ty.clone() } else { x.ty.clone() };
                    Ok(est(ty, x.max.saturating_add(y.max), 1))
                }
                (Ty::List(e), Ty::Dyn) | (Ty::Dyn, Ty::List(e)) => {
                    Ok(est(Ty::List(e.clone()), x.max.saturating_add(y.max), 1))
                }
                (t, Ty::Dyn) | (Ty::Dyn, t) if is_num(t) || *t == Ty::Timestamp => Ok(est(t.clone(), 0, 1)),
                _ if dynamic => Ok(Est { d: Decl::dyn_(), cost: 1 }),
                _ => Err(overload_err(id, f, a)),
            },
            op::SUBSTRACT if bin && (is_time(&x.ty) || is_time(&y.ty)) => match (&x.ty, &y.ty) {
                (Ty::Duration, Ty::Duration) | (Ty::Timestamp, Ty::Timestamp) => Ok(est(Ty::Duration, 0, 1)),
                (Ty::Timestamp, Ty::Duration) => Ok(est(Ty::Timestamp, 0, 1)),
                (Ty::Duration, Ty::Dyn) | (Ty::Dyn, Ty::Timestamp) => Ok(est(Ty::Duration, 0, 1)),
                _ if dynamic => Ok(Est { d: Decl::dyn_(), cost: 1 }),
                _ => Err(overload_err(id, f, a)),
            },
            op::SUBSTRACT | op::MULTIPLY | op::DIVIDE | op::MODULO if bin => match (&x.ty, &y.ty) {
                (t, u) if t == u && is_num(t) => Ok(est(t.clone(), 0, 1)),
                (t, Ty::Dyn) | (Ty::Dyn, t) if is_num(t) && !(f == op::MODULO && *t == Ty::Double) => {
                    Ok(est(t.clone(), 0, 1))
                }
                _ if dynamic => Ok(Est { d: Decl::dyn_(), cost: 1 }),
                _ => Err(overload_err(id, f, a)),
            },
            op::NEGATE => match &x.ty {
                Ty::Int | Ty::Double | Ty::Dyn => Ok(est(x.ty.clone(), 0, 1)),
                _ => Err(overload_err(id, f, a)),
            },
            op::LOGICAL_NOT => match &x.ty {
                Ty::Bool | Ty::Dyn => Ok(est(Ty::Bool, 0, 1)),
                _ => Err(overload_err(id, f, a)),
            },
            op::INDEX | op::OPT_INDEX if bin => {
                let d = match &x.ty {
                    Ty::List(e) => (**e).clone(),
                    Ty::Map(v) => (**v).clone(),
                    Ty::Dyn | Ty::Object(_) => Decl::dyn_(),
                    _ => return Some(Err(overload_err(id, f, a))),
                };
                let d = if f == op::OPT_INDEX { Decl::new(Ty::Optional(Box::new(d.ty)), d.max) } else { d };
                Ok(Est { d, cost: 1 })
            }
            op::OPT_SELECT if bin => {
                let field = match (&x.ty, &a[1].d.ty) {
                    (Ty::Object(fields), _) => fields.values().next().map(|_| Decl::dyn_()).unwrap_or_else(Decl::dyn_),
                    (Ty::Map(v), _) => (**v).clone(),
                    _ => Decl::dyn_(),
                };
                Ok(est(Ty::Optional(Box::new(field.ty)), field.max, 1))
            }
            op::IN if bin => {
                let cost = match &y.ty {
                    Ty::List(_) => y.max.max(1),
                    _ => 1,
                };
                Ok(est(Ty::Bool, 0, cost))
            }
            _ => return None,
        };
        Some(r)
    }
}
