//! kube-apiserver's `rbac/bootstrap-roles` post-start hook: the default roles and bindings are
//! created when missing and reconciled when present (missing rules, subjects, labels and
//! annotations are added back) unless an object carries
//! `rbac.authorization.kubernetes.io/autoupdate: "false"`. Safe to run from several replicas
//! at once: every step is a conditional create or an idempotent update.

use kapi_apimachinery::ApiError;
use kapi_auth::rbac::{covers, rules_of, BootstrapPolicy, PolicyRule};
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{DeleteOptions, RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use serde_json::{Map, Value};

const GROUP: &str = "rbac.authorization.k8s.io";
const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
const MANAGER: &str = "kube-apiserver";

fn spec(resource: &str) -> Result<&'static ResourceSpec, ApiError> {
    catalog::find(GROUP, "v1", resource).ok_or_else(|| ApiError::internal(format!("{resource} missing from the catalog")))
}

fn meta_map<'a>(obj: &'a Value, field: &str) -> Option<&'a Map<String, Value>> {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_object)
}

/// Expected keys are added; existing values win, as kube's reconciliation merges them.
fn merge_map(current: &mut Value, expected: &Value, field: &str) {
    let Some(want) = meta_map(expected, field).cloned() else { return };
    let meta = &mut current["metadata"];
    if !meta.get(field).is_some_and(Value::is_object) {
        meta[field] = Value::Object(Map::new());
    }
    if let Some(have) = meta[field].as_object_mut() {
        for (k, v) in want {
            have.entry(k).or_insert(v);
        }
    }
}

/// A subject as stored: defaulting fills `apiGroup` (the RBAC group for users and groups; a
/// service account's `""` is omitted, as kube's JSON omits it) and drops an empty namespace, so
/// the policy's subjects are compared in that form, or every reconciliation would add them again.
fn normalized_subject(s: &Value) -> (String, String, String, String) {
    let field = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let kind = field("kind");
    let group = match s.get("apiGroup").and_then(Value::as_str) {
        Some(g) => g.to_owned(),
        None if kind == "ServiceAccount" => String::new(),
        None => GROUP.to_owned(),
    };
    (kind, group, field("name"), field("namespace"))
}

/// The reconciled object, or `None` when nothing needs to change.
fn reconcile(current: &Value, expected: &Value, binding: bool) -> Result<Option<Value>, ApiError> {
    if meta_map(current, "annotations").and_then(|a| a.get(AUTOUPDATE)).and_then(Value::as_str) == Some("false") {
        return Ok(None);
    }
    let mut new = current.clone();
    merge_map(&mut new, expected, "labels");
    merge_map(&mut new, expected, "annotations");
    if binding {
        let have = new.get("subjects").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut subjects = have.clone();
        for s in expected.get("subjects").and_then(Value::as_array).into_iter().flatten() {
            let want = normalized_subject(s);
            if !subjects.iter().any(|h| normalized_subject(h) == want) {
                subjects.push(s.clone());
            }
        }
        if subjects != have {
            new["subjects"] = Value::Array(subjects);
        }
    } else if let Some(rule) = expected.get("aggregationRule").filter(|v| !v.is_null()) {
        // The aggregation controller owns the rules; only the selectors are reconciled.
        let mut selectors = new.pointer("/aggregationRule/clusterRoleSelectors").and_then(Value::as_array).cloned().unwrap_or_default();
        for s in rule.get("clusterRoleSelectors").and_then(Value::as_array).into_iter().flatten() {
            if !selectors.contains(s) {
                selectors.push(s.clone());
            }
        }
        new["aggregationRule"] = serde_json::json!({"clusterRoleSelectors": selectors});
    } else {
        let bad = |e: kapi_auth::rbac::DecodeError| ApiError::internal(e.to_string());
        let have = rules_of(current).map_err(bad)?;
        let want = rules_of(expected).map_err(bad)?;
        if let Err(missing) = covers(&have, &want) {
            let mut rules: Vec<PolicyRule> = have;
            rules.extend(missing);
            new["rules"] = serde_json::to_value(rules).map_err(|e| ApiError::internal(e.to_string()))?;
        }
    }
    Ok((new != *current).then_some(new))
}

async fn ensure(rest: &RestStore, resource: &str, expected: &Value) -> Result<(), ApiError> {
    let spec = spec(resource)?;
    let strategy = CatalogStrategy(spec);
    let binding = resource.ends_with("bindings");
    let ns = expected.pointer("/metadata/namespace").and_then(Value::as_str).filter(|n| !n.is_empty());
    let name = expected.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, MANAGER.into(), ""));
    let hooks = WriteHooks::tracking(track.as_deref());
    for _ in 0..10 {
        let current = match rest.get(&strategy, ns, &name).await {
            Ok(current) => current,
            Err(e) if e.code == 404 => match rest.create(&strategy, ns, expected.clone(), false, hooks).await {
                Ok(_) => return Ok(()),
                // Another replica created it first: reconcile against theirs.
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        };
        if binding && current.get("roleRef") != expected.get("roleRef") {
            // roleRef is immutable: kube deletes and recreates a binding whose reference changed.
            if meta_map(&current, "annotations").and_then(|a| a.get(AUTOUPDATE)).and_then(Value::as_str) == Some("false") {
                return Ok(());
            }
            match rest.delete(&strategy, ns, &name, &DeleteOptions::default()).await {
                Ok(_) => continue,
                Err(e) if e.code == 404 => continue,
                Err(e) => return Err(e),
            }
        }
        let Some(_) = reconcile(&current, expected, binding)? else { return Ok(()) };
        let result = rest
            .update_with(&strategy, ns, &name, WriteTarget::Main, false, hooks, |stored| {
                Ok(reconcile(stored, expected, binding)?.unwrap_or_else(|| stored.clone()))
            })
            .await;
        return match result {
            Ok(_) => Ok(()),
            // Deleted, or changed by another replica reconciling at the same time: look again.
            Err(e) if e.code == 404 || e.code == 409 => continue,
            Err(e) => Err(e),
        };
    }
    Err(ApiError::internal(format!("{resource} {name:?} kept changing while it was reconciled")))
}

/// Creates or reconciles every object of the bootstrap policy.
pub async fn run(rest: &RestStore, policy: &BootstrapPolicy) -> Result<(), ApiError> {
    for role in &policy.cluster_roles {
        ensure(rest, "clusterroles", role).await?;
    }
    for binding in &policy.cluster_role_bindings {
        ensure(rest, "clusterrolebindings", binding).await?;
    }
    for role in &policy.roles {
        ensure(rest, "roles", role).await?;
    }
    for binding in &policy.role_bindings {
        ensure(rest, "rolebindings", binding).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::reconcile;

    #[test]
    fn reconcile_adds_missing_rules_and_keeps_extra_ones() {
        let expected = json!({"metadata": {"name": "r", "labels": {"a": "1"}, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]});
        let current = json!({"metadata": {"name": "r", "labels": {"a": "mine"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]});
        let new = reconcile(&current, &expected, false).unwrap().unwrap();
        assert_eq!(new["metadata"]["labels"]["a"], "mine", "existing label values win");
        assert_eq!(new["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"], "true");
        let rules = new["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 3, "the extra rule stays, the missing verb comes back: {rules:?}");
        assert_eq!(rules[2], json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}));
        assert!(reconcile(&new, &expected, false).unwrap().is_none(), "a reconciled object is stable");
    }

    #[test]
    fn autoupdate_false_is_left_alone_and_bindings_gain_subjects() {
        let expected = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}]});
        let opted_out = json!({"metadata": {"name": "b", "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "false"}},
            "roleRef": {"kind": "ClusterRole", "name": "view"}});
        assert!(reconcile(&opted_out, &expected, true).unwrap().is_none());
        let current = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]});
        let new = reconcile(&current, &expected, true).unwrap().unwrap();
        assert_eq!(new["subjects"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn defaulted_subjects_count_as_present() {
        let expected = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "x"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "kube-system"}, {"kind": "User", "name": "u"}]});
        let stored = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "x"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "kube-system", "apiGroup": ""},
                         {"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]});
        assert!(reconcile(&stored, &expected, true).unwrap().is_none(), "stored defaults are not missing subjects");
    }
}
