//! PATCH bodies: JSON patch, merge patch and strategic merge patch, each applied to a
//! document (the input's first part when it is JSON, else a Deployment).

use kapi_apimachinery::patch::{apply_json_patch, apply_merge_patch};
use kapi_apimachinery::strategic_merge::{apply_strategic_merge_patch, NoSchema};
use kapi_openapi::patch_schema;
use serde_json::{Map, Value};

use crate::{default_document, gvk_of, split_pair};

/// The document part of a two-part input.
fn document(data: &[u8]) -> (Value, &[u8]) {
    let (doc, patch) = split_pair(data);
    let doc = serde_json::from_slice(doc).ok().filter(Value::is_object).unwrap_or_else(default_document);
    (doc, patch)
}

/// An `application/json-patch+json` body. Asserts: refusals are kube's 400, 413 or 422; a
/// patch of `test` operations only changes nothing; after a patch whose last operation adds
/// or replaces a value, that value is at its path.
pub fn json_patch(data: &[u8]) {
    let (doc, patch) = document(data);
    let out = match apply_json_patch(&doc, patch) {
        Ok(out) => out,
        Err(e) => {
            assert!(matches!(e.code, 400 | 413 | 422), "{}: {}", e.code, e.message);
            return;
        }
    };
    let Ok(Value::Array(ops)) = serde_json::from_slice::<Value>(patch) else {
        panic!("a patch that applied is not a JSON array");
    };
    if ops.iter().all(|op| op.get("op").and_then(Value::as_str) == Some("test")) {
        assert_eq!(out, doc, "test operations changed the document");
    }
    let Some(last) = ops.last() else { return };
    let (Some(op), Some(path), Some(value)) =
        (last.get("op").and_then(Value::as_str), last.get("path").and_then(Value::as_str), last.get("value"))
    else {
        return;
    };
    if !matches!(op, "add" | "replace") {
        return;
    }
    let found = match path.strip_suffix("/-") {
        Some(list) => out.pointer(list).and_then(Value::as_array).and_then(|a| a.last()),
        None => out.pointer(path),
    };
    assert_eq!(found, Some(value), "after {op} at {path:?} the value is not there");
}

/// RFC 7386, as its text defines it: the reference the patch engine is held against.
fn merge_reference(target: &Value, patch: &Value) -> Value {
    let Value::Object(members) = patch else { return patch.clone() };
    let mut out = match target {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    for (k, v) in members {
        if v.is_null() {
            out.remove(k);
        } else {
            let merged = merge_reference(out.get(k).unwrap_or(&Value::Null), v);
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

/// An `application/merge-patch+json` body. Asserts: an object patch gives RFC 7386's result
/// and applying it twice changes nothing more; refusals are 400.
pub fn merge_patch(data: &[u8]) {
    let (doc, patch) = document(data);
    let out = match apply_merge_patch(&doc, patch) {
        Ok(out) => out,
        Err(e) => {
            assert_eq!(e.code, 400, "{}", e.message);
            return;
        }
    };
    let Ok(parsed) = serde_json::from_slice::<Value>(patch) else { panic!("a patch that applied does not parse") };
    if parsed.is_object() {
        assert_eq!(out, merge_reference(&doc, &parsed), "merge patch differs from RFC 7386");
        let twice = apply_merge_patch(&out, patch).expect("the patch applied once");
        assert_eq!(twice, out, "merge patch is not idempotent");
    }
}

/// Whether a member name is one of strategic merge patch's directives (other `$` names are
/// ordinary fields to it, as to kube).
fn is_directive(key: &str) -> bool {
    key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder/") || key.starts_with("$deleteFromPrimitiveList/")
}

/// Whether any object member at any depth is a patch directive.
fn has_directive(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, x)| is_directive(k) || has_directive(x)),
        Value::Array(a) => a.iter().any(has_directive),
        _ => false,
    }
}

/// Whether a directive sits in the maps of `v`, outside lists: directives in maps are always
/// interpreted, while a list the schema replaces (or does not know) is kept as sent, as kube
/// keeps it.
fn has_map_directive(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, x)| is_directive(k) || has_map_directive(x)),
        _ => false,
    }
}

/// An `application/strategic-merge-patch+json` body, merged with the schema of the document's
/// kind (built-in kinds) or with none. Asserts: refusals are 400 or 422; no directive survives
/// in the result's maps; without a schema and without directives, the result is the merge patch's.
pub fn strategic_merge_patch(data: &[u8]) {
    let (doc, patch) = document(data);
    let schema = gvk_of(&doc).and_then(|(g, v, k)| patch_schema(g, v, k));
    let result = match &schema {
        Some(schema) => apply_strategic_merge_patch(&doc, patch, schema),
        None => apply_strategic_merge_patch(&doc, patch, &NoSchema),
    };
    let out = match result {
        Ok(out) => out,
        Err(e) => {
            assert!(matches!(e.code, 400 | 422), "{}: {}", e.code, e.message);
            return;
        }
    };
    if !has_directive(&doc) {
        assert!(!has_map_directive(&out), "a directive reached the result: {out}");
    }
    let Ok(parsed) = serde_json::from_slice::<Value>(patch) else { panic!("a patch that applied does not parse") };
    if !has_directive(&parsed) {
        let untyped = apply_strategic_merge_patch(&doc, patch, &NoSchema).expect("the patch applied with a schema");
        if let Ok(merged) = apply_merge_patch(&doc, patch) {
            assert_eq!(untyped, merged, "schema-less strategic merge differs from merge patch");
        }
    }
}
