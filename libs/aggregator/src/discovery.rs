//! What an aggregated server serves, for the merged discovery: its legacy APIResourceList of one
//! group version turned into aggregated discovery (apidiscovery.k8s.io/v2) resources, as kube's
//! discovery manager converts the documents of servers that do not serve v2 themselves.

use serde_json::{json, Map, Value};

/// The v2 resources of an APIResourceList (`/apis/<group>/<version>`): each `a/b` entry becomes
/// subresource `b` of resource `a`; entries without a group or version take the list's.
pub fn resources_from_list(group: &str, version: &str, list: &Value) -> Vec<Value> {
    let entries = list.get("resources").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let text = |e: &Value, key: &str| e.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let response_kind = |e: &Value| {
        let g = e.get("group").and_then(Value::as_str).unwrap_or(group);
        let v = e.get("version").and_then(Value::as_str).unwrap_or(version);
        json!({"group": g, "version": v, "kind": text(e, "kind")})
    };
    let mut resources: Vec<Map<String, Value>> = Vec::new();
    for e in entries.iter().filter(|e| !text(e, "name").contains('/')) {
        let mut r = Map::new();
        r.insert("resource".into(), text(e, "name").into());
        r.insert("responseKind".into(), response_kind(e));
        let namespaced = e.get("namespaced").and_then(Value::as_bool).unwrap_or(false);
        r.insert("scope".into(), (if namespaced { "Namespaced" } else { "Cluster" }).into());
        r.insert("singularResource".into(), text(e, "singularName").into());
        r.insert("verbs".into(), e.get("verbs").cloned().unwrap_or_else(|| json!([])));
        for key in ["shortNames", "categories"] {
            if let Some(v) = e.get(key).filter(|v| v.as_array().is_some_and(|a| !a.is_empty())) {
                r.insert(key.into(), v.clone());
            }
        }
        resources.push(r);
    }
    for e in entries {
        let name = text(e, "name");
        let Some((parent, sub)) = name.split_once('/') else { continue };
        let Some(r) = resources.iter_mut().find(|r| r.get("resource").and_then(Value::as_str) == Some(parent)) else { continue };
        let entry = json!({"subresource": sub, "responseKind": response_kind(e), "verbs": e.get("verbs").cloned().unwrap_or_else(|| json!([]))});
        match r.get_mut("subresources").and_then(Value::as_array_mut) {
            Some(subs) => subs.push(entry),
            None => {
                r.insert("subresources".into(), json!([entry]));
            }
        }
    }
    resources.into_iter().map(Value::Object).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_server_like_lists_become_v2_resources() {
        let list = json!({
            "kind": "APIResourceList", "groupVersion": "metrics.k8s.io/v1beta1",
            "resources": [
                {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]},
                {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"], "shortNames": ["pm"]},
                {"name": "pods/status", "singularName": "", "namespaced": true, "group": "other", "version": "v2", "kind": "Status", "verbs": ["get"]},
            ],
        });
        let resources = resources_from_list("metrics.k8s.io", "v1beta1", &list);
        assert_eq!(
            Value::Array(resources),
            json!([
                {"resource": "nodes", "responseKind": {"group": "metrics.k8s.io", "version": "v1beta1", "kind": "NodeMetrics"},
                 "scope": "Cluster", "singularResource": "", "verbs": ["get", "list"]},
                {"resource": "pods", "responseKind": {"group": "metrics.k8s.io", "version": "v1beta1", "kind": "PodMetrics"},
                 "scope": "Namespaced", "singularResource": "", "verbs": ["get", "list"], "shortNames": ["pm"],
                 "subresources": [{"subresource": "status", "responseKind": {"group": "other", "version": "v2", "kind": "Status"}, "verbs": ["get"]}]},
            ])
        );
        assert!(resources_from_list("g", "v", &json!({"kind": "Status"})).is_empty());
    }
}
