//! Validation of the smaller cluster kinds clients write by hand: PodDisruptionBudget,
//! NetworkPolicy selectors, IngressClass, RuntimeClass and PriorityClass (kube's
//! `pkg/apis/{policy,networking,node,scheduling}/validation`).

use kapi_apimachinery::validation::is_dns1123_label;
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
