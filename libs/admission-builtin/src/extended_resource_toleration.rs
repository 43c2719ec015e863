//! ExtendedResourceToleration (kube's `plugin/pkg/admission/extendedresourcetoleration`): a Pod
//! asking for an extended resource (`example.com/gpu`) tolerates the NoSchedule taint of the
//! same name, so that nodes with such devices can be tainted against everyone else.

use std::collections::BTreeSet;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::validation::is_qualified_name;
use kapi_apimachinery::ApiError;
use serde_json::{json, Value};

/// The plugin.
#[derive(Default)]
pub struct ExtendedResourceToleration;

impl ExtendedResourceToleration {
    /// The plugin.
    pub fn new() -> Self {
        ExtendedResourceToleration
    }
}

/// kube's `IsExtendedResourceName`: outside the `kubernetes.io` namespaces, not a quota
/// `requests.` name, and a qualified name once prefixed with `requests.`.
fn is_extended(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.") && is_qualified_name(&format!("requests.{name}")).is_empty()
}

#[async_trait]
impl AdmissionPlugin for ExtendedResourceToleration {
    fn name(&self) -> &'static str {
        "ExtendedResourceToleration"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !attrs.is_core("pods") {
            return Ok(());
        }
        let Some(pod) = attrs.object.as_mut() else { return Ok(()) };
        let mut names = BTreeSet::new();
        for list in ["initContainers", "containers"] {
            for c in pod.pointer(&format!("/spec/{list}")).and_then(Value::as_array).into_iter().flatten() {
                for kind in ["requests", "limits"] {
                    for name in c.pointer(&format!("/resources/{kind}")).and_then(Value::as_object).into_iter().flat_map(|m| m.keys()) {
                        if is_extended(name) {
                            names.insert(name.clone());
                        }
                    }
                }
            }
        }
        if names.is_empty() {
            return Ok(());
        }
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return Ok(()) };
        let mut tolerations = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
        for name in names {
            let toleration = json!({"key": name, "operator": "Exists", "effect": "NoSchedule"});
            // kube's AddOrUpdateTolerationInPod: the same key, operator and effect is replaced.
            let same = |t: &Value| {
                t.get("key") == toleration.get("key")
                    && t.get("operator") == toleration.get("operator")
                    && t.get("effect") == toleration.get("effect")
            };
            match tolerations.iter_mut().find(|t| same(t)) {
                Some(existing) => *existing = toleration,
                None => tolerations.push(toleration),
            }
        }
        spec.insert("tolerations".into(), Value::Array(tolerations));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::is_extended;

    #[test]
    fn extended_names() {
        assert!(is_extended("example.com/gpu"));
        assert!(!is_extended("cpu"));
        assert!(!is_extended("kubernetes.io/foo"));
        assert!(!is_extended("requests.example.com/gpu"));
    }
}
