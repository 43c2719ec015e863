//! Field-selector attributes: kube's per-kind `GetAttrs` / `ToSelectableFields`.
//!
//! Which labels a request may use is the catalog's `field_selectors` (kube's field-label
//! conversion functions); this module says what each label's value is for one stored object,
//! formatted the way kube formats it (Go's zero values for absent fields: "" for strings,
//! "false" for booleans, "0" for counts).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::catalog::ResourceSpec;

/// The field set a field selector matches against: always metadata.name and
/// metadata.namespace (namespaced kinds), plus the kind's own fields (pods: spec.nodeName,
/// spec.restartPolicy, spec.schedulerName, spec.serviceAccountName, spec.hostNetwork,
/// status.phase, status.podIP, status.podIPs, status.nominatedNodeName; events: involvedObject.*,
/// reason, reportingComponent, source, type; secrets: type; namespaces: status.phase;
/// nodes: spec.unschedulable; replicasets/replicationcontrollers: status.replicas; jobs:
/// status.successful; certificatesigningrequests: spec.signerName; ... check kube-apiserver
/// for each GA kind, with its exact value formatting, e.g. booleans "true"/"false", empty strings).
///
/// `status.podIPs` is accepted by kube's pod conversion but absent from its field set, so it
/// is absent here too (a selector on it reads ""). `apps/v1` replicasets carry
/// `status.replicas` in their set as kube's GetAttrs does, but kube accepts no such selector
/// label for them, so the catalog does not list it.
pub fn field_set(spec: &ResourceSpec, obj: &Value) -> BTreeMap<String, String> {
    let mut set = BTreeMap::new();
    set.insert("metadata.name".to_owned(), string_at(obj, &["metadata", "name"]));
    if spec.namespaced {
        set.insert("metadata.namespace".to_owned(), string_at(obj, &["metadata", "namespace"]));
    }
    let own: Vec<(&str, String)> = match (spec.group, spec.resource) {
        ("", "pods") => pod_fields(obj),
        ("", "events") => core_event_fields(obj),
        ("events.k8s.io", "events") => events_v1_fields(obj),
        ("", "namespaces") => vec![("status.phase", string_at(obj, &["status", "phase"]))],
        ("", "nodes") => vec![("spec.unschedulable", bool_at(obj, &["spec", "unschedulable"]))],
        ("", "secrets") => vec![("type", string_at(obj, &["type"]))],
        ("", "services") => vec![
            ("spec.clusterIP", string_at(obj, &["spec", "clusterIP"])),
            ("spec.type", string_at(obj, &["spec", "type"])),
        ],
        ("", "replicationcontrollers") | ("apps", "replicasets") => {
            vec![("status.replicas", int_at(obj, &["status", "replicas"]))]
        }
        ("batch", "jobs") => vec![("status.successful", int_at(obj, &["status", "succeeded"]))],
        ("certificates.k8s.io", "certificatesigningrequests" | "clustertrustbundles") => {
            vec![("spec.signerName", string_at(obj, &["spec", "signerName"]))]
        }
        ("certificates.k8s.io", "podcertificaterequests") => vec![
            ("spec.signerName", string_at(obj, &["spec", "signerName"])),
            ("spec.podName", string_at(obj, &["spec", "podName"])),
            ("spec.nodeName", string_at(obj, &["spec", "nodeName"])),
        ],
        _ => Vec::new(),
    };
    set.extend(own.into_iter().map(|(k, v)| (k.to_owned(), v)));
    set
}

fn pod_fields(obj: &Value) -> Vec<(&'static str, String)> {
    let node_name = string_at(obj, &["spec", "nodeName"]);
    // kube reads the first entry of status.podIPs; a v1 object that only has the older
    // singular field converts to the same list.
    let pod_ip = value_at(obj, &["status", "podIPs"])
        .and_then(Value::as_array)
        .and_then(|ips| ips.first())
        .and_then(|ip| ip.get("ip"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| string_at(obj, &["status", "podIP"]));
    vec![
        ("spec.host", node_name.clone()),
        ("spec.nodeName", node_name),
        ("spec.restartPolicy", string_at(obj, &["spec", "restartPolicy"])),
        ("spec.schedulerName", string_at(obj, &["spec", "schedulerName"])),
        ("spec.serviceAccountName", string_at(obj, &["spec", "serviceAccountName"])),
        ("spec.hostNetwork", bool_at(obj, &["spec", "hostNetwork"])),
        ("status.phase", string_at(obj, &["status", "phase"])),
        ("status.podIP", pod_ip),
        ("status.nominatedNodeName", string_at(obj, &["status", "nominatedNodeName"])),
    ]
}

/// Shared by both Event shapes: kube computes these from its internal Event, which core v1
/// names `involvedObject`/`source` and events.k8s.io v1 names `regarding`/`deprecatedSource`.
fn event_fields(obj: &Value, reference: &str, source: &str, reporting: &str) -> Vec<(&'static str, String)> {
    let reporting_controller = string_at(obj, &[reporting]);
    let mut source_component = string_at(obj, &[source, "component"]);
    if source_component.is_empty() {
        source_component = reporting_controller.clone();
    }
    vec![
        ("involvedObject.kind", string_at(obj, &[reference, "kind"])),
        ("involvedObject.namespace", string_at(obj, &[reference, "namespace"])),
        ("involvedObject.name", string_at(obj, &[reference, "name"])),
        ("involvedObject.uid", string_at(obj, &[reference, "uid"])),
        ("involvedObject.apiVersion", string_at(obj, &[reference, "apiVersion"])),
        ("involvedObject.resourceVersion", string_at(obj, &[reference, "resourceVersion"])),
        ("involvedObject.fieldPath", string_at(obj, &[reference, "fieldPath"])),
        ("reason", string_at(obj, &["reason"])),
        ("reportingComponent", reporting_controller),
        ("source", source_component),
        ("type", string_at(obj, &["type"])),
    ]
}

fn core_event_fields(obj: &Value) -> Vec<(&'static str, String)> {
    event_fields(obj, "involvedObject", "source", "reportingComponent")
}

fn events_v1_fields(obj: &Value) -> Vec<(&'static str, String)> {
    event_fields(obj, "regarding", "deprecatedSource", "reportingController")
}

fn value_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, key| v.get(key))
}

/// A string field, "" when absent or not a string (Go's zero value).
fn string_at(obj: &Value, path: &[&str]) -> String {
    value_at(obj, path).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// A boolean field as Go's `strconv.FormatBool` writes it; absent reads as "false".
fn bool_at(obj: &Value, path: &[&str]) -> String {
    value_at(obj, path).and_then(Value::as_bool).unwrap_or(false).to_string()
}

/// An integer field as `strconv.Itoa` writes it; absent reads as "0".
fn int_at(obj: &Value, path: &[&str]) -> String {
    value_at(obj, path).and_then(Value::as_i64).unwrap_or(0).to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::{find, resources};

    fn set(group: &str, resource: &str, obj: Value) -> BTreeMap<String, String> {
        let spec = find(group, "v1", resource).expect("catalog entry");
        field_set(spec, &obj)
    }

    #[test]
    fn pod_fields_with_values() {
        let f = set(
            "",
            "pods",
            json!({
                "metadata": {"name": "web", "namespace": "prod"},
                "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                         "serviceAccountName": "default", "hostNetwork": true},
                "status": {"phase": "Running", "podIP": "10.0.0.9",
                           "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}], "nominatedNodeName": "n2"}
            }),
        );
        assert_eq!(f["metadata.name"], "web");
        assert_eq!(f["metadata.namespace"], "prod");
        assert_eq!(f["spec.nodeName"], "n1");
        assert_eq!(f["spec.host"], "n1");
        assert_eq!(f["spec.restartPolicy"], "Always");
        assert_eq!(f["spec.schedulerName"], "default-scheduler");
        assert_eq!(f["spec.serviceAccountName"], "default");
        assert_eq!(f["spec.hostNetwork"], "true");
        assert_eq!(f["status.phase"], "Running");
        assert_eq!(f["status.podIP"], "10.0.0.1", "first of podIPs wins");
        assert_eq!(f["status.nominatedNodeName"], "n2");
        assert!(!f.contains_key("status.podIPs"));
    }

    #[test]
    fn pod_fields_default_to_go_zero_values() {
        let f = set("", "pods", json!({"metadata": {"name": "p"}, "status": {"podIP": "10.1.1.1"}}));
        assert_eq!(f["spec.nodeName"], "");
        assert_eq!(f["spec.hostNetwork"], "false");
        assert_eq!(f["status.phase"], "");
        assert_eq!(f["metadata.namespace"], "");
        assert_eq!(f["status.podIP"], "10.1.1.1", "singular podIP when podIPs is absent");
    }

    #[test]
    fn core_event_fields() {
        let f = set(
            "",
            "events",
            json!({
                "metadata": {"name": "e1", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "u-1",
                                   "apiVersion": "v1", "resourceVersion": "42", "fieldPath": "spec.containers{c}"},
                "reason": "Scheduled", "type": "Normal", "source": {"component": "kubelet"},
                "reportingComponent": "kubelet-x"
            }),
        );
        assert_eq!(f["involvedObject.kind"], "Pod");
        assert_eq!(f["involvedObject.namespace"], "default");
        assert_eq!(f["involvedObject.name"], "web");
        assert_eq!(f["involvedObject.uid"], "u-1");
        assert_eq!(f["involvedObject.apiVersion"], "v1");
        assert_eq!(f["involvedObject.resourceVersion"], "42");
        assert_eq!(f["involvedObject.fieldPath"], "spec.containers{c}");
        assert_eq!(f["reason"], "Scheduled");
        assert_eq!(f["type"], "Normal");
        assert_eq!(f["source"], "kubelet");
        assert_eq!(f["reportingComponent"], "kubelet-x");
    }

    #[test]
    fn event_source_falls_back_to_reporting_component() {
        let f = set("", "events", json!({"metadata": {"name": "e"}, "reportingComponent": "ctrl"}));
        assert_eq!(f["source"], "ctrl");
        assert_eq!(f["involvedObject.kind"], "");
        let f = set(
            "events.k8s.io",
            "events",
            json!({"metadata": {"name": "e"}, "regarding": {"kind": "Node", "name": "n1"}, "reportingController": "c"}),
        );
        assert_eq!(f["involvedObject.kind"], "Node");
        assert_eq!(f["involvedObject.name"], "n1");
        assert_eq!(f["source"], "c");
        assert_eq!(f["reportingComponent"], "c");
    }

    #[test]
    fn secret_type() {
        let f = set("", "secrets", json!({"metadata": {"name": "s", "namespace": "a"}, "type": "kubernetes.io/tls"}));
        assert_eq!(f["type"], "kubernetes.io/tls");
        assert_eq!(f.len(), 3);
        let f = set("", "secrets", json!({"metadata": {"name": "s", "namespace": "a"}}));
        assert_eq!(f["type"], "");
    }

    #[test]
    fn cluster_scoped_kinds_have_no_namespace_field() {
        let f = set("", "nodes", json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}}));
        assert_eq!(f["spec.unschedulable"], "true");
        assert!(!f.contains_key("metadata.namespace"));
        let f = set("", "nodes", json!({"metadata": {"name": "n1"}}));
        assert_eq!(f["spec.unschedulable"], "false");
        let f = set("", "namespaces", json!({"metadata": {"name": "kube-system"}, "status": {"phase": "Active"}}));
        assert_eq!(f["status.phase"], "Active");
        assert!(!f.contains_key("metadata.namespace"));
    }

    #[test]
    fn counts_and_signer_names() {
        let f = set("", "replicationcontrollers", json!({"metadata": {"name": "rc"}, "status": {"replicas": 3}}));
        assert_eq!(f["status.replicas"], "3");
        let f = set("apps", "replicasets", json!({"metadata": {"name": "rs"}}));
        assert_eq!(f["status.replicas"], "0");
        let f = set("batch", "jobs", json!({"metadata": {"name": "j"}, "status": {"succeeded": 2}}));
        assert_eq!(f["status.successful"], "2");
        let f = set(
            "certificates.k8s.io",
            "certificatesigningrequests",
            json!({"metadata": {"name": "c"}, "spec": {"signerName": "kubernetes.io/kubelet-serving"}}),
        );
        assert_eq!(f["spec.signerName"], "kubernetes.io/kubelet-serving");
        let f = set("", "services", json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "None", "type": "ClusterIP"}}));
        assert_eq!((f["spec.clusterIP"].as_str(), f["spec.type"].as_str()), ("None", "ClusterIP"));
    }

    #[test]
    fn every_selectable_label_has_a_value() {
        let empty = json!({"metadata": {"name": "x"}});
        for spec in resources() {
            let f = field_set(spec, &empty);
            for label in spec.field_selectors {
                if *label == "status.podIPs" {
                    continue;
                }
                assert!(f.contains_key(*label), "{}/{}: {label}", spec.group, spec.resource);
            }
        }
    }
}
