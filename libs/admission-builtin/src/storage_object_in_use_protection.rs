//! StorageObjectInUseProtection (kube's
//! `plugin/pkg/admission/storage/storageobjectinuseprotection`): new PersistentVolumes and
//! PersistentVolumeClaims carry kube's protection finalizers, so that one still in use is
//! not removed before the controller that watches its users lets it go.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use serde_json::Value;

/// The finalizer of claims.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The finalizer of volumes.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// The plugin.
#[derive(Default)]
pub struct StorageObjectInUseProtection;

impl StorageObjectInUseProtection {
    /// The plugin.
    pub fn new() -> Self {
        StorageObjectInUseProtection
    }
}

#[async_trait]
impl AdmissionPlugin for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        "StorageObjectInUseProtection"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !attrs.resource.group.is_empty() || !attrs.subresource.is_empty() {
            return Ok(());
        }
        let finalizer = match attrs.resource.name.as_str() {
            "persistentvolumeclaims" => PVC_PROTECTION,
            "persistentvolumes" => PV_PROTECTION,
            _ => return Ok(()),
        };
        let Some(meta) = attrs.object.as_mut().and_then(|o| o.get_mut("metadata")).and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let finalizers = meta.entry("finalizers").or_insert_with(|| Value::Array(Vec::new()));
        if !finalizers.is_array() {
            *finalizers = Value::Array(Vec::new());
        }
        if let Some(list) = finalizers.as_array_mut() {
            if !list.iter().any(|f| f.as_str() == Some(finalizer)) {
                list.push(Value::String(finalizer.into()));
            }
        }
        Ok(())
    }
}
