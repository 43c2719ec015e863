//! AlwaysPullImages (kube's `plugin/pkg/admission/alwayspullimages`): every container of a new
//! Pod, or of an update that brings a new image, pulls its image at each start, so that only
//! those with the registry's credentials run a private image a node has already pulled. The
//! validating half refuses a Pod a later mutation set back to another policy.

use std::collections::HashSet;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::{ApiError, Cause};
use serde_json::Value;

/// The plugin.
#[derive(Default)]
pub struct AlwaysPullImages;

impl AlwaysPullImages {
    /// The plugin.
    pub fn new() -> Self {
        AlwaysPullImages
    }
}

/// kube's `VisitContainersWithPath` order: init containers, containers, ephemeral containers,
/// each with its field path.
pub(crate) fn container_paths(pod: &Value) -> Vec<(String, &'static str, usize)> {
    let mut out = Vec::new();
    for (list, path) in
        [("initContainers", "spec.initContainers"), ("containers", "spec.containers"), ("ephemeralContainers", "spec.ephemeralContainers")]
    {
        let n = pod.pointer(&format!("/spec/{list}")).and_then(Value::as_array).map_or(0, Vec::len);
        for i in 0..n {
            let shown = if list == "ephemeralContainers" { format!("{path}[{i}].ephemeralContainerCommon") } else { format!("{path}[{i}]") };
            out.push((shown, list_key(list), i));
        }
    }
    out
}

fn list_key(list: &str) -> &'static str {
    match list {
        "initContainers" => "initContainers",
        "containers" => "containers",
        _ => "ephemeralContainers",
    }
}

fn images(pod: &Value) -> HashSet<String> {
    container_paths(pod)
        .iter()
        .filter_map(|(_, list, i)| pod.pointer(&format!("/spec/{list}/{i}/image")).and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// Not a pod, a subresource, or an update that brings no new image.
fn ignored(attrs: &Attributes) -> bool {
    if !attrs.is_core("pods") {
        return true;
    }
    match (attrs.operation, attrs.object.as_ref(), attrs.old_object.as_ref()) {
        (Operation::Update, Some(new), Some(old)) => images(new).is_subset(&images(old)),
        _ => false,
    }
}

#[async_trait]
impl AdmissionPlugin for AlwaysPullImages {
    fn name(&self) -> &'static str {
        "AlwaysPullImages"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if ignored(attrs) {
            return Ok(());
        }
        let Some(pod) = attrs.object.as_mut() else { return Ok(()) };
        for (_, list, i) in container_paths(pod) {
            if let Some(c) = pod.pointer_mut(&format!("/spec/{list}/{i}")).and_then(Value::as_object_mut) {
                c.insert("imagePullPolicy".into(), Value::String("Always".into()));
            }
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if ignored(attrs) {
            return Ok(());
        }
        let Some(pod) = attrs.object.as_ref() else { return Ok(()) };
        for (path, list, i) in container_paths(pod) {
            let policy = pod.pointer(&format!("/spec/{list}/{i}/imagePullPolicy")).cloned().unwrap_or(Value::String(String::new()));
            if policy.as_str() != Some("Always") {
                let cause = Cause::not_supported(&format!("{path}.imagePullPolicy"), &policy, &["Always"]);
                return Err(attrs.forbidden(&cause.message));
            }
        }
        Ok(())
    }
}
