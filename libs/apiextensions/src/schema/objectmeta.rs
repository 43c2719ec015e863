//! `metadata` of custom resources and of embedded resources (kube's `schema/objectmeta`).
//!
//! kube decodes every `metadata` into a Go `ObjectMeta` and back: unknown fields disappear
//! (and are reported as unknown fields), empty optional ones are dropped, and malformed ones
//! fail decoding. Embedded resources (`x-kubernetes-embedded-resource`) additionally need
//! `apiVersion` and `kind`, and their metadata is validated like an object's.

use kapi_apimachinery::validation::{is_dns1035_label, validate_object_meta, NameRule};
use kapi_apimachinery::Cause;
use serde_json::{Map, Value};

use super::gofmt::{self, BadValue};
use super::node::Schema;
use crate::gofmt::{go_num, go_quote, GoNum};

const STRING_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
];
const INT_FIELDS: &[&str] = &["generation", "deletionGracePeriodSeconds"];
const OBJECT_META_FIELDS: &[&str] = &[
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];
const OWNER_REFERENCE_FIELDS: &[&str] = &[
    "apiVersion",
    "blockOwnerDeletion",
    "controller",
    "kind",
    "name",
    "uid",
];
const MANAGED_FIELDS_FIELDS: &[&str] = &[
    "apiVersion",
    "fieldsType",
    "fieldsV1",
    "manager",
    "operation",
    "subresource",
    "time",
];

fn json_kind(v: &Value) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Number(n) => match go_num(n) {
            GoNum::Int(_) => "number".into(),
            GoNum::Float(f) => format!("number {}", crate::gofmt::go_float_json(f)),
        },
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

fn unmarshal_err(v: &Value, field: &str, go_type: &str) -> String {
    let kind = match v {
        Value::Number(_) if go_type != "int64" => "number".to_string(),
        _ => json_kind(v),
    };
    format!(
        "json: cannot unmarshal {kind} into Go struct field ObjectMeta.{field} of type {go_type}"
    )
}

fn looks_rfc3339(s: &str) -> bool {
    super::formats::validates("date-time", s) && s.len() >= 20
}

/// The error Go's `json.Unmarshal` into `metav1.ObjectMeta` reports, if any (first field in
/// key order, as the decoder reports the first error it saved).
pub(crate) fn type_error(meta: &Value) -> Option<String> {
    let Value::Object(m) = meta else {
        return Some(format!(
            "json: cannot unmarshal {} into Go value of type v1.ObjectMeta",
            json_kind(meta)
        ));
    };
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        let Some(v) = m.get(k) else { continue };
        if v.is_null() {
            continue;
        }
        let k = k.as_str();
        let err = if STRING_FIELDS.contains(&k) {
            (!v.is_string()).then(|| unmarshal_err(v, k, "string"))
        } else if INT_FIELDS.contains(&k) {
            (!matches!(v, Value::Number(n) if matches!(go_num(n), GoNum::Int(_))))
                .then(|| unmarshal_err(v, k, "int64"))
        } else if k == "labels" || k == "annotations" {
            match v {
                Value::Object(entries) => entries
                    .values()
                    .find(|x| !x.is_string() && !x.is_null())
                    .map(|x| unmarshal_err(x, k, "string")),
                other => Some(unmarshal_err(other, k, "map[string]string")),
            }
        } else if k == "finalizers" {
            match v {
                Value::Array(items) => items
                    .iter()
                    .find(|x| !x.is_string() && !x.is_null())
                    .map(|x| unmarshal_err(x, k, "string")),
                other => Some(unmarshal_err(other, k, "[]string")),
            }
        } else if k == "ownerReferences" || k == "managedFields" {
            let ty = if k == "ownerReferences" {
                "[]v1.OwnerReference"
            } else {
                "[]v1.ManagedFieldsEntry"
            };
            (!v.is_array()).then(|| unmarshal_err(v, k, ty))
        } else if k == "creationTimestamp" || k == "deletionTimestamp" {
            match v {
                Value::String(s) if looks_rfc3339(s) => None,
                Value::String(s) => Some(format!(
                    "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as \"2006\"",
                    go_quote(s),
                    go_quote(s)
                )),
                other => Some(format!(
                    "json: cannot unmarshal {} into Go value of type string",
                    json_kind(other)
                )),
            }
        } else {
            None
        };
        if err.is_some() {
            return err;
        }
    }
    None
}

fn prune_list_items(list: &mut Value, known: &[&str], path: &str, unknown: &mut Vec<String>) {
    if let Value::Array(items) = list {
        for (i, item) in items.iter_mut().enumerate() {
            if let Value::Object(obj) = item {
                let mut dropped: Vec<String> = obj
                    .keys()
                    .filter(|k| !known.contains(&k.as_str()))
                    .cloned()
                    .collect();
                dropped.sort();
                obj.retain(|k, _| known.contains(&k.as_str()));
                unknown.extend(dropped.into_iter().map(|k| format!("{path}[{i}].{k}")));
            }
        }
    }
}

fn is_empty_value(k: &str, v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty() && STRING_FIELDS.contains(&k),
        Value::Number(n) => k == "generation" && n.as_i64() == Some(0),
        Value::Object(o) => o.is_empty() && (k == "labels" || k == "annotations"),
        Value::Array(a) => {
            a.is_empty() && matches!(k, "ownerReferences" | "finalizers" | "managedFields")
        }
        Value::Bool(_) => false,
    }
}

/// Round-trips `metadata` through kube's `ObjectMeta`: drops unknown fields (returning their
/// paths, `<prefix>.ownerReferences[0].foo`) and empty optional fields. Malformed metadata
/// is left alone (validation reports it). `keep_null_creation` keeps `creationTimestamp: null`
/// as the root round trip does (embedded metadata drops it).
pub(crate) fn coerce_metadata(
    meta: &mut Value,
    prefix: &str,
    keep_null_creation: bool,
) -> Vec<String> {
    let mut unknown = Vec::new();
    if type_error(meta).is_some() {
        return unknown;
    }
    let Value::Object(m) = meta else {
        return unknown;
    };
    let mut keys: Vec<String> = m.keys().cloned().collect();
    keys.sort();
    for k in keys {
        if !OBJECT_META_FIELDS.contains(&k.as_str()) {
            unknown.push(format!("{prefix}.{k}"));
            m.shift_remove(&k);
            continue;
        }
        match k.as_str() {
            "ownerReferences" => {
                if let Some(v) = m.get_mut(&k) {
                    prune_list_items(
                        v,
                        OWNER_REFERENCE_FIELDS,
                        &format!("{prefix}.{k}"),
                        &mut unknown,
                    );
                }
            }
            "managedFields" => {
                if let Some(v) = m.get_mut(&k) {
                    prune_list_items(
                        v,
                        MANAGED_FIELDS_FIELDS,
                        &format!("{prefix}.{k}"),
                        &mut unknown,
                    );
                }
            }
            _ => {}
        }
    }
    m.retain(|k, v| (keep_null_creation && k == "creationTimestamp") || !is_empty_value(k, v));
    unknown
}

fn child(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// Validates the embedded resources under `x` (kube's `objectmeta.Validate`, not at the root).
pub(crate) fn validate(path: &str, x: &Value, s: Option<&Schema>, out: &mut Vec<Cause>) {
    let Some(s) = s else { return };
    match x {
        Value::Object(obj) => {
            if s.x_kubernetes_embedded_resource {
                validate_embedded(path, obj, out);
            }
            let mut keys: Vec<&String> = obj.keys().collect();
            keys.sort();
            for k in keys {
                let Some(v) = obj.get(k) else { continue };
                if let Some(prop) = s.properties.get(k) {
                    validate(&child(path, k), v, Some(prop), out);
                } else if s.additional_properties.is_some() {
                    validate(
                        &format!("{path}[{k}]"),
                        v,
                        s.additional_properties_schema(),
                        out,
                    );
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                validate(&format!("{path}[{i}]"), v, s.items.as_deref(), out);
            }
        }
        _ => {}
    }
}

fn validate_embedded(path: &str, obj: &Map<String, Value>, out: &mut Vec<Cause>) {
    let api_version_path = child(path, "apiVersion");
    let kind_path = child(path, "kind");
    if !obj.contains_key("apiVersion") {
        out.push(gofmt::required(&api_version_path));
    }
    if !obj.contains_key("kind") {
        out.push(gofmt::required(&kind_path));
    }
    match obj.get("apiVersion") {
        Some(Value::String(v)) if v.is_empty() => out.push(gofmt::invalid(
            &api_version_path,
            &BadValue::Str(String::new()),
            "must not be empty",
        )),
        Some(Value::String(v)) if v != "/" && v.matches('/').count() > 1 => {
            out.push(gofmt::invalid(
                &api_version_path,
                &BadValue::Str(v.clone()),
                &format!("unexpected GroupVersion string: {v}"),
            ))
        }
        Some(Value::String(_)) | None => {}
        Some(other) => out.push(gofmt::invalid(
            &api_version_path,
            &BadValue::of(other),
            "must be a string",
        )),
    }
    match obj.get("kind") {
        Some(Value::String(k)) if k.is_empty() => out.push(gofmt::invalid(
            &kind_path,
            &BadValue::Str(String::new()),
            "must not be empty",
        )),
        Some(Value::String(k)) => {
            let errs = is_dns1035_label(&k.to_lowercase());
            if !errs.is_empty() {
                let detail = format!(
                    "may have mixed case, but should otherwise match: {}",
                    errs.join(",")
                );
                out.push(gofmt::invalid(
                    &kind_path,
                    &BadValue::Str(k.clone()),
                    &detail,
                ));
            }
        }
        None => {}
        Some(other) => out.push(gofmt::invalid(
            &kind_path,
            &BadValue::of(other),
            "must be a string",
        )),
    }
    if let Some(meta) = obj.get("metadata") {
        let meta_path = child(path, "metadata");
        if let Some(err) = type_error(meta) {
            out.push(gofmt::invalid(&meta_path, &BadValue::of(meta), &err));
            return;
        }
        let mut meta = meta.clone();
        if let Value::Object(m) = &mut meta {
            if m.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                m.insert("name".into(), Value::String("fakename".into()));
            }
        }
        let namespaced = meta
            .get("namespace")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        for mut c in validate_object_meta(&meta, namespaced, NameRule::PathSegment) {
            if !path.is_empty() {
                c.message = format!("{path}.{}", c.message);
                c.field = format!("{path}.{}", c.field);
            }
            out.push(c);
        }
    }
}

/// Coerces the metadata of embedded resources under `x` (kube's `objectmeta.Coerce` below the
/// root), returning the unknown metadata fields it dropped.
pub(crate) fn coerce_embedded(
    path: &str,
    x: &mut Value,
    s: Option<&Schema>,
    out: &mut Vec<String>,
) {
    let Some(s) = s else { return };
    match x {
        Value::Object(obj) => {
            if s.x_kubernetes_embedded_resource {
                if let Some(meta) = obj.get_mut("metadata") {
                    out.extend(coerce_metadata(meta, &child(path, "metadata"), false));
                }
            }
            for (k, v) in obj.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    coerce_embedded(&child(path, k), v, Some(prop), out);
                } else if s.additional_properties.is_some() {
                    coerce_embedded(
                        &format!("{path}[{k}]"),
                        v,
                        s.additional_properties_schema(),
                        out,
                    );
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                coerce_embedded(&format!("{path}[{i}]"), v, s.items.as_deref(), out);
            }
        }
        _ => {}
    }
}
