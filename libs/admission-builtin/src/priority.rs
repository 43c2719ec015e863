//! Priority (kube's `plugin/pkg/admission/priority`): a new Pod's `priorityClassName` (or the
//! global default class) becomes its `priority` and `preemptionPolicy`; updates keep what
//! creation set; at most one PriorityClass is the global default.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use serde_json::{json, Value};

use crate::lookup;

/// kube's system classes (`scheduling.SystemPriorityClasses`): name, value and description.
pub const SYSTEM_CLASSES: &[(&str, i64, &str)] = &[
    ("system-node-critical", 2_000_001_000, "Used for system critical pods that must not be moved from their current node."),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// The system classes as kube's post-start hook creates them.
pub fn system_class_objects() -> Vec<Value> {
    SYSTEM_CLASSES
        .iter()
        .map(|(name, value, description)| {
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "description": description, "globalDefault": false, "preemptionPolicy": "PreemptLowerPriority"})
        })
        .collect()
}

/// The plugin.
pub struct Priority {
    rest: RestStore,
}

/// What a class gives a Pod.
struct Resolved {
    name: String,
    value: i64,
    preemption_policy: Option<String>,
}

fn resolved(pc: &Value) -> Resolved {
    Resolved {
        name: lookup::str_at(pc, "/metadata/name").to_owned(),
        value: pc.get("value").and_then(Value::as_i64).unwrap_or(0),
        preemption_policy: pc.get("preemptionPolicy").and_then(Value::as_str).map(str::to_owned),
    }
}

impl Priority {
    /// The plugin over `rest`'s PriorityClass cache.
    pub fn new(rest: RestStore) -> Self {
        Priority { rest }
    }

    fn classes(&self) -> Result<Vec<std::sync::Arc<Value>>, ApiError> {
        let spec = lookup::spec("scheduling.k8s.io", "v1", "priorityclasses")?;
        Ok(lookup::list(&self.rest, spec, None))
    }

    /// The global default class; if a race left several, the one with the lowest value.
    fn default_class(&self) -> Result<Option<Resolved>, ApiError> {
        Ok(self
            .classes()?
            .iter()
            .filter(|pc| pc.get("globalDefault").and_then(Value::as_bool) == Some(true))
            .map(|pc| resolved(pc))
            .min_by_key(|r| r.value))
    }

    /// A class by name; the system classes are known even before their objects exist.
    fn class(&self, name: &str) -> Result<Option<Resolved>, ApiError> {
        let spec = lookup::spec("scheduling.k8s.io", "v1", "priorityclasses")?;
        if let Some(pc) = lookup::get(&self.rest, spec, None, name) {
            return Ok(Some(resolved(&pc)));
        }
        Ok(SYSTEM_CLASSES.iter().find(|(n, _, _)| *n == name).map(|(n, value, _)| Resolved {
            name: (*n).to_owned(),
            value: *value,
            preemption_policy: Some("PreemptLowerPriority".into()),
        }))
    }

    fn admit_pod_create(&self, attrs: &Attributes) -> Result<Value, ApiError> {
        let Some(mut pod) = attrs.object.clone() else { return Ok(Value::Null) };
        let class_name = lookup::str_at(&pod, "/spec/priorityClassName").to_owned();
        let class = if class_name.is_empty() {
            self.default_class()?.unwrap_or(Resolved {
                name: String::new(),
                value: 0,
                preemption_policy: Some("PreemptLowerPriority".into()),
            })
        } else {
            self.class(&class_name)?
                .ok_or_else(|| attrs.forbidden(&format!("no PriorityClass with name {class_name} was found")))?
        };
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return Ok(pod) };
        if !class.name.is_empty() {
            spec.insert("priorityClassName".into(), Value::String(class.name));
        }
        if let Some(given) = spec.get("priority").and_then(Value::as_i64) {
            if given != class.value {
                return Err(attrs.forbidden(&format!(
                    "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {} from the given PriorityClass name",
                    class.value
                )));
            }
        }
        spec.insert("priority".into(), Value::from(class.value));
        if let Some(policy) = class.preemption_policy {
            if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str).filter(|g| *g != policy) {
                return Err(attrs.forbidden(&format!(
                    "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
                )));
            }
            spec.insert("preemptionPolicy".into(), Value::String(policy));
        }
        Ok(pod)
    }
}

fn is(attrs: &Attributes, group: &str, resource: &str) -> bool {
    attrs.subresource.is_empty() && attrs.resource.group == group && attrs.resource.name == resource
}

#[async_trait]
impl AdmissionPlugin for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update | Operation::Delete)
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !is(attrs, "", "pods") {
            return Ok(());
        }
        match attrs.operation {
            Operation::Create => {
                let pod = self.admit_pod_create(attrs)?;
                attrs.object = Some(pod);
            }
            // Creation set these and validation forbids changing them: an update that leaves
            // them out (a PUT from an old copy) keeps them.
            Operation::Update => {
                let old = attrs.old_object.as_ref().and_then(|o| o.get("spec")).cloned().unwrap_or_default();
                if let Some(spec) = attrs.object.as_mut().and_then(|o| o.get_mut("spec")).and_then(Value::as_object_mut) {
                    for field in ["priority", "preemptionPolicy"] {
                        if spec.get(field).is_none_or(Value::is_null) {
                            if let Some(v) = old.get(field).filter(|v| !v.is_null()) {
                                spec.insert(field.into(), v.clone());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !is(attrs, "scheduling.k8s.io", "priorityclasses") || !matches!(attrs.operation, Operation::Create | Operation::Update) {
            return Ok(());
        }
        let Some(pc) = attrs.object.as_ref() else { return Ok(()) };
        if pc.get("globalDefault").and_then(Value::as_bool) != Some(true) {
            return Ok(());
        }
        if let Some(current) = self.default_class()? {
            let name = lookup::str_at(pc, "/metadata/name");
            if attrs.operation == Operation::Create || current.name != name {
                return Err(attrs.forbidden(&format!(
                    "PriorityClass {} is already marked as default. Only one default can exist",
                    current.name
                )));
            }
        }
        Ok(())
    }
}
