//! PersistentVolumeClaimResize through `kapi_admission::Chain` over StorageClasses in SQLite.

mod support;

use kapi_admission::Operation;
use kapi_admission_builtin::PersistentVolumeClaimResize;
use kapi_apimachinery::StatusReason;
use serde_json::{json, Value};
use support::{attrs, Cluster};

fn claim(class: &str, storage: &str, phase: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}},
        "status": {"phase": phase}})
}

#[tokio::test]
async fn only_bound_claims_of_expandable_classes_grow() {
    let c = Cluster::new(|rest| Box::new(PersistentVolumeClaimResize::new(rest))).await;
    for (name, expand) in [("grows", true), ("fixed", false)] {
        let sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "example.com/disk", "allowVolumeExpansion": expand});
        c.create("storage.k8s.io", "v1", "storageclasses", sc).await;
    }
    let update = |new: Value, old: Value| attrs(Operation::Update, ("", "v1", "persistentvolumeclaims"), "PersistentVolumeClaim", "default", "data", Some(new), Some(old));

    c.admit(&mut update(claim("grows", "2Gi", "Bound"), claim("grows", "1Gi", "Bound"))).await.0.unwrap();
    // Shrinking or keeping the size is not this plugin's concern.
    c.admit(&mut update(claim("fixed", "1024Mi", "Bound"), claim("fixed", "1Gi", "Bound"))).await.0.unwrap();

    let err = c.admit(&mut update(claim("fixed", "2Gi", "Bound"), claim("fixed", "1Gi", "Bound"))).await.0.unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(
        err.message,
        "persistentvolumeclaims \"data\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
    );
    let err = c.admit(&mut update(claim("grows", "2Gi", "Pending"), claim("grows", "1Gi", "Pending"))).await.0.unwrap_err();
    assert_eq!(err.message, "persistentvolumeclaims \"data\" is forbidden: Only bound persistent volume claims can be expanded");
    let err = c.admit(&mut update(claim("missing", "2Gi", "Bound"), claim("missing", "1Gi", "Bound"))).await.0.unwrap_err();
    assert_eq!(err.code, 403);
}
