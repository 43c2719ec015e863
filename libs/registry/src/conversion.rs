//! Resources served in a version other than the one they are stored in, converted on the way
//! in and out, as kube-apiserver's versioning codec does:
//!
//! - `autoscaling/v1` HorizontalPodAutoscaler, stored as `autoscaling/v2`: v1 speaks one CPU
//!   utilization target; everything else v2 holds travels in the annotations kube uses
//!   (`autoscaling.alpha.kubernetes.io/metrics`, `current-metrics`, `behavior`, `conditions`),
//!   so v2 -> v1 -> v2 loses nothing.
//! - `events.k8s.io/v1` Event, stored as core `v1` Event: renamed fields
//!   (`note` <-> `message`, `regarding` <-> `involvedObject`, ...).
//!
//! Known difference: kube writes the metric annotations in the old v1 `MetricSpec` layout; kapi
//! writes the v2 layout (lossless, and clients of autoscaling/v1 do not read them).

use serde_json::{json, Map, Value};

use crate::catalog::{self, ResourceSpec};
use kapi_apimachinery::ApiError;

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";

/// events.k8s.io/v1 field <-> core/v1 field.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// The spec of the version `spec`'s objects are stored in; `spec` itself for most resources.
pub fn storage_spec(spec: &'static ResourceSpec) -> &'static ResourceSpec {
    let storage = match (spec.group, spec.version, spec.resource) {
        ("autoscaling", "v1", "horizontalpodautoscalers") => catalog::find("autoscaling", "v2", "horizontalpodautoscalers"),
        ("events.k8s.io", "v1", "events") => catalog::find("", "v1", "events"),
        _ => None,
    };
    storage.unwrap_or(spec)
}

/// Whether objects of `spec` are stored in another version.
pub fn needs_conversion(spec: &'static ResourceSpec) -> bool {
    !std::ptr::eq(storage_spec(spec), spec)
}

/// A request object of `spec`'s version, in the storage version.
pub fn to_storage(spec: &'static ResourceSpec, obj: Value) -> Result<Value, ApiError> {
    let storage = storage_spec(spec);
    let mut obj = match obj {
        Value::Object(map) => map,
        other => return Ok(other),
    };
    match spec.kind {
        "HorizontalPodAutoscaler" if needs_conversion(spec) => hpa_v1_to_v2(&mut obj)?,
        "Event" if needs_conversion(spec) => rename(&mut obj, EVENT_FIELDS.iter().map(|(new, old)| (*new, *old))),
        _ => return Ok(Value::Object(obj)),
    }
    obj.insert("apiVersion".into(), Value::String(storage.api_version()));
    Ok(Value::Object(obj))
}

/// A stored object, in `spec`'s version.
pub fn from_storage(spec: &'static ResourceSpec, obj: Value) -> Result<Value, ApiError> {
    let mut obj = match obj {
        Value::Object(map) if needs_conversion(spec) => map,
        other => return Ok(other),
    };
    match spec.kind {
        "HorizontalPodAutoscaler" => hpa_v2_to_v1(&mut obj)?,
        "Event" => rename(&mut obj, EVENT_FIELDS.iter().map(|(new, old)| (*old, *new))),
        _ => {}
    }
    obj.insert("apiVersion".into(), Value::String(spec.api_version()));
    Ok(Value::Object(obj))
}

fn rename<'a>(obj: &mut Map<String, Value>, pairs: impl Iterator<Item = (&'a str, &'a str)>) {
    for (from, to) in pairs {
        if let Some(v) = obj.remove(from) {
            obj.insert(to.to_owned(), v);
        }
    }
}

fn is_cpu_utilization(metric: &Value) -> Option<i64> {
    if metric.get("type").and_then(Value::as_str) != Some("Resource") {
        return None;
    }
    let resource = metric.get("resource")?;
    if resource.get("name").and_then(Value::as_str) != Some("cpu") {
        return None;
    }
    resource.pointer("/target/averageUtilization").and_then(Value::as_i64)
}

fn annotations(obj: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let Some(meta) = meta.as_object_mut() else { unreachable!("metadata was just made an object") };
    let ann = meta.entry("annotations").or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    let Some(ann) = ann.as_object_mut() else { unreachable!("annotations were just made an object") };
    ann
}

fn put_json_annotation(obj: &mut Map<String, Value>, key: &str, value: &Value) -> Result<(), ApiError> {
    let text = serde_json::to_string(value).map_err(|e| ApiError::internal(format!("encoding {key}: {e}")))?;
    annotations(obj).insert(key.to_owned(), Value::String(text));
    Ok(())
}

fn take_json_annotation(obj: &mut Map<String, Value>, key: &str) -> Result<Option<Value>, ApiError> {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return Ok(None) };
    let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) else { return Ok(None) };
    let Some(text) = ann.remove(key) else { return Ok(None) };
    if ann.is_empty() {
        meta.remove("annotations");
    }
    let text = text.as_str().unwrap_or_default();
    serde_json::from_str(text)
        .map(Some)
        .map_err(|e| ApiError::bad_request(format!("annotation {key} is not valid JSON: {e}")))
}

fn hpa_v2_to_v1(obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    let mut spec = obj.remove("spec").and_then(|s| s.as_object().cloned()).unwrap_or_default();
    let metrics = spec.remove("metrics").and_then(|m| m.as_array().cloned()).unwrap_or_default();
    let mut others = Vec::new();
    for m in metrics {
        match is_cpu_utilization(&m) {
            Some(target) if !spec.contains_key("targetCPUUtilizationPercentage") => {
                spec.insert("targetCPUUtilizationPercentage".into(), Value::from(target));
            }
            _ => others.push(m),
        }
    }
    if !others.is_empty() {
        put_json_annotation(obj, METRICS, &Value::Array(others))?;
    }
    if let Some(behavior) = spec.remove("behavior") {
        put_json_annotation(obj, BEHAVIOR, &behavior)?;
    }
    obj.insert("spec".into(), Value::Object(spec));
    if let Some(mut status) = obj.remove("status").and_then(|s| s.as_object().cloned()) {
        let current = status.remove("currentMetrics").and_then(|m| m.as_array().cloned()).unwrap_or_default();
        let mut others = Vec::new();
        for m in current {
            let cpu = (m.get("type").and_then(Value::as_str) == Some("Resource")
                && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu"))
            .then(|| m.pointer("/resource/current/averageUtilization").and_then(Value::as_i64))
            .flatten();
            match cpu {
                Some(u) if !status.contains_key("currentCPUUtilizationPercentage") => {
                    status.insert("currentCPUUtilizationPercentage".into(), Value::from(u));
                }
                _ => others.push(m),
            }
        }
        if !others.is_empty() {
            put_json_annotation(obj, CURRENT_METRICS, &Value::Array(others))?;
        }
        if let Some(conditions) = status.remove("conditions") {
            if conditions.as_array().is_some_and(|c| !c.is_empty()) {
                put_json_annotation(obj, CONDITIONS, &conditions)?;
            }
        }
        // v1 status requires currentReplicas and desiredReplicas.
        status.entry("currentReplicas").or_insert(Value::from(0));
        status.entry("desiredReplicas").or_insert(Value::from(0));
        obj.insert("status".into(), Value::Object(status));
    }
    Ok(())
}

fn hpa_v1_to_v2(obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    let mut metrics = Vec::new();
    let mut spec = obj.remove("spec").and_then(|s| s.as_object().cloned()).unwrap_or_default();
    if let Some(target) = spec.remove("targetCPUUtilizationPercentage").filter(|v| !v.is_null()) {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}}));
    }
    if let Some(Value::Array(others)) = take_json_annotation(obj, METRICS)? {
        metrics.extend(others);
    }
    if !metrics.is_empty() {
        spec.insert("metrics".into(), Value::Array(metrics));
    }
    if let Some(behavior) = take_json_annotation(obj, BEHAVIOR)? {
        spec.insert("behavior".into(), behavior);
    }
    obj.insert("spec".into(), Value::Object(spec));
    let conditions = take_json_annotation(obj, CONDITIONS)?;
    let current_others = take_json_annotation(obj, CURRENT_METRICS)?;
    if let Some(mut status) = obj.remove("status").and_then(|s| s.as_object().cloned()) {
        let mut current = Vec::new();
        if let Some(u) = status.remove("currentCPUUtilizationPercentage").filter(|v| !v.is_null()) {
            current.push(json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": u}}}));
        }
        if let Some(Value::Array(others)) = current_others {
            current.extend(others);
        }
        if !current.is_empty() {
            status.insert("currentMetrics".into(), Value::Array(current));
        }
        if let Some(conditions) = conditions {
            status.insert("conditions".into(), conditions);
        }
        obj.insert("status".into(), Value::Object(status));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(group: &str, version: &str, resource: &str) -> &'static ResourceSpec {
        catalog::find(group, version, resource).expect("served")
    }

    #[test]
    fn which_resources_convert() {
        assert!(needs_conversion(spec("autoscaling", "v1", "horizontalpodautoscalers")));
        assert!(needs_conversion(spec("events.k8s.io", "v1", "events")));
        assert!(!needs_conversion(spec("autoscaling", "v2", "horizontalpodautoscalers")));
        assert!(!needs_conversion(spec("", "v1", "configmaps")));
        assert_eq!(
            spec("events.k8s.io", "v1", "events").key_prefix(),
            spec("", "v1", "events").key_prefix(),
            "both event APIs read one storage"
        );
    }

    #[test]
    fn hpa_v2_through_v1_is_lossless() {
        let v1 = spec("autoscaling", "v1", "horizontalpodautoscalers");
        let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h", "annotations": {"keep": "me"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 1, "maxReplicas": 5,
                     "metrics": [
                        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                       "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 55}}}],
                       "conditions": [{"type": "AbleToScale", "status": "True"}]}});
        let as_v1 = from_storage(v1, v2.clone()).unwrap();
        assert_eq!(as_v1["apiVersion"], "autoscaling/v1");
        assert_eq!(as_v1["spec"]["targetCPUUtilizationPercentage"], 70);
        assert!(as_v1["spec"].get("metrics").is_none());
        assert_eq!(as_v1["status"]["currentCPUUtilizationPercentage"], 55);
        assert!(as_v1["metadata"]["annotations"][METRICS].as_str().unwrap().contains("memory"));
        assert_eq!(to_storage(v1, as_v1).unwrap(), v2);
    }

    #[test]
    fn hpa_v1_create_becomes_a_cpu_metric() {
        let v1 = spec("autoscaling", "v1", "horizontalpodautoscalers");
        let stored = to_storage(v1, json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}})).unwrap();
        assert_eq!(stored["apiVersion"], "autoscaling/v2");
        assert_eq!(stored["spec"]["metrics"][0]["resource"]["target"], json!({"type": "Utilization", "averageUtilization": 50}));
        assert!(stored["metadata"].get("annotations").is_none());
    }

    #[test]
    fn events_rename_both_ways() {
        let new = spec("events.k8s.io", "v1", "events");
        let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-11-23T05:00:00.000000Z", "reportingController": "kapi/test", "reportingInstance": "i-1",
            "action": "Testing", "reason": "Tested", "type": "Normal", "note": "hello",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}, "deprecatedCount": 2});
        let core = to_storage(new, ev.clone()).unwrap();
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["reportingComponent"], "kapi/test");
        assert_eq!(core["count"], 2);
        assert_eq!(from_storage(new, core).unwrap(), ev);
    }
}
