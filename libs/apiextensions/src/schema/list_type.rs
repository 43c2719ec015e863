//! `x-kubernetes-list-type: set|map` invariants (kube's `schema/listtype`): no two items of a
//! set are equal, no two items of a map list share their keys.
//!
//! Server-side apply merges such lists item by item, so a duplicate would make the merge
//! ambiguous; kube rejects it on write with `Duplicate value` errors that name the second
//! occurrence and, for maps, the key.

use kapi_apimachinery::Cause;
use serde_json::{Map, Value};

use super::gofmt::{self, BadValue};
use super::node::Schema;
use crate::gofmt::{go_json, go_num, GoNum};

fn child(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// Validates every set and map list under `obj` (an object) following `s`.
pub(crate) fn validate_object(
    path: &str,
    s: &Schema,
    obj: &Map<String, Value>,
    out: &mut Vec<Cause>,
) {
    let mut keys: Vec<&String> = obj.keys().collect();
    keys.sort();
    if let Some(ap) = s.additional_properties_schema() {
        for k in &keys {
            if let Some(v) = obj.get(*k) {
                validate_value(&format!("{path}[{k}]"), ap, v, out);
            }
        }
    }
    for k in &keys {
        if let (Some(sub), Some(v)) = (s.properties.get(*k), obj.get(*k)) {
            validate_value(&child(path, k), sub, v, out);
        }
    }
}

fn validate_value(path: &str, s: &Schema, v: &Value, out: &mut Vec<Cause>) {
    match v {
        Value::Array(items) => validate_array(path, s, items, out),
        Value::Object(obj) => validate_object(path, s, obj, out),
        _ => {}
    }
}

fn validate_array(path: &str, s: &Schema, items: &[Value], out: &mut Vec<Cause>) {
    match s.x_kubernetes_list_type.as_deref() {
        Some("set") => {
            for i in non_unique(items.iter().map(identity).collect()) {
                out.push(gofmt::duplicate(
                    &format!("{path}[{i}]"),
                    &BadValue::of(&items[i]),
                ));
            }
        }
        Some("map") => validate_map_list(path, s, items, out),
        _ => {}
    }
    if let Some(item_schema) = &s.items {
        for (i, item) in items.iter().enumerate() {
            validate_value(&format!("{path}[{i}]"), item_schema, item, out);
        }
    }
}

/// Identity of an item as Go compares it: scalars by type and value, compounds by JSON.
fn identity(v: &Value) -> String {
    match v {
        Value::Number(n) => match go_num(n) {
            GoNum::Int(i) => format!("i:{i}"),
            GoNum::Float(f) => format!("f:{}", f.to_bits()),
        },
        Value::Object(_) | Value::Array(_) => format!("c:{}", go_json(v)),
        other => format!("s:{}", go_json(other)),
    }
}

/// Indices of the second occurrence of each repeated item (kube reports only that one).
fn non_unique(ids: Vec<String>) -> Vec<usize> {
    if ids.len() <= 1 {
        return Vec::new();
    }
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, id) in ids.into_iter().enumerate() {
        let count = seen.entry(id).or_insert(0);
        *count += 1;
        if *count == 2 {
            out.push(i);
        }
    }
    out
}

fn validate_map_list(path: &str, s: &Schema, items: &[Value], out: &mut Vec<Cause>) {
    for (i, x) in items.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            out.push(gofmt::invalid(
                &format!("{path}[{i}]"),
                &BadValue::of(x),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    let key_of = |x: &Value| -> Value {
        let mut key = Map::new();
        if let Some(obj) = x.as_object() {
            for k in &s.x_kubernetes_list_map_keys {
                if let Some(v) = obj.get(k) {
                    key.insert(k.clone(), v.clone());
                }
            }
        }
        Value::Object(key)
    };
    if s.x_kubernetes_list_map_keys.len() == 1 {
        // One key: compared as the key's value, "unspecified" when absent.
        let field = &s.x_kubernetes_list_map_keys[0];
        let ids: Vec<String> = items
            .iter()
            .map(|x| {
                x.as_object()
                    .and_then(|o| o.get(field))
                    .map_or_else(|| "unspecified".to_string(), identity)
            })
            .collect();
        for i in non_unique(ids) {
            out.push(gofmt::duplicate(
                &format!("{path}[{i}]"),
                &BadValue::Json(key_of(&items[i])),
            ));
        }
        return;
    }
    let keys: Vec<Value> = items.iter().map(key_of).collect();
    for i in non_unique(keys.iter().map(identity).collect()) {
        out.push(gofmt::duplicate(
            &format!("{path}[{i}]"),
            &BadValue::Json(keys[i].clone()),
        ));
    }
}
