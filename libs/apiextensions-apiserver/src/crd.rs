//! CustomResourceDefinition objects as the tier reads them, and their strategy (kube's
//! `pkg/registry/customresourcedefinition/strategy.go` and the REST store's delete).

use kapi_apiextensions::validation;
use kapi_apimachinery::{time as ktime, Cause};
use kapi_registry::catalog::ResourceSpec;
use kapi_registry::strategy::{prepare_update_by_semantics, Strategy, WriteTarget};
use serde_json::{json, Map, Value};

/// The finalizer that holds a deleted CRD until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Condition types kube sets on CRDs.
pub const ESTABLISHED: &str = "Established";
/// Names accepted without conflict.
pub const NAMES_ACCEPTED: &str = "NamesAccepted";
/// Deletion of the CRD's instances is pending or in progress.
pub const TERMINATING: &str = "Terminating";
/// API approval of `*.k8s.io` / `*.kubernetes.io` groups.
pub const API_APPROVAL: &str = "KubernetesAPIApprovalPolicyConformant";

/// The value at a JSON pointer. `Value::pointer` allocates to unescape every token; the
/// controllers read a few fields of every CRD on each pass, so pointers without escapes are
/// walked as they are.
pub fn at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.contains('~') {
        return obj.pointer(pointer);
    }
    pointer.split('/').skip(1).try_fold(obj, |value, token| match value {
        Value::Object(map) => map.get(token),
        Value::Array(list) => token.parse::<usize>().ok().and_then(|i| list.get(i)),
        _ => None,
    })
}

/// A string at a JSON pointer, or "".
pub fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    at(obj, pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The strings of an array at a JSON pointer.
pub fn strings_at(obj: &Value, pointer: &str) -> Vec<String> {
    at(obj, pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// The condition of `kind` in a CRD's status.
pub fn condition<'a>(crd: &'a Value, kind: &str) -> Option<&'a Value> {
    at(crd, "/status/conditions")?.as_array()?.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

/// Whether a condition is `True`.
pub fn is_true(crd: &Value, kind: &str) -> bool {
    condition(crd, kind).and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True")
}

/// Sets a condition as kube's `SetCRDCondition` does: the transition time moves only when the
/// status changes; new conditions are appended.
pub fn set_condition(status: &mut Map<String, Value>, kind: &str, state: &str, reason: &str, message: &str) {
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(list) = conditions.as_array_mut() else { return };
    let now = ktime::now_rfc3339();
    match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(kind)) {
        Some(existing) => {
            let changed = existing.get("status").and_then(Value::as_str) != Some(state);
            if changed || existing.get("lastTransitionTime").is_none_or(Value::is_null) {
                existing["lastTransitionTime"] = Value::String(now);
            }
            existing["status"] = Value::from(state);
            existing["reason"] = Value::from(reason);
            existing["message"] = Value::from(message);
        }
        None => list.push(json!({"type": kind, "status": state, "lastTransitionTime": now, "reason": reason, "message": message})),
    }
}

/// The storage version's name.
pub fn storage_version(crd: &Value) -> Option<&str> {
    at(crd, "/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name")?.as_str())
}

/// The strategy of CustomResourceDefinitions: kube's defaults and validation, a status owned by
/// the controllers, stored versions recorded, the cleanup finalizer added on delete.
pub struct CrdStrategy(pub &'static ResourceSpec);

impl CrdStrategy {
    /// kube records every version that has been the storage version, so a migration knows
    /// which versions stored objects may be in.
    fn record_storage_version(obj: &mut Value) {
        let Some(storage) = storage_version(obj).map(str::to_owned) else { return };
        let status = obj.as_object_mut().map(|m| m.entry("status").or_insert_with(|| json!({})));
        let Some(Value::Object(status)) = status else { return };
        let stored = status.entry("storedVersions").or_insert_with(|| json!([]));
        if let Some(list) = stored.as_array_mut() {
            if !list.iter().any(|v| v.as_str() == Some(storage.as_str())) {
                list.push(Value::String(storage));
            }
        }
    }
}

impl Strategy for CrdStrategy {
    fn spec(&self) -> &'static ResourceSpec {
        self.0
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // kube clears the status (Go's zero status: empty accepted names) and records the
        // storage version.
        if let Some(map) = obj.as_object_mut() {
            map.insert("status".into(), json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []}));
        }
        Self::record_storage_version(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value, target: WriteTarget) {
        // The status is the controllers' (kept from the stored object on a main write).
        prepare_update_by_semantics(self.semantics(), new, old, target);
        if target == WriteTarget::Main {
            Self::record_storage_version(new);
        }
    }

    fn apply_defaults(&self, obj: &mut Value) {
        validation::apply_defaults(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        validation::validate_create(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        validation::validate_update(new, old)
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        // kube's status strategy: metadata and status only (the spec is the stored one).
        validation::validate_status_update(new, old)
    }

    fn prepare_for_delete(&self, obj: &mut Value) {
        // kube's CRD store: on the first delete, the cleanup finalizer and a Terminating
        // condition, so that the instances go before the definition.
        let Some(map) = obj.as_object_mut() else { return };
        let deleting = map.get("metadata").and_then(|m| m.get("deletionTimestamp")).is_some_and(|t| !t.is_null());
        if deleting {
            return;
        }
        let meta = map.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            let finalizers = meta.entry("finalizers").or_insert_with(|| json!([]));
            if let Some(list) = finalizers.as_array_mut() {
                if !list.iter().any(|f| f.as_str() == Some(CLEANUP_FINALIZER)) {
                    list.push(Value::from(CLEANUP_FINALIZER));
                }
            }
        }
        let status = map.entry("status").or_insert_with(|| json!({}));
        if let Some(status) = status.as_object_mut() {
            set_condition(
                status,
                TERMINATING,
                "True",
                "InstanceDeletionPending",
                "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_read_as_serde_reads_them() {
        let obj = json!({"a": {"b/c": 1, "d": [{"e": "x"}], "~": 2}, "": {"": 3}});
        for pointer in ["", "/a", "/a/d/0/e", "/a/d/1", "/a/b~1c", "/a/~0", "/a/d/x", "/a/d/0/e/f", "/", "//", "/missing"] {
            assert_eq!(at(&obj, pointer), obj.pointer(pointer), "{pointer}");
        }
    }
}
