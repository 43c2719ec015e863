//! RuntimeClass (kube's `plugin/pkg/admission/runtimeclass`): a new Pod naming a RuntimeClass
//! gets the class's overhead, node selector and tolerations; an overhead only the class may
//! set is checked against it.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use kapi_registry::strategy::CatalogStrategy;
use serde_json::{Map, Value};

use crate::lookup;
use crate::quantity::Quantity;

/// The plugin.
pub struct RuntimeClass {
    rest: RestStore,
}

impl RuntimeClass {
    /// The plugin over `rest`'s RuntimeClass cache.
    pub fn new(rest: RestStore) -> Self {
        RuntimeClass { rest }
    }

    /// The Pod's RuntimeClass: None when it names none; from the store when the cache does
    /// not have it (yet), as kube reads it live then.
    async fn class(&self, attrs: &Attributes) -> Result<Option<Value>, ApiError> {
        let Some(name) = attrs.object.as_ref().and_then(|p| p.pointer("/spec/runtimeClassName")).and_then(Value::as_str) else {
            return Ok(None);
        };
        let spec = lookup::spec("node.k8s.io", "v1", "runtimeclasses")?;
        if let Some(class) = lookup::get(&self.rest, spec, None, name) {
            return Ok(Some((*class).clone()));
        }
        match self.rest.get(&CatalogStrategy(spec), None, name).await {
            Ok(class) => Ok(Some(class)),
            Err(e) if e.code == 404 => Err(attrs.forbidden(&format!("pod rejected: RuntimeClass {name:?} not found"))),
            Err(e) => Err(e),
        }
    }
}

fn applies(attrs: &Attributes) -> bool {
    attrs.is_core("pods")
}

/// Resource lists equal as quantities (`1000m` is `1`), as kube's semantic equality has it.
fn same_resources(a: &Value, b: &Value) -> bool {
    let list = |v: &Value| -> Option<Vec<(String, Quantity)>> {
        v.as_object()?.iter().map(|(k, q)| Some((k.clone(), Quantity::from_json(q)?))).collect()
    };
    match (list(a), list(b)) {
        (Some(a), Some(b)) => a.len() == b.len() && a.iter().all(|(k, q)| b.iter().any(|(k2, q2)| k == k2 && q == q2)),
        _ => a == b,
    }
}

fn non_empty(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
}

fn field<'a>(t: &'a Value, name: &str) -> &'a str {
    t.get(name).and_then(Value::as_str).unwrap_or("")
}

/// Whether toleration `ss` tolerates everything `t` does (kube's `isSuperset`).
fn is_superset(ss: &Value, t: &Value) -> bool {
    if ss == t {
        return true;
    }
    if field(t, "key") != field(ss, "key") && !(field(ss, "key").is_empty() && field(ss, "operator") == "Exists") {
        return false;
    }
    if field(t, "effect") != field(ss, "effect") && !field(ss, "effect").is_empty() {
        return false;
    }
    if field(ss, "effect") == "NoExecute" {
        if let Some(limit) = ss.get("tolerationSeconds").and_then(Value::as_i64) {
            if t.get("tolerationSeconds").and_then(Value::as_i64).is_none_or(|s| s > limit) {
                return false;
            }
        }
    }
    match field(ss, "operator") {
        "Equal" | "" => field(t, "operator") == "Equal" && field(t, "value") == field(ss, "value"),
        "Exists" => true,
        _ => false,
    }
}

/// kube's `MergeTolerations`: both lists, keeping only tolerations no other one covers.
fn merge_tolerations(first: &[Value], second: &[Value]) -> Vec<Value> {
    let all: Vec<&Value> = first.iter().chain(second).collect();
    let mut merged: Vec<Value> = Vec::new();
    for (i, t) in all.iter().enumerate() {
        if merged.iter().any(|m| is_superset(m, t)) {
            continue;
        }
        if all[i + 1..].iter().any(|later| later != t && is_superset(later, t)) {
            continue;
        }
        merged.push((*t).clone());
    }
    merged
}

/// Sets the class's overhead and scheduling on the Pod.
fn apply(attrs: &Attributes, pod: &mut Value, class: &Value) -> Result<(), ApiError> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return Ok(()) };
    if let Some(fixed) = class.pointer("/overhead/podFixed") {
        if non_empty(spec.get("overhead")).is_some_and(|o| !same_resources(o, fixed)) {
            return Err(attrs.forbidden("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"));
        }
        spec.insert("overhead".into(), fixed.clone());
    }
    let Some(scheduling) = class.get("scheduling").filter(|s| s.is_object()) else { return Ok(()) };
    let wanted = scheduling.get("nodeSelector").and_then(Value::as_object).cloned().unwrap_or_default();
    match spec.get_mut("nodeSelector").and_then(Value::as_object_mut) {
        Some(selector) => {
            for (key, value) in wanted {
                if let Some(own) = selector.get(&key).filter(|own| **own != value) {
                    let (rc, pod) = (value.as_str().unwrap_or(""), own.as_str().unwrap_or(""));
                    return Err(attrs.forbidden(&format!(
                        "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {rc}; pod.spec.nodeSelector[{key}] = {pod}"
                    )));
                }
                selector.insert(key, value);
            }
        }
        None if !wanted.is_empty() => {
            spec.insert("nodeSelector".into(), Value::Object(wanted.into_iter().collect::<Map<_, _>>()));
        }
        None => {}
    }
    let own = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    let theirs = scheduling.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    let merged = merge_tolerations(&own, &theirs);
    if merged.is_empty() {
        spec.remove("tolerations");
    } else {
        spec.insert("tolerations".into(), Value::Array(merged));
    }
    Ok(())
}

#[async_trait]
impl AdmissionPlugin for RuntimeClass {
    fn name(&self) -> &'static str {
        "RuntimeClass"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !applies(attrs) {
            return Ok(());
        }
        let Some(class) = self.class(attrs).await? else { return Ok(()) };
        let mut pod = attrs.object.take().unwrap_or_default();
        let applied = apply(attrs, &mut pod, &class);
        attrs.object = Some(pod);
        applied
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !applies(attrs) {
            return Ok(());
        }
        let class = self.class(attrs).await?;
        let Some(overhead) = non_empty(attrs.object.as_ref().and_then(|p| p.pointer("/spec/overhead"))) else { return Ok(()) };
        match class.as_ref().and_then(|c| c.pointer("/overhead/podFixed")) {
            Some(fixed) if same_resources(fixed, overhead) => Ok(()),
            Some(_) => Err(attrs.forbidden("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")),
            None => Err(attrs.forbidden("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")),
        }
    }
}
