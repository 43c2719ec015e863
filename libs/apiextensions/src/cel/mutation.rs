//! The types of MutatingAdmissionPolicy expressions (kube's `cel/mutation` and JSONPatch
//! library): `Object{spec: Object.spec{replicas: 3}}` builds an apply configuration,
//! `JSONPatch{op: 'add', path: '/x', value: v}` a JSON Patch operation, and
//! `jsonpatch.escapeKey(k)` escapes a key for a patch path.
//!
//! The cel crate builds only registered struct types, and kube's are open-ended (any
//! `Object.<field path>`), so the checked form of a mutation expression calls functions
//! instead: a struct literal becomes `kapi.object('<type>', {fields})` or
//! `kapi.jsonpatch({fields})`, which build opaque [`StructVal`]s; the results are read back
//! as JSON with kube's texts for what does not fit.

use std::sync::Arc;

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr};
use cel::common::types::CelString;
use cel::objects::{Key, Opaque};
use cel::{Context, Value as CelValue};
use serde_json::Value;

use super::check::{Est, TypeError};
use super::types::{Decl, Ty};

const OBJECT_FN: &str = "kapi.object";
const JSONPATCH_FN: &str = "kapi.jsonpatch";
const ESCAPE_KEY: &str = "jsonpatch.escapeKey";
/// Functions standing for a struct literal of a type kube does not declare.
const UNDECLARED: &str = "kapi.undeclared.";

pub(crate) const OBJECT: &str = "Object";
pub(crate) const JSONPATCH: &str = "JSONPatch";

/// A struct value: its type name and fields.
#[derive(Debug, Clone)]
pub(crate) struct StructVal {
    pub name: String,
    pub fields: CelValue,
}

impl PartialEq for StructVal {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.fields == other.fields
    }
}

impl Eq for StructVal {}

impl Opaque for StructVal {
    fn runtime_type_name(&self) -> &str {
        &self.name
    }
}

fn string_literal(id: u64, s: &str) -> IdedExpr {
    IdedExpr { id, expr: Expr::Literal(LiteralValue::String(CelString::from(s.to_owned()))) }
}

fn call(id: u64, name: String, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr { id, expr: Expr::Call(CallExpr { func_name: name, target: None, args }) }
}

/// Rewrites struct literals and `jsonpatch.escapeKey` into calls (see the module doc).
pub(crate) fn rewrite(e: &mut IdedExpr) {
    let entries = |entries: &mut Vec<IdedEntryExpr>| {
        for x in entries {
            match &mut x.expr {
                EntryExpr::MapEntry(me) => {
                    rewrite(&mut me.key);
                    rewrite(&mut me.value);
                }
                EntryExpr::StructField(f) => rewrite(&mut f.value),
            }
        }
    };
    match &mut e.expr {
        Expr::Struct(s) => {
            entries(&mut s.entries);
            let fields: Vec<IdedEntryExpr> = std::mem::take(&mut s.entries)
                .into_iter()
                .map(|x| match x.expr {
                    EntryExpr::StructField(f) => IdedEntryExpr {
                        id: x.id,
                        expr: EntryExpr::MapEntry(MapEntryExpr {
                            key: string_literal(x.id, &f.field),
                            value: f.value,
                            optional: f.optional,
                        }),
                    },
                    other => IdedEntryExpr { id: x.id, expr: other },
                })
                .collect();
            let map = IdedExpr { id: e.id, expr: Expr::Map(MapExpr { entries: fields }) };
            let name = s.type_name.trim_start_matches('.').to_owned();
            e.expr = if name == JSONPATCH {
                call(e.id, JSONPATCH_FN.into(), vec![map]).expr
            } else if name == OBJECT || name.starts_with("Object.") {
                call(e.id, OBJECT_FN.into(), vec![string_literal(e.id, &name), map]).expr
            } else {
                call(e.id, format!("{UNDECLARED}{name}"), vec![map]).expr
            };
        }
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                rewrite(t);
            }
            c.args.iter_mut().for_each(rewrite);
            let escape = c.func_name == "escapeKey"
                && matches!(c.target.as_deref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "jsonpatch");
            if escape {
                c.target = None;
                c.func_name = ESCAPE_KEY.into();
            }
        }
        Expr::Select(s) => rewrite(&mut s.operand),
        Expr::List(l) => l.elements.iter_mut().for_each(rewrite),
        Expr::Map(m) => entries(&mut m.entries),
        Expr::Comprehension(c) => {
            for x in [&mut c.iter_range, &mut c.accu_init, &mut c.loop_cond, &mut c.loop_step, &mut c.result] {
                rewrite(x);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The signatures of the rewritten calls, for the checker.
pub(crate) fn signature(id: u64, f: &str, _member: bool, a: &[&Est]) -> Option<Result<Est, TypeError>> {
    let est = |ty: Ty, max: u64| Some(Ok(Est { d: Decl::new(ty, max), cost: 1 }));
    match f {
        OBJECT_FN => est(Ty::Opaque(OBJECT), a.get(1).map_or(0, |m| m.d.max)),
        JSONPATCH_FN => est(Ty::Opaque(JSONPATCH), 0),
        ESCAPE_KEY => match a {
            [k] if matches!(k.d.ty, Ty::String | Ty::Dyn) => {
                Some(Ok(Est { d: Decl::new(Ty::String, k.d.max.saturating_mul(2)), cost: k.d.max / 10 + 1 }))
            }
            _ => Some(Err(TypeError { id, msg: "found no matching overload for 'jsonpatch.escapeKey'".into() })),
        },
        f => f
            .strip_prefix(UNDECLARED)
            .map(|name| Err(TypeError { id, msg: format!("undeclared reference to '{name}' (in container '')") })),
    }
}

/// Adds the functions the rewritten calls need to an evaluation's context.
pub(crate) fn register(ctx: &mut Context) -> Result<(), cel::DeclarationError> {
    ctx.add_function(OBJECT_FN, |name: Arc<String>, fields: CelValue| -> CelValue {
        CelValue::Opaque(Arc::new(StructVal { name: name.to_string(), fields }))
    })?;
    ctx.add_function(JSONPATCH_FN, |fields: CelValue| -> CelValue {
        CelValue::Opaque(Arc::new(StructVal { name: JSONPATCH.into(), fields }))
    })?;
    ctx.add_function(ESCAPE_KEY, |k: Arc<String>| -> String { k.replace('~', "~0").replace('/', "~1") })?;
    Ok(())
}

fn as_struct(v: &CelValue) -> Option<&StructVal> {
    match v {
        CelValue::Opaque(o) => o.downcast_ref::<StructVal>(),
        _ => None,
    }
}

/// kube's `CheckTypeNamesMatchFieldPathNames`: every nested object's type names its field
/// path from the root (`Object.spec.template`).
pub(crate) fn type_name_errors(v: &CelValue, path: &mut Vec<String>, errors: &mut Vec<String>) {
    if let Some(s) = as_struct(v) {
        let want = path.join(".");
        if s.name != want {
            errors.push(format!(
                "unexpected type name {:?}, expected {want:?}, which matches field name path from root Object type",
                s.name
            ));
        }
        if let CelValue::Map(m) = &s.fields {
            for (k, f) in m.map.iter() {
                if let Key::String(k) = k {
                    path.push(k.to_string());
                    type_name_errors(f, path, errors);
                    path.pop();
                }
            }
        }
        return;
    }
    match v {
        CelValue::List(l) => l.iter().for_each(|x| type_name_errors(x, path, errors)),
        CelValue::Map(m) => m.map.values().for_each(|x| type_name_errors(x, path, errors)),
        _ => {}
    }
}

/// A value as JSON, struct values as objects; None for values JSON cannot hold.
pub(crate) fn to_json(v: &CelValue) -> Option<Value> {
    Some(match v {
        CelValue::Null => Value::Null,
        CelValue::Bool(b) => Value::Bool(*b),
        CelValue::Int(i) => Value::from(*i),
        CelValue::UInt(u) => Value::from(*u),
        CelValue::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        CelValue::String(s) => Value::String(s.to_string()),
        CelValue::List(l) => Value::Array(l.iter().map(to_json).collect::<Option<_>>()?),
        CelValue::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m.map.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                out.insert(key, to_json(v)?);
            }
            Value::Object(out)
        }
        CelValue::Timestamp(t) => Value::String(t.to_rfc3339()),
        CelValue::Opaque(_) => return to_json(&as_struct(v)?.fields),
        _ => return None,
    })
}

/// The JSON Patch operations a JSONPatch expression gave (kube's `jsonPatcher`).
pub(crate) fn json_patches(v: &CelValue) -> Result<Vec<Value>, String> {
    let CelValue::List(items) = v else {
        return Err("type mismatch: JSONPatchType.expression should evaluate to array".into());
    };
    let mut ops = Vec::with_capacity(items.len());
    for item in items.iter() {
        let s = as_struct(item).filter(|s| s.name == JSONPATCH).ok_or_else(|| {
            "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch".to_owned()
        })?;
        let CelValue::Map(fields) = &s.fields else { continue };
        let field = |k: &str| fields.map.get(&Key::String(Arc::new(k.to_owned())));
        let text = |k: &str| match field(k) {
            Some(CelValue::String(s)) => s.to_string(),
            _ => String::new(),
        };
        let mut op = serde_json::Map::new();
        op.insert("op".into(), Value::from(text("op")));
        op.insert("path".into(), Value::from(text("path")));
        if !text("from").is_empty() {
            op.insert("from".into(), Value::from(text("from")));
        }
        if let Some(value) = field("value") {
            if as_struct(value).is_some() {
                let name = as_struct(value).map(|s| s.name.clone()).unwrap_or_default();
                let mut errors = Vec::new();
                type_name_errors(value, &mut vec![name], &mut errors);
                if !errors.is_empty() {
                    return Err(format!("type mismatch: {}", errors.join("\n")));
                }
            }
            let json = to_json(value).ok_or_else(|| {
                "JSONPath valueExpression evaluated to a type that could not marshal to JSON".to_owned()
            })?;
            op.insert("value".into(), json);
        }
        ops.push(Value::Object(op));
    }
    Ok(ops)
}

/// The apply configuration an ApplyConfiguration expression gave (kube's
/// `applyConfigPatcher`).
pub(crate) fn apply_configuration(v: &CelValue, type_name: &str) -> Result<Value, String> {
    let Some(s) = as_struct(v).filter(|s| s.name == OBJECT || s.name.starts_with("Object.")) else {
        return Err(format!("unsupported return type from ApplyConfiguration expression: {type_name}"));
    };
    let mut errors = Vec::new();
    type_name_errors(v, &mut vec![s.name.clone()], &mut errors);
    if !errors.is_empty() {
        return Err(format!("type mismatch: {}", errors.join("\n")));
    }
    to_json(v).ok_or_else(|| format!("invalid return type: {type_name}"))
}
