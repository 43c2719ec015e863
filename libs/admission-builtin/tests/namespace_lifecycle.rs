//! NamespaceLifecycle through `kapi_admission::Chain` over namespaces stored in SQLite.

mod support;

use kapi_admission::Operation;
use kapi_admission_builtin::NamespaceLifecycle;
use kapi_apimachinery::StatusReason;
use serde_json::json;
use support::{attrs, create_attrs, Cluster};

async fn cluster() -> Cluster {
    Cluster::new(|rest| Box::new(NamespaceLifecycle::new(rest))).await
}

fn configmap(ns: &str, name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}})
}

/// A namespace held by a finalizer stays Terminating once deleted.
async fn terminating(c: &Cluster, name: &str) {
    c.create("", "v1", "namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "finalizers": ["e2e.kapi/hold"]}}))
        .await;
    let deleted = c.delete("", "v1", "namespaces", None, name).await;
    assert_eq!(deleted["status"]["phase"], "Terminating", "{deleted}");
}

#[tokio::test]
async fn creates_in_a_terminating_namespace_are_refused_as_kube_refuses_them() {
    let c = cluster().await;
    terminating(&c, "going").await;
    let (r, _) = c.admit(&mut create_attrs("configmaps", configmap("going", "cm"))).await;
    let err = r.unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(err.message, "configmaps \"cm\" is forbidden: unable to create new content in namespace going because it is being terminated");
    let details = err.details.unwrap();
    assert_eq!((details.name.as_str(), details.group.as_str(), details.kind.as_str()), ("cm", "", "configmaps"));
    assert_eq!(details.causes.len(), 1);
    let cause = &details.causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.message.as_str(), cause.field.as_str()),
        ("NamespaceTerminating", "namespace going is being terminated", "metadata.namespace")
    );

    // generateName stands for the name, as kube's admission.NewForbidden takes it.
    let mut generated = configmap("going", "");
    generated["metadata"] = json!({"generateName": "cm-", "namespace": "going"});
    let err = c.admit(&mut create_attrs("configmaps", generated)).await.0.unwrap_err();
    assert!(err.message.starts_with("configmaps \"cm-\" is forbidden: unable to create"), "{}", err.message);

    // Updates and deletes of what is inside still go through, so that cleanup can run.
    let cm = configmap("going", "cm");
    for op in [Operation::Update, Operation::Delete] {
        let mut a = attrs(op, ("", "v1", "configmaps"), "ConfigMap", "going", "cm", Some(cm.clone()), Some(cm.clone()));
        assert!(c.admit(&mut a).await.0.is_ok(), "{op:?}");
    }
}

#[tokio::test]
async fn creates_in_a_missing_namespace_are_not_found() {
    let c = cluster().await;
    let err = c.admit(&mut create_attrs("configmaps", configmap("nowhere", "cm"))).await.0.unwrap_err();
    assert_eq!((err.code, err.reason), (404, StatusReason::NotFound));
    assert_eq!(err.message, "namespaces \"nowhere\" not found");
    let details = err.details.unwrap();
    assert_eq!((details.name.as_str(), details.kind.as_str()), ("nowhere", "namespaces"));

    // An active namespace admits; so does a namespace the cache has not caught up with,
    // since the plugin then reads the store.
    c.namespace("here").await;
    assert!(c.admit(&mut create_attrs("configmaps", configmap("here", "cm"))).await.0.is_ok());
}

#[tokio::test]
async fn access_reviews_and_cluster_scoped_objects_are_exempt() {
    let c = cluster().await;
    terminating(&c, "going").await;
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
        "metadata": {"namespace": "nowhere"}, "spec": {"user": "u", "resourceAttributes": {"verb": "get"}}});
    assert!(c.admit(&mut create_attrs("localsubjectaccessreviews", review)).await.0.is_ok(), "no namespace is revealed");
    let pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, "value": 1});
    assert!(c.admit(&mut create_attrs("priorityclasses", pc)).await.0.is_ok());
    // A namespace itself may be written whatever its state.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "going"}});
    let mut update = attrs(Operation::Update, ("", "v1", "namespaces"), "Namespace", "", "going", Some(ns.clone()), Some(ns));
    assert!(c.admit(&mut update).await.0.is_ok());
}

#[tokio::test]
async fn the_systems_namespaces_cannot_be_deleted() {
    let c = cluster().await;
    for name in ["default", "kube-system", "kube-public"] {
        let mut a = attrs(Operation::Delete, ("", "v1", "namespaces"), "Namespace", "", name, None, None);
        let err = c.admit(&mut a).await.0.unwrap_err();
        assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
        assert_eq!(err.message, format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"));
    }
    let mut other = attrs(Operation::Delete, ("", "v1", "namespaces"), "Namespace", "", "kube-node-lease", None, None);
    assert!(c.admit(&mut other).await.0.is_ok(), "kube-node-lease is not immortal");
}

#[tokio::test]
async fn a_namespace_this_replica_deleted_is_read_from_the_store() {
    let c = cluster().await;
    c.create("", "v1", "namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "soon", "finalizers": ["e2e.kapi/hold"]}}))
        .await;
    // Admission of the delete comes first; the store then marks the namespace Terminating.
    let mut delete = attrs(Operation::Delete, ("", "v1", "namespaces"), "Namespace", "", "soon", None, None);
    assert!(c.admit(&mut delete).await.0.is_ok());
    let spec = kapi_registry::catalog::find("", "v1", "namespaces").unwrap();
    let strategy = kapi_registry::strategy::CatalogStrategy(spec);
    c.rest.delete(&strategy, None, "soon", &Default::default()).await.unwrap();
    // Not waiting for the cache: the plugin reads the store for a namespace it saw deleted,
    // so the create is refused whether or not the cache shows Terminating yet.
    let err = c.admit(&mut create_attrs("configmaps", configmap("soon", "cm"))).await.0.unwrap_err();
    assert_eq!(err.code, 403, "{}", err.message);
}
