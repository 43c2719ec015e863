//! `metadata` as kube's typed `ObjectMeta` writes it back.
//!
//! kube decodes every written object's `metadata` into `metav1.ObjectMeta` (built-in kinds
//! through their typed structs, custom resources through the apiextensions server's
//! `objectmeta.Coerce`, which round-trips `metadata` through the same struct), so fields Go
//! serializes with `omitempty` vanish when empty: `labels: {}` or `finalizers: []` are neither
//! stored nor answered. Clients depend on it: a client-side `kubectl apply` compares the
//! answered object with its last-applied configuration.

use serde_json::Value;

/// ObjectMeta's `omitempty` fields, kept only when they hold something.
const OMIT_EMPTY: [&str; 11] = [
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Drops the fields of [`OMIT_EMPTY`] that are null, `""`, `0`, `{}` or `[]` from the
/// object's `metadata`, as kube's decode and encode through `ObjectMeta` drops them.
pub fn omit_empty_meta(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|key, value| !(OMIT_EMPTY.contains(&key.as_str()) && is_empty(value)));
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Bool(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_omitempty_fields_are_dropped_and_others_kept() {
        let mut obj = json!({"kind": "ConfigMap", "metadata": {
            "name": "a", "generateName": "", "namespace": "", "labels": {}, "annotations": null,
            "finalizers": [], "ownerReferences": [], "managedFields": [], "generation": 0,
            "deletionGracePeriodSeconds": 0, "creationTimestamp": null
        }, "data": {}});
        omit_empty_meta(&mut obj);
        assert_eq!(
            obj,
            json!({"kind": "ConfigMap", "metadata": {
                "name": "a", "deletionGracePeriodSeconds": 0, "creationTimestamp": null
            }, "data": {}})
        );
    }

    #[test]
    fn fields_with_content_are_kept() {
        let meta = json!({"name": "a", "labels": {"k": ""}, "finalizers": ["f"], "generation": 2});
        let mut obj = json!({"metadata": meta.clone()});
        omit_empty_meta(&mut obj);
        assert_eq!(obj["metadata"], meta);
    }
}
