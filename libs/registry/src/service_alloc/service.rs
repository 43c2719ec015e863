//! Reading the allocation-relevant fields of a Service object.

use serde_json::{json, Value};

/// `spec.type`, `ClusterIP` when unset.
pub(super) fn service_type(svc: &Value) -> &str {
    svc.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP")
}

/// `spec.clusterIPs`, or `[spec.clusterIP]` from a client that only knows the older field
/// (kube's conversion fills one from the other).
pub(super) fn cluster_ips(svc: &Value) -> Vec<String> {
    match svc.pointer("/spec/clusterIPs").and_then(Value::as_array) {
        Some(ips) if !ips.is_empty() => ips.iter().map(|v| v.as_str().unwrap_or("").to_owned()).collect(),
        _ => match svc.pointer("/spec/clusterIP").and_then(Value::as_str) {
            Some(ip) if !ip.is_empty() => vec![ip.to_owned()],
            _ => Vec::new(),
        },
    }
}

/// Writes `spec.clusterIPs` and the primary `spec.clusterIP`.
pub(super) fn set_cluster_ips(svc: &mut Value, ips: &[String]) {
    if ips.is_empty() {
        return;
    }
    svc["spec"]["clusterIPs"] = json!(ips);
    svc["spec"]["clusterIP"] = json!(ips[0]);
}

/// `spec.ipFamilies`.
pub(super) fn families(svc: &Value) -> Vec<String> {
    svc.pointer("/spec/ipFamilies")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// `clusterIP: None`.
pub(super) fn is_headless(svc: &Value) -> bool {
    cluster_ips(svc).first().is_some_and(|ip| ip == "None")
}

/// Headless and without a selector: kube lets such a Service list both families even on a
/// single-stack cluster.
pub(super) fn is_headless_selectorless(svc: &Value) -> bool {
    is_headless(svc) && svc.pointer("/spec/selector").and_then(Value::as_object).is_none_or(|m| m.is_empty())
}

/// Whether the type gets node ports at all.
pub(super) fn has_node_ports(svc: &Value) -> bool {
    matches!(service_type(svc), "NodePort" | "LoadBalancer")
}

/// kube's `shouldAllocateNodePorts`: NodePort always, LoadBalancer unless
/// `allocateLoadBalancerNodePorts: false`.
pub(super) fn should_allocate_node_ports(svc: &Value) -> bool {
    match service_type(svc) {
        "NodePort" => true,
        "LoadBalancer" => svc.pointer("/spec/allocateLoadBalancerNodePorts").and_then(Value::as_bool) != Some(false),
        _ => false,
    }
}

/// kube's `NeedsHealthCheck`: a LoadBalancer keeping client addresses (`Local`).
pub(super) fn needs_health_check(svc: &Value) -> bool {
    service_type(svc) == "LoadBalancer" && svc.pointer("/spec/externalTrafficPolicy").and_then(Value::as_str) == Some("Local")
}

/// Every node port the Service holds: its ports' and its health check's.
pub(super) fn held_node_ports(svc: &Value) -> Vec<u16> {
    let mut out: Vec<u16> = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| ports.iter().filter_map(|p| p.get("nodePort").and_then(Value::as_u64)).filter_map(|n| u16::try_from(n).ok()).collect())
        .unwrap_or_default();
    if let Some(hc) = svc.pointer("/spec/healthCheckNodePort").and_then(Value::as_u64).and_then(|n| u16::try_from(n).ok()) {
        out.push(hc);
    }
    out.retain(|p| *p != 0);
    out.sort_unstable();
    out.dedup();
    out
}

/// The namespace and name of a Service.
pub(super) fn service_ref(svc: &Value) -> (String, String) {
    let s = |p: &str| svc.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
    (s("/metadata/namespace"), s("/metadata/name"))
}
