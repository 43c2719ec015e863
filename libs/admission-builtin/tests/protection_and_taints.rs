//! StorageObjectInUseProtection and TaintNodesByCondition through `kapi_admission::Chain`.

mod support;

use kapi_admission::{AdmissionPlugin, Operation};
use kapi_admission_builtin::{StorageObjectInUseProtection, TaintNodesByCondition};
use serde_json::{json, Value};
use support::{attrs, create_attrs, Cluster};

async fn admitted(plugin: impl AdmissionPlugin + 'static, resource: &str, obj: Value) -> Value {
    let c = Cluster::new(|_| Box::new(plugin)).await;
    let mut a = create_attrs(resource, obj);
    c.admit(&mut a).await.0.unwrap();
    a.object.unwrap()
}

#[tokio::test]
async fn claims_and_volumes_get_their_protection_finalizers() {
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default", "finalizers": ["example.com/keep"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let got = admitted(StorageObjectInUseProtection::new(), "persistentvolumeclaims", claim).await;
    assert_eq!(got["metadata"]["finalizers"], json!(["example.com/keep", "kubernetes.io/pvc-protection"]));
    let volume = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv"}}});
    let got = admitted(StorageObjectInUseProtection::new(), "persistentvolumes", volume).await;
    assert_eq!(got["metadata"]["finalizers"], json!(["kubernetes.io/pv-protection"]));
    // Already there: not twice.
    let again = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv", "finalizers": ["kubernetes.io/pv-protection"]}});
    let got = admitted(StorageObjectInUseProtection::new(), "persistentvolumes", again).await;
    assert_eq!(got["metadata"]["finalizers"], json!(["kubernetes.io/pv-protection"]));
}

#[tokio::test]
async fn new_nodes_are_tainted_not_ready() {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}});
    let got = admitted(TaintNodesByCondition::new(), "nodes", node).await;
    assert_eq!(
        got["spec"]["taints"],
        json!([{"key": "gpu", "value": "yes", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
    );
    let bare = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}});
    let got = admitted(TaintNodesByCondition::new(), "nodes", bare).await;
    assert_eq!(got["spec"]["taints"], json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]));
    // Only creation taints: a node's own updates (its kubelet's) are left as sent.
    let c = Cluster::new(|_| Box::new(TaintNodesByCondition::new())).await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}});
    let mut update = attrs(Operation::Update, ("", "v1", "nodes"), "Node", "", "n1", Some(node.clone()), Some(node));
    c.admit(&mut update).await.0.unwrap();
    assert_eq!(update.object.unwrap()["spec"], json!({}));
}
