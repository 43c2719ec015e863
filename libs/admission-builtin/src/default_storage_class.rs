//! DefaultStorageClass (kube's `plugin/pkg/admission/storage/storageclass/setdefault`): a new
//! PersistentVolumeClaim that names no class gets the default StorageClass.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use serde_json::Value;

use crate::lookup;

/// The annotations that mark a StorageClass as the default (GA and beta).
pub const DEFAULT_ANNOTATIONS: &[&str] = &["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"];

/// The plugin.
pub struct DefaultStorageClass {
    rest: RestStore,
}

impl DefaultStorageClass {
    /// The plugin over `rest`'s StorageClass cache.
    pub fn new(rest: RestStore) -> Self {
        DefaultStorageClass { rest }
    }
}

/// A claim has a class when it names one, even "" (no class at all), or carries the beta
/// annotation.
fn has_class(claim: &Value) -> bool {
    claim.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class").is_some()
        || claim.pointer("/spec/storageClassName").is_some_and(|c| !c.is_null())
}

#[async_trait]
impl AdmissionPlugin for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !(attrs.resource.group.is_empty() && attrs.resource.name == "persistentvolumeclaims" && attrs.subresource.is_empty()) {
            return Ok(());
        }
        if attrs.object.as_ref().is_none_or(has_class) {
            return Ok(());
        }
        let spec = lookup::spec("storage.k8s.io", "v1", "storageclasses")?;
        let classes = lookup::list(&self.rest, spec, None);
        let Some(default) = lookup::newest_marked(&classes, DEFAULT_ANNOTATIONS) else { return Ok(()) };
        if let Some(spec) = attrs.object.as_mut().and_then(|c| c.get_mut("spec")).and_then(Value::as_object_mut) {
            spec.insert("storageClassName".into(), Value::String(default));
        }
        Ok(())
    }
}
