//! PersistentVolumeClaimResize (kube's `plugin/pkg/admission/storage/persistentvolume/resize`):
//! a claim may only grow once bound, and only when its StorageClass allows expansion.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use serde_json::Value;

use crate::lookup;
use crate::quantity::Quantity;

/// The plugin.
pub struct PersistentVolumeClaimResize {
    rest: RestStore,
}

impl PersistentVolumeClaimResize {
    /// The plugin over `rest`'s StorageClass cache.
    pub fn new(rest: RestStore) -> Self {
        PersistentVolumeClaimResize { rest }
    }

    /// kube's `allowResize`: both versions name the same class, and it allows expansion.
    fn allowed(&self, claim: &Value, old: &Value) -> Result<bool, ApiError> {
        let (class, old_class) = (class_of(claim), class_of(old));
        if class.is_empty() || class != old_class {
            return Ok(false);
        }
        let spec = lookup::spec("storage.k8s.io", "v1", "storageclasses")?;
        Ok(lookup::get(&self.rest, spec, None, class).and_then(|sc| sc.get("allowVolumeExpansion").and_then(Value::as_bool)).unwrap_or(false))
    }
}

/// kube's `GetPersistentVolumeClaimClass`: the beta annotation wins over the field.
fn class_of(claim: &Value) -> &str {
    match claim.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class").and_then(Value::as_str) {
        Some(class) => class,
        None => lookup::str_at(claim, "/spec/storageClassName"),
    }
}

fn storage(claim: &Value) -> Quantity {
    claim.pointer("/spec/resources/requests/storage").and_then(Quantity::from_json).unwrap_or(Quantity::ZERO)
}

#[async_trait]
impl AdmissionPlugin for PersistentVolumeClaimResize {
    fn name(&self) -> &'static str {
        "PersistentVolumeClaimResize"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Update
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !(attrs.resource.group.is_empty() && attrs.resource.name == "persistentvolumeclaims" && attrs.subresource.is_empty()) {
            return Ok(());
        }
        let (Some(claim), Some(old)) = (attrs.object.as_ref(), attrs.old_object.as_ref()) else { return Ok(()) };
        if storage(claim).compare(&storage(old)) != std::cmp::Ordering::Greater {
            return Ok(());
        }
        if lookup::str_at(old, "/status/phase") != "Bound" {
            return Err(attrs.forbidden("Only bound persistent volume claims can be expanded"));
        }
        if !self.allowed(claim, old)? {
            return Err(attrs.forbidden(
                "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
            ));
        }
        Ok(())
    }
}
