//! Kind-specific validation beyond object metadata, with kube-apiserver's field paths and
//! messages (`pkg/apis/*/validation`). Users and clients read these messages verbatim, so the
//! wording follows kube's `field.Error` rendering.
//!
//! Each kind's rules live in a submodule; the enumerated fields that only need a
//! supported-values check are tables ([`ENUMS`]) rather than code.

mod admission;
mod admission_cel;
mod admission_policy;
mod cluster;
mod config;
mod flowcontrol;
mod mutating_policy;
mod pod;
mod rbac;
mod service;
mod service_cidr;
mod workloads;

use kapi_apimachinery::validation::{
    is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value, validate_labels, NameRule,
};
use kapi_apimachinery::Cause;
use serde_json::Value;

/// Which name rule kube applies to this kind (namespaces/services: DNS-1123 label (services
/// 1035), most: subdomain, rbac kinds: path segment, ...).
pub fn name_rule(group: &str, kind: &str) -> NameRule {
    match (group, kind) {
        ("", "Namespace") => NameRule::Dns1123Label,
        ("", "Service") => NameRule::Dns1035Label,
        ("rbac.authorization.k8s.io", _) | ("apiregistration.k8s.io", "APIService") => NameRule::PathSegment,
        ("networking.k8s.io", "IPAddress") => NameRule::IpAddress,
        ("flowcontrol.apiserver.k8s.io", _) => NameRule::Dns1123Subdomain,
        _ => NameRule::Dns1123Subdomain,
    }
}

const ADMISSION: &str = "admissionregistration.k8s.io";

/// Kind-specific create validation; field paths and messages as kube words them.
pub fn validate(group: &str, kind: &str, obj: &Value) -> Vec<Cause> {
    let mut causes = check_enums(group, kind, obj);
    causes.extend(match (group, kind) {
        ("", "Pod") => pod::validate_pod(obj),
        ("", "PodTemplate") => pod::validate_template(obj.get("template"), "template", None),
        ("", "ReplicationController") => workloads::validate_replication_controller(obj),
        ("", "Service") => service::validate_service(obj),
        ("", "ConfigMap") => config::validate_config_map(obj),
        ("", "Secret") => config::validate_secret(obj),
        ("", "Namespace") => validate_namespace(obj),
        ("", "PersistentVolumeClaim") => validate_pvc(obj),
        ("apps", "Deployment") => workloads::validate_deployment(obj),
        ("apps", "ReplicaSet") => workloads::validate_replica_set(obj),
        ("apps", "StatefulSet") => workloads::validate_stateful_set(obj),
        ("apps", "DaemonSet") => workloads::validate_daemon_set(obj),
        ("batch", "Job") => workloads::validate_job(obj),
        ("batch", "CronJob") => workloads::validate_cron_job(obj),
        ("coordination.k8s.io", "Lease") => validate_lease(obj),
        ("rbac.authorization.k8s.io", "Role") => rbac::validate_rules(obj, true),
        ("rbac.authorization.k8s.io", "ClusterRole") => rbac::validate_rules(obj, false),
        ("rbac.authorization.k8s.io", "RoleBinding") => rbac::validate_binding(obj, true),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => rbac::validate_binding(obj, false),
        (ADMISSION, "ValidatingWebhookConfiguration") => {
            admission::validate_webhook_configuration(obj, false, admission::Options::CREATE)
        }
        (ADMISSION, "MutatingWebhookConfiguration") => {
            admission::validate_webhook_configuration(obj, true, admission::Options::CREATE)
        }
        (ADMISSION, "ValidatingAdmissionPolicy") => admission_policy::validate_policy(obj),
        (ADMISSION, "ValidatingAdmissionPolicyBinding") => admission_policy::validate_policy_binding(obj),
        (ADMISSION, k @ ("MutatingAdmissionPolicy" | "MutatingAdmissionPolicyBinding")) => mutating_policy::validate(k, obj),
        ("policy", "PodDisruptionBudget") => cluster::validate_pdb(obj),
        ("networking.k8s.io", "NetworkPolicy") => cluster::validate_network_policy(obj),
        ("networking.k8s.io", "IngressClass") => cluster::validate_ingress_class(obj),
        ("networking.k8s.io", "ServiceCIDR") => service_cidr::validate_service_cidr(obj),
        ("node.k8s.io", "RuntimeClass") => cluster::validate_runtime_class(obj),
        ("scheduling.k8s.io", "PriorityClass") => cluster::validate_priority_class(obj),
        ("apiregistration.k8s.io", "APIService") => cluster::validate_api_service(obj),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => flowcontrol::validate_flow_schema(obj),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => flowcontrol::validate_priority_level(obj),
        _ => Vec::new(),
    });
    causes
}

/// Kind-specific update validation (immutable fields: Deployment/ReplicaSet/StatefulSet/DaemonSet
/// spec.selector, Job spec.selector and spec.template, Service spec.clusterIP (unless set from ""),
/// immutable ConfigMap/Secret data, PVC spec except resources requests, ...).
pub fn validate_update(group: &str, kind: &str, new: &Value, old: &Value) -> Vec<Cause> {
    match (group, kind) {
        ("", "Pod") => pod::validate_pod_update(new, old),
        ("", "Service") => service::validate_service_update(new, old),
        ("", "ConfigMap") => config::validate_config_map_update(new, old),
        ("", "Secret") => config::validate_secret_update(new, old),
        ("", "PersistentVolumeClaim") => validate_pvc_update(new, old),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") => immutable(new, old, "/spec/selector", "spec.selector"),
        ("apps", "StatefulSet") => workloads::validate_stateful_set_update(new, old),
        ("networking.k8s.io", "ServiceCIDR") => service_cidr::validate_service_cidr_update(new, old),
        ("apiregistration.k8s.io", "APIService") => cluster::validate_api_service_status(new),
        ("batch", "Job") => workloads::validate_job_update(new, old),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            if new.get("roleRef") != old.get("roleRef") {
                vec![Cause::invalid("roleRef", new.get("roleRef").unwrap_or(&Value::Null), "cannot change roleRef")]
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    }
}

/// Enumerated fields checked only against their supported values: (group, kind, JSON pointer,
/// field path, supported values in kube's order).
const ENUMS: &[(&str, &str, &str, &str, &[&str])] = &[
    ("", "Service", "/spec/type", "spec.type", &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]),
    ("", "Service", "/spec/sessionAffinity", "spec.sessionAffinity", &["ClientIP", "None"]),
    (
        "",
        "Service",
        "/spec/ipFamilyPolicy",
        "spec.ipFamilyPolicy",
        &["PreferDualStack", "RequireDualStack", "SingleStack"],
    ),
    ("", "Service", "/spec/internalTrafficPolicy", "spec.internalTrafficPolicy", &["Cluster", "Local"]),
    ("apps", "Deployment", "/spec/strategy/type", "spec.strategy.type", &["Recreate", "RollingUpdate"]),
    ("apps", "StatefulSet", "/spec/podManagementPolicy", "spec.podManagementPolicy", &["OrderedReady", "Parallel"]),
    ("apps", "StatefulSet", "/spec/updateStrategy/type", "spec.updateStrategy.type", &["OnDelete", "RollingUpdate"]),
    (
        "apps",
        "StatefulSet",
        "/spec/persistentVolumeClaimRetentionPolicy/whenDeleted",
        "spec.persistentVolumeClaimRetentionPolicy.whenDeleted",
        &["Retain", "Delete"],
    ),
    (
        "apps",
        "StatefulSet",
        "/spec/persistentVolumeClaimRetentionPolicy/whenScaled",
        "spec.persistentVolumeClaimRetentionPolicy.whenScaled",
        &["Retain", "Delete"],
    ),
    ("apps", "DaemonSet", "/spec/updateStrategy/type", "spec.updateStrategy.type", &["OnDelete", "RollingUpdate"]),
    ("batch", "Job", "/spec/completionMode", "spec.completionMode", &["NonIndexed", "Indexed"]),
    ("batch", "Job", "/spec/podReplacementPolicy", "spec.podReplacementPolicy", &["TerminatingOrFailed", "Failed"]),
    ("batch", "CronJob", "/spec/concurrencyPolicy", "spec.concurrencyPolicy", &["Allow", "Forbid", "Replace"]),
    ("", "PersistentVolumeClaim", "/spec/volumeMode", "spec.volumeMode", &["Block", "Filesystem"]),
];

fn check_enums(group: &str, kind: &str, obj: &Value) -> Vec<Cause> {
    ENUMS
        .iter()
        .filter(|(g, k, ..)| *g == group && *k == kind)
        .filter_map(|(_, _, pointer, field, supported)| {
            let v = obj.pointer(pointer)?;
            match v.as_str() {
                Some(s) if supported.contains(&s) => None,
                _ if v.is_null() => None,
                _ => Some(Cause::not_supported(field, v, supported)),
            }
        })
        .collect()
}

// ---- shared helpers ------------------------------------------------------------------------

pub(crate) fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn array_at<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// `field: Not found: value`.
pub(crate) fn not_found(field: &str, value: &Value) -> Cause {
    Cause { reason: "FieldValueNotFound".into(), message: format!("{field}: Not found: {value}"), field: field.into() }
}

/// kube's `ValidateNonnegativeField`.
pub(crate) fn non_negative(obj: &Value, pointer: &str, field: &str) -> Option<Cause> {
    let v = obj.pointer(pointer)?;
    (v.as_i64()? < 0).then(|| Cause::invalid(field, v, "must be greater than or equal to 0"))
}

/// A strictly positive integer field, when set.
pub(crate) fn positive(obj: &Value, pointer: &str, field: &str) -> Option<Cause> {
    let v = obj.pointer(pointer)?;
    (v.as_i64()? <= 0).then(|| Cause::invalid(field, v, "must be greater than 0"))
}

/// kube's `ValidateImmutableField` on the value at `pointer`.
pub(crate) fn immutable(new: &Value, old: &Value, pointer: &str, field: &str) -> Vec<Cause> {
    let (n, o) = (new.pointer(pointer), old.pointer(pointer));
    if n == o {
        Vec::new()
    } else {
        vec![Cause::invalid(field, n.unwrap_or(&Value::Null), "field is immutable")]
    }
}

/// kube's `metav1validation.ValidateLabelSelector`: match labels, operators, keys, and (unless
/// `allow_invalid_values`, which update validation grants to objects that already had them)
/// label values.
pub(crate) fn label_selector(sel: &Value, path: &str, allow_invalid_values: bool) -> Vec<Cause> {
    let mut causes = validate_labels(sel.get("matchLabels").and_then(Value::as_object), &format!("{path}.matchLabels"));
    for (i, expr) in array_at(sel, "/matchExpressions").iter().enumerate() {
        let item = format!("{path}.matchExpressions[{i}]");
        let values = array_at(expr, "/values");
        match str_at(expr, "/operator") {
            "In" | "NotIn" if values.is_empty() => causes.push(Cause::required(
                &format!("{item}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => causes.push(Cause::forbidden(
                &format!("{item}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => causes.push(Cause::invalid(
                &format!("{item}.operator"),
                expr.get("operator").unwrap_or(&Value::from("")),
                "not a valid selector operator",
            )),
        }
        let key = str_at(expr, "/key");
        causes.extend(is_qualified_name(key).iter().map(|m| Cause::invalid(&format!("{item}.key"), &Value::from(key), m)));
        if !allow_invalid_values {
            for (j, v) in values.iter().enumerate() {
                let s = v.as_str().unwrap_or("");
                causes.extend(
                    is_valid_label_value(s).iter().map(|m| Cause::invalid(&format!("{item}.values[{j}]"), v, m)),
                );
            }
        }
    }
    causes
}

/// One cause per reason kube's DNS-1123 label check gives.
pub(crate) fn dns_label(field: &str, value: &str) -> Vec<Cause> {
    is_dns1123_label(value).iter().map(|m| Cause::invalid(field, &Value::from(value), m)).collect()
}

/// One cause per reason kube's DNS-1123 subdomain check gives.
pub(crate) fn dns_subdomain(field: &str, value: &str) -> Vec<Cause> {
    is_dns1123_subdomain(value).iter().map(|m| Cause::invalid(field, &Value::from(value), m)).collect()
}

/// kube's `IsValidPortNum`.
pub(crate) fn port_number(field: &str, v: &Value) -> Option<Cause> {
    match v.as_i64() {
        Some(1..=65535) => None,
        _ => Some(Cause::invalid(field, v, "must be between 1 and 65535, inclusive")),
    }
}

/// kube's `IsValidPortName` (IANA service names: container port names, named target ports).
pub(crate) fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters");
    }
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.chars().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen");
    }
    errs
}

fn validate_namespace(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, f) in array_at(obj, "/spec/finalizers").iter().enumerate() {
        let field = format!("spec.finalizers[{i}]");
        let name = f.as_str().unwrap_or("");
        let errs = kapi_apimachinery::validation::is_qualified_name(name);
        if !errs.is_empty() {
            causes.extend(errs.iter().map(|m| Cause::invalid(&field, f, m)));
        } else if name != "kubernetes" && !name.contains('/') {
            causes.push(Cause::invalid(
                &field,
                f,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    causes
}

fn validate_lease(obj: &Value) -> Vec<Cause> {
    [
        positive(obj, "/spec/leaseDurationSeconds", "spec.leaseDurationSeconds"),
        non_negative(obj, "/spec/leaseTransitions", "spec.leaseTransitions"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];

fn validate_pvc(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let modes = array_at(obj, "/spec/accessModes");
    if modes.is_empty() {
        causes.push(Cause::required("spec.accessModes", "at least 1 access mode is required"));
    }
    for m in modes {
        if !m.as_str().is_some_and(|s| ACCESS_MODES.contains(&s)) {
            causes.push(Cause::not_supported("spec.accessModes", m, ACCESS_MODES));
        }
    }
    if obj.pointer("/spec/resources/requests/storage").is_none() {
        causes.push(Cause::required("spec.resources[storage]", ""));
    }
    causes
}

fn validate_pvc_update(new: &Value, old: &Value) -> Vec<Cause> {
    // Everything in spec but the storage request and the attributes class is fixed; binding
    // (an empty volumeName becoming set) is the controller's business.
    let strip = |v: &Value, other: &Value| {
        let mut spec = v.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(map) = spec.as_object_mut() {
            if let Some(res) = map.get_mut("resources").and_then(Value::as_object_mut) {
                res.remove("requests");
            }
            map.remove("volumeAttributesClassName");
            if str_at(other, "/spec/volumeName").is_empty() {
                map.remove("volumeName");
            }
        }
        spec
    };
    if strip(new, old) != strip(old, old) {
        vec![Cause::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        )]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod admission_tests;
#[cfg(test)]
mod tests;
