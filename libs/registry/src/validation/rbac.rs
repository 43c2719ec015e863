//! RBAC validation: policy rules, role references and subjects.

use kapi_apimachinery::Cause;
use serde_json::Value;

use super::{array_at, str_at};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// kube's `ValidatePolicyRule` for every rule of a Role (`namespaced`) or ClusterRole.
pub(super) fn validate_rules(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, rule) in array_at(obj, "/rules").iter().enumerate() {
        let path = format!("rules[{i}]");
        let len = |key: &str| rule.get(key).and_then(Value::as_array).map_or(0, Vec::len);
        if len("verbs") == 0 {
            causes.push(Cause::required(&format!("{path}.verbs"), "verbs must contain at least one value"));
        }
        if len("nonResourceURLs") > 0 {
            let urls = rule.get("nonResourceURLs").unwrap_or(&Value::Null);
            if namespaced {
                causes.push(Cause::invalid(
                    &format!("{path}.nonResourceURLs"),
                    urls,
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if len("apiGroups") > 0 || len("resources") > 0 || len("resourceNames") > 0 {
                causes.push(Cause::invalid(
                    &format!("{path}.nonResourceURLs"),
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if len("apiGroups") == 0 {
            causes.push(Cause::required(
                &format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if len("resources") == 0 {
            causes.push(Cause::required(
                &format!("{path}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
    causes
}

/// A RoleBinding (`namespaced`) or ClusterRoleBinding: its roleRef and subjects.
pub(super) fn validate_binding(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let role_ref = obj.get("roleRef").unwrap_or(&Value::Null);
    let group = role_ref.get("apiGroup").cloned().unwrap_or(Value::from(""));
    if group.as_str() != Some(RBAC_GROUP) {
        causes.push(Cause::not_supported("roleRef.apiGroup", &group, &[RBAC_GROUP]));
    }
    let kinds: &[&str] = if namespaced { &["Role", "ClusterRole"] } else { &["ClusterRole"] };
    let kind = role_ref.get("kind").cloned().unwrap_or(Value::from(""));
    if !kind.as_str().is_some_and(|k| kinds.contains(&k)) {
        causes.push(Cause::not_supported("roleRef.kind", &kind, kinds));
    }
    if str_at(role_ref, "/name").is_empty() {
        causes.push(Cause::required("roleRef.name", ""));
    }
    for (i, subject) in array_at(obj, "/subjects").iter().enumerate() {
        let path = format!("subjects[{i}]");
        if str_at(subject, "/name").is_empty() {
            causes.push(Cause::required(&format!("{path}.name"), ""));
        }
        let sgroup = subject.get("apiGroup").cloned().unwrap_or(Value::from(""));
        match str_at(subject, "/kind") {
            "ServiceAccount" => {
                if sgroup.as_str() != Some("") {
                    causes.push(Cause::not_supported(&format!("{path}.apiGroup"), &sgroup, &[""]));
                }
                if !namespaced && str_at(subject, "/namespace").is_empty() {
                    causes.push(Cause::required(&format!("{path}.namespace"), ""));
                }
            }
            "User" | "Group" => {
                if sgroup.as_str() != Some(RBAC_GROUP) {
                    causes.push(Cause::not_supported(&format!("{path}.apiGroup"), &sgroup, &[RBAC_GROUP]));
                }
            }
            _ => causes.push(Cause::not_supported(
                &format!("{path}.kind"),
                subject.get("kind").unwrap_or(&Value::from("")),
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
    causes
}
