//! kube's `defaulting.ValidateDefaults`: every `default` must already be pruned (no fields the
//! schema would drop) and must validate against its own schema, because the server writes it
//! into objects without further checks.
//!
//! The value check covers the keywords that decide most real defaults (type, nullable, enum,
//! string lengths and pattern, numeric bounds and multipleOf, item and property counts,
//! required, nested properties/items/additionalProperties), with kube-openapi's messages.
//! Not covered: `format`, the logic junctors, ObjectMeta coercion of embedded resources'
//! metadata defaults, and CEL rules.

use kapi_apimachinery::Cause;
use serde_json::{Map, Value};

use super::schema_walk::{items_schema, or_bool, properties, property};
use super::{get_arr, get_bool, get_some, get_str, invalid, required, too_many, type_invalid, Path};

const META_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// Errors of every default in the structural schema `s` (the resource root).
pub(crate) fn validate_defaults(path: &Path, s: &Value, require_pruned: bool) -> Vec<Cause> {
    let mut errs = Vec::new();
    walk(path, s, true, false, require_pruned, &mut errs);
    errs
}

fn walk(path: &Path, s: &Value, root: bool, inside_meta: bool, require_pruned: bool, errs: &mut Vec<Cause>) {
    // the resource root is validated as an embedded resource
    let embedded = root || get_bool(s, "x-kubernetes-embedded-resource");
    let inside_meta = inside_meta && !embedded;
    if let Some(default) = get_some(s, "default") {
        let dpath = path.child("default");
        if !inside_meta && require_pruned {
            let mut pruned = default.clone();
            prune(&mut pruned, Some(s), embedded);
            if &pruned != default {
                errs.push(invalid(&dpath, default, "must not have unknown fields"));
            }
        }
        let mut value_errs = Vec::new();
        check_value(default, Some(s), "", &dpath, &mut value_errs);
        errs.extend(value_errs);
    }
    if let Some(item) = items_schema(s) {
        walk(&path.child("items"), item, false, inside_meta, require_pruned, errs);
    }
    for (k, p) in properties(s) {
        let sub_meta = inside_meta || (embedded && META_FIELDS.contains(&k.as_str()));
        walk(&path.child("properties").key(k), p, false, sub_meta, require_pruned, errs);
    }
}

/// kube's `pruning.Prune` of a value against a structural schema.
fn prune(x: &mut Value, s: Option<&Value>, root: bool) {
    if let Some(sv) = s.filter(|sv| get_bool(sv, "x-kubernetes-preserve-unknown-fields")) {
        skip_prune(x, sv, root);
        return;
    }
    match x {
        Value::Object(m) => {
            let Some(s) = s else {
                m.clear();
                return;
            };
            let embedded = root || get_bool(s, "x-kubernetes-embedded-resource");
            let ap = or_bool(s, "additionalProperties");
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let sub = match (property(s, &k), &ap) {
                    (Some(p), _) => Some(p),
                    (None, Some(ap)) => ap.schema(),
                    (None, None) => {
                        m.remove(&k);
                        continue;
                    }
                };
                if let Some(v) = m.get_mut(&k) {
                    prune(v, sub, false);
                }
            }
        }
        Value::Array(a) => {
            let item = s.and_then(items_schema);
            a.iter_mut().for_each(|v| prune(v, item, false));
        }
        _ => {}
    }
}

/// Below `x-kubernetes-preserve-unknown-fields`: unknown fields stay, known ones are pruned.
fn skip_prune(x: &mut Value, s: &Value, root: bool) {
    match x {
        Value::Object(m) => {
            let embedded = root || get_bool(s, "x-kubernetes-embedded-resource");
            let ap = or_bool(s, "additionalProperties");
            for (k, v) in m.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(p) = property(s, k) {
                    prune(v, Some(p), false);
                } else if let Some(ap) = &ap {
                    prune(v, ap.schema(), false);
                }
            }
        }
        Value::Array(a) => {
            if let Some(item) = items_schema(s) {
                a.iter_mut().for_each(|v| skip_prune(v, item, false));
            }
        }
        _ => {}
    }
}

/// kube-openapi's name for a JSON value's type.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `%v` of a float64.
fn go_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

/// kube-openapi's error name joined onto the default's path, as kube's
/// `kubeOpenAPIResultToFieldErrors` does.
fn err_path(dpath: &Path, name: &str) -> Path {
    let name = name.strip_prefix('.').unwrap_or(name);
    if name.is_empty() {
        dpath.clone()
    } else {
        dpath.child(name)
    }
}

fn check_value(v: &Value, s: Option<&Value>, name: &str, dpath: &Path, errs: &mut Vec<Cause>) {
    let Some(s) = s else {
        return;
    };
    let ep = err_path(dpath, name);
    let ty = get_str(s, "type");
    if v.is_null() {
        if !ty.is_empty() && !get_bool(s, "nullable") {
            let msg = format!("{name} in body must be of type {ty}: \"null\"");
            errs.push(type_invalid(&ep, &Value::from("null"), &msg));
        }
        return;
    }
    let actual = type_name(v);
    let type_ok = match ty {
        "" => true,
        "number" => matches!(actual, "integer" | "number"),
        t => t == actual,
    };
    if !type_ok && !get_bool(s, "x-kubernetes-int-or-string") {
        let msg = format!("{name} in body must be of type {ty}: {actual:?}");
        errs.push(type_invalid(&ep, &Value::from(actual), &msg));
        return;
    }
    let enum_values = get_arr(s, "enum");
    if !enum_values.is_empty() && !enum_values.contains(v) {
        let supported: Vec<String> =
            enum_values.iter().map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string)).collect();
        let supported: Vec<&str> = supported.iter().map(String::as_str).collect();
        errs.push(Cause::not_supported(ep.as_str(), v, &supported));
    }
    match v {
        Value::String(st) => check_string(st, s, name, &ep, errs),
        Value::Number(n) => check_number(n.as_f64().unwrap_or(0.0), v, s, name, &ep, errs),
        Value::Array(a) => {
            let len = a.len() as i64;
            if let Some(max) = get_some(s, "maxItems").and_then(Value::as_i64).filter(|m| len > *m) {
                errs.push(too_many(&ep, a.len(), max as usize));
            }
            if let Some(min) = get_some(s, "minItems").and_then(Value::as_i64).filter(|m| len < *m) {
                errs.push(invalid(&ep, &Value::from(len), &format!("{name} in body should have at least {min} items")));
            }
            let item = items_schema(s);
            for (i, x) in a.iter().enumerate() {
                check_value(x, item, &format!("{name}[{i}]"), dpath, errs);
            }
        }
        Value::Object(m) => check_object(m, s, name, dpath, &ep, errs),
        _ => {}
    }
}

fn check_string(st: &str, s: &Value, name: &str, ep: &Path, errs: &mut Vec<Cause>) {
    let chars = st.chars().count() as i64;
    if let Some(max) = get_some(s, "maxLength").and_then(Value::as_i64).filter(|m| chars > *m) {
        errs.push(Cause::too_long(ep.as_str(), max as usize));
    }
    if let Some(min) = get_some(s, "minLength").and_then(Value::as_i64).filter(|m| chars < *m) {
        errs.push(invalid(ep, &Value::from(st), &format!("{name} in body should be at least {min} chars long")));
    }
    let pattern = get_str(s, "pattern");
    if !pattern.is_empty() {
        if let Ok(re) = regex::Regex::new(pattern) {
            if !re.is_match(st) {
                errs.push(invalid(ep, &Value::from(st), &format!("{name} in body should match '{pattern}'")));
            }
        }
    }
}

fn check_number(f: f64, v: &Value, s: &Value, name: &str, ep: &Path, errs: &mut Vec<Cause>) {
    if let Some(max) = get_some(s, "maximum").and_then(Value::as_f64) {
        if get_bool(s, "exclusiveMaximum") && f >= max {
            errs.push(invalid(ep, v, &format!("{name} in body should be less than {}", go_float(max))));
        } else if f > max {
            errs.push(invalid(ep, v, &format!("{name} in body should be less than or equal to {}", go_float(max))));
        }
    }
    if let Some(min) = get_some(s, "minimum").and_then(Value::as_f64) {
        if get_bool(s, "exclusiveMinimum") && f <= min {
            errs.push(invalid(ep, v, &format!("{name} in body should be greater than {}", go_float(min))));
        } else if f < min {
            errs.push(invalid(ep, v, &format!("{name} in body should be greater than or equal to {}", go_float(min))));
        }
    }
    if let Some(m) = get_some(s, "multipleOf").and_then(Value::as_f64).filter(|m| *m > 0.0) {
        let q = f / m;
        if (q - q.round()).abs() > 1e-9 {
            errs.push(invalid(ep, v, &format!("{name} in body should be a multiple of {}", go_float(m))));
        }
    }
}

fn check_object(m: &Map<String, Value>, s: &Value, name: &str, dpath: &Path, ep: &Path, errs: &mut Vec<Cause>) {
    let n = m.len() as i64;
    if let Some(max) = get_some(s, "maxProperties").and_then(Value::as_i64).filter(|x| n > *x) {
        errs.push(too_many(ep, m.len(), max as usize));
    }
    if let Some(min) = get_some(s, "minProperties").and_then(Value::as_i64).filter(|x| n < *x) {
        errs.push(invalid(ep, &Value::from(n), &format!("{name} in body should have at least {min} properties")));
    }
    for req in get_arr(s, "required").iter().filter_map(Value::as_str) {
        if !m.contains_key(req) {
            errs.push(required(&err_path(dpath, &format!("{name}.{req}")), ""));
        }
    }
    let ap = or_bool(s, "additionalProperties");
    for (k, x) in m {
        let child = if name.is_empty() { k.clone() } else { format!("{name}.{k}") };
        if let Some(p) = property(s, k) {
            check_value(x, Some(p), &child, dpath, errs);
        } else if let Some(aps) = ap.as_ref().and_then(|a| a.schema()) {
            check_value(x, Some(aps), &format!("{name}.{k}"), dpath, errs);
        }
    }
}
