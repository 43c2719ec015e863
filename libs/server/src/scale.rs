//! The `autoscaling/v1` Scale of built-in scalable kinds (`deployments/scale`,
//! `replicationcontrollers/scale`, ...): replicas from `spec.replicas` and `status.replicas`,
//! the selector from `spec.selector`.

use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::ApiError;
use serde_json::{json, Map, Value};

fn scale_selector(obj: &Value, kind: &str) -> String {
    let sel = obj.pointer("/spec/selector").cloned().unwrap_or(Value::Null);
    if kind == "ReplicationController" {
        return sel
            .as_object()
            .map(|m| {
                let mut pairs: Vec<String> =
                    m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
                pairs.sort();
                pairs.join(",")
            })
            .unwrap_or_default();
    }
    LabelSelector::from_json(&sel).map(|s| s.to_string()).unwrap_or_default()
}

/// The `autoscaling/v1` Scale of a built-in scalable object.
pub fn scale_of(obj: &Value, kind: &str) -> Value {
    scale(obj, "/spec/replicas", "/status/replicas", scale_selector(obj, kind))
}

/// Writes a Scale's `spec.replicas` into a built-in parent.
pub fn apply_scale(parent: &Value, scale: &Value) -> Result<Value, ApiError> {
    apply_replicas(parent, scale, "/spec/replicas")
}

/// The `autoscaling/v1` Scale of an object whose replicas are at the JSON pointers
/// `spec_replicas` and `status_replicas` (absent counts as 0, as kube reads them).
pub fn scale(obj: &Value, spec_replicas: &str, status_replicas: &str, selector: String) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut scale_meta = Map::new();
    for field in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = meta.get(field) {
            scale_meta.insert(field.into(), v.clone());
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": obj.pointer(spec_replicas).cloned().unwrap_or(Value::from(0))},
        "status": {
            "replicas": obj.pointer(status_replicas).cloned().unwrap_or(Value::from(0)),
            "selector": selector,
        },
    })
}

/// Writes a Scale's `spec.replicas` into its parent at the JSON pointer `spec_replicas`
/// (creating the objects on the way), with the Scale's resourceVersion (if any) as
/// precondition.
pub fn apply_replicas(parent: &Value, scale: &Value, spec_replicas: &str) -> Result<Value, ApiError> {
    let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(Value::from(0));
    if !replicas.as_i64().is_some_and(|r| r >= 0 && r <= i64::from(i32::MAX)) {
        let name = parent.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            name,
            vec![kapi_apimachinery::Cause::invalid("spec.replicas", &replicas, "must be greater than or equal to 0")],
        ));
    }
    let mut new = parent.clone();
    let mut slot = &mut new;
    for segment in spec_replicas.split('/').skip(1) {
        if !slot.is_object() {
            *slot = json!({});
        }
        slot = &mut slot[segment];
    }
    *slot = replicas;
    match scale.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(rv) => new["metadata"]["resourceVersion"] = Value::String(rv.to_owned()),
        None => {
            if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
        }
    }
    Ok(new)
}

