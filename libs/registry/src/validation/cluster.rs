//! Validation of the smaller cluster kinds clients write by hand: PodDisruptionBudget,
//! NetworkPolicy selectors, IngressClass, RuntimeClass and PriorityClass (kube's
//! `pkg/apis/{policy,networking,node,scheduling}/validation`).

use kapi_apimachinery::validation::{is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_valid_path_segment_name};
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::workloads::{int_or_percent, percent};
use super::{label_selector, str_at};

const UNHEALTHY_POD_EVICTION_POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];

/// `ValidatePodDisruptionBudgetSpec`. kube renders the whole spec struct with Go's `%#v` in
/// the both-set message; kapi shows the spec as JSON there.
pub(super) fn validate_pdb(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let set = |k: &str| spec.get(k).filter(|v| !v.is_null());
    if set("minAvailable").is_some() && set("maxUnavailable").is_some() {
        causes.push(Cause::invalid(
            "spec",
            spec,
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for key in ["minAvailable", "maxUnavailable"] {
        if let Some(v) = set(key) {
            let field = format!("spec.{key}");
            causes.extend(int_or_percent(v, &field));
            if percent(v).is_some_and(|p| p > 100) {
                causes.push(Cause::invalid(&field, v, "must not be greater than 100%"));
            }
        }
    }
    if let Some(sel) = set("selector") {
        causes.extend(label_selector(sel, "spec.selector", false));
    }
    if let Some(p) = set("unhealthyPodEvictionPolicy") {
        if !p
            .as_str()
            .is_some_and(|s| UNHEALTHY_POD_EVICTION_POLICIES.contains(&s))
        {
            causes.push(Cause::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                p,
                UNHEALTHY_POD_EVICTION_POLICIES,
            ));
        }
    }
    causes
}

/// The pod and namespace selectors of a NetworkPolicy (its ports and CIDRs are not checked).
pub(super) fn validate_network_policy(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(sel) = obj.pointer("/spec/podSelector").filter(|v| !v.is_null()) {
        causes.extend(label_selector(sel, "spec.podSelector", false));
    }
    for dir in ["ingress", "egress"] {
        let peers = if dir == "ingress" { "from" } else { "to" };
        let rules = obj
            .pointer(&format!("/spec/{dir}"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (i, rule) in rules.iter().enumerate() {
            let list = rule
                .get(peers)
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            for (j, peer) in list.iter().enumerate() {
                for key in ["podSelector", "namespaceSelector"] {
                    if let Some(sel) = peer.get(key).filter(|v| !v.is_null()) {
                        causes.extend(label_selector(
                            sel,
                            &format!("spec.{dir}[{i}].{peers}[{j}].{key}"),
                            false,
                        ));
                    }
                }
            }
        }
    }
    causes
}

/// `ValidateIngressClass`: a controller is required, a domain-prefixed path of at most 250
/// characters.
pub(super) fn validate_ingress_class(obj: &Value) -> Vec<Cause> {
    let controller = str_at(obj, "/spec/controller");
    if controller.is_empty() {
        return vec![Cause::required("spec.controller", "")];
    }
    if controller.len() > 250 {
        return vec![Cause::too_long("spec.controller", 250)];
    }
    match controller.split_once('/') {
        Some((domain, _)) if !domain.is_empty() => Vec::new(),
        _ => vec![Cause::invalid(
            "spec.controller",
            &Value::from(controller),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )],
    }
}

/// `ValidateRuntimeClass`: the handler is a DNS-1123 label.
pub(super) fn validate_runtime_class(obj: &Value) -> Vec<Cause> {
    let handler = str_at(obj, "/handler");
    is_dns1123_label(handler)
        .iter()
        .map(|m| Cause::invalid("handler", &Value::from(handler), m))
        .collect()
}

/// `ValidatePriorityClass`: user classes stay at or below 1000000000 (higher values are
/// reserved for the `system-` classes).
pub(super) fn validate_priority_class(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = str_at(obj, "/metadata/name");
    if let Some(v) = obj.get("value").and_then(Value::as_i64) {
        if v > 1_000_000_000 && !name.starts_with("system-") {
            causes.push(Cause::forbidden(
                "value",
                "maximum allowed value of a user defined priority is 1000000000",
            ));
        }
    }
    if let Some(p) = obj.get("preemptionPolicy").filter(|v| !v.is_null()) {
        if !matches!(p.as_str(), Some("Never" | "PreemptLowerPriority")) {
            causes.push(Cause::not_supported(
                "preemptionPolicy",
                p,
                &["PreemptLowerPriority", "Never"],
            ));
        }
    }
    causes
}

/// kube-aggregator's `ValidateAPIService`: the name is `<version>.<group>`, the group a DNS
/// subdomain (empty only for the legacy `v1`), the version a DNS-1035 label, the priorities in
/// range, and either a local APIService (no trust settings) or a complete service reference.
pub(super) fn validate_api_service(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let (group, version) = (str_at(obj, "/spec/group"), str_at(obj, "/spec/version"));
    let name = str_at(obj, "/metadata/name");
    let required = format!("{version}.{group}");
    // The path-segment rule on the name is the metadata check's; this is the rest of kube's
    // name function, which reports only when the name is otherwise valid.
    if is_valid_path_segment_name(name).is_empty() && name != required {
        causes.push(Cause::invalid("metadata.name", &Value::from(name), &format!("must be `spec.version+\".\"+spec.group`: {required:?}")));
    }
    if group.is_empty() && version != "v1" {
        causes.push(Cause::required("spec.group", "only v1 may have an empty group and it better be legacy kube"));
    }
    if !group.is_empty() {
        for m in is_dns1123_subdomain(group) {
            causes.push(Cause::invalid("spec.group", &Value::from(group), &m));
        }
    }
    for m in is_dns1035_label(version) {
        causes.push(Cause::invalid("spec.version", &Value::from(version), &m));
    }
    let int_at = |pointer: &str| obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
    let group_priority = int_at("/spec/groupPriorityMinimum");
    if !(1..=20000).contains(&group_priority) {
        causes.push(Cause::invalid("spec.groupPriorityMinimum", &Value::from(group_priority), "must be positive and less than 20000"));
    }
    let version_priority = int_at("/spec/versionPriority");
    if !(1..=1000).contains(&version_priority) {
        causes.push(Cause::invalid("spec.versionPriority", &Value::from(version_priority), "must be positive and less than 1000"));
    }
    let ca_bundle = str_at(obj, "/spec/caBundle");
    let insecure = obj.pointer("/spec/insecureSkipTLSVerify").and_then(Value::as_bool).unwrap_or(false);
    let Some(service) = obj.pointer("/spec/service").filter(|s| !s.is_null()) else {
        if !ca_bundle.is_empty() {
            // kube counts the decoded bytes.
            let bytes = base64_len(ca_bundle);
            causes.push(Cause::invalid("spec.caBundle", &Value::from(format!("{bytes} bytes")), "local APIServices may not have a caBundle"));
        }
        if insecure {
            causes.push(Cause::invalid("spec.insecureSkipTLSVerify", &Value::from(true), "local APIServices may not have insecureSkipTLSVerify"));
        }
        return causes;
    };
    if str_at(service, "/namespace").is_empty() {
        causes.push(Cause::required("spec.service.namespace", ""));
    }
    if str_at(service, "/name").is_empty() {
        causes.push(Cause::required("spec.service.name", ""));
    }
    // The port defaults to 443 (kube's SetDefaults_ServiceReference) before this runs.
    let port = service.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        causes.push(Cause::invalid("spec.service.port", &Value::from(port), "port is not valid: must be between 1 and 65535, inclusive"));
    }
    if insecure && !ca_bundle.is_empty() {
        causes.push(Cause::invalid("spec.insecureSkipTLSVerify", &Value::from(true), "may not be true if caBundle is present"));
    }
    causes
}

/// kube-aggregator's `ValidateAPIServiceStatus`: condition statuses are True, False or Unknown.
pub(super) fn validate_api_service_status(obj: &Value) -> Vec<Cause> {
    let conditions = obj.pointer("/status/conditions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    conditions
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let status = c.get("status").and_then(Value::as_str).unwrap_or_default();
            (!matches!(status, "True" | "False" | "Unknown")).then(|| {
                Cause::not_supported(&format!("status.conditions[{i}].status"), &Value::from(status), &["True", "False", "Unknown"])
            })
        })
        .collect()
}

/// Bytes a base64 text decodes to (its padding and length say so without decoding).
fn base64_len(text: &str) -> usize {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count();
    (text.len() / 4) * 3 - padding.min(2)
}
