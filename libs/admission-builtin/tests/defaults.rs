//! DefaultTolerationSeconds, DefaultStorageClass and DefaultIngressClass through
//! `kapi_admission::Chain`, classes stored in SQLite.

mod support;

use kapi_admission::Operation;
use kapi_admission_builtin::{DefaultIngressClass, DefaultStorageClass, DefaultTolerationSeconds};
use serde_json::{json, Value};
use support::{attrs, create_attrs, pod, Cluster};

async fn tolerations_after(spec: Value) -> Value {
    let c = Cluster::new(|_| Box::new(DefaultTolerationSeconds::new())).await;
    let mut a = create_attrs("pods", pod("default", "p", spec));
    c.admit(&mut a).await.0.unwrap();
    a.object.unwrap()["spec"]["tolerations"].clone()
}

fn containers() -> Value {
    json!([{"name": "c", "image": "nginx"}])
}

#[tokio::test]
async fn pods_tolerate_not_ready_and_unreachable_nodes_for_300_seconds() {
    assert_eq!(
        tolerations_after(json!({"containers": containers()})).await,
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );
    // A toleration of its own for one of them is kept, and only the other is added.
    let own = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60});
    assert_eq!(
        tolerations_after(json!({"containers": containers(), "tolerations": [own.clone()]})).await,
        json!([own, {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}])
    );
    // Tolerating everything covers both.
    let all = json!({"operator": "Exists"});
    assert_eq!(tolerations_after(json!({"containers": containers(), "tolerations": [all.clone()]})).await, json!([all]));
}

fn claim(extra: Value) -> Value {
    let mut c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    if let (Some(spec), Some(extra)) = (c["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    c
}

fn storage_class(name: &str, default: bool) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "example.com/disk",
        "metadata": {"name": name, "annotations": {"storageclass.kubernetes.io/is-default-class": default.to_string()}}})
}

#[tokio::test]
async fn claims_without_a_class_get_the_default_storage_class() {
    let c = Cluster::new(|rest| Box::new(DefaultStorageClass::new(rest))).await;
    let class_of = |claim: Value| {
        let c = &c;
        async move {
            let mut a = create_attrs("persistentvolumeclaims", claim);
            c.admit(&mut a).await.0.unwrap();
            a.object.unwrap()["spec"].get("storageClassName").cloned()
        }
    };
    // No default yet: nothing set.
    assert_eq!(class_of(claim(json!({}))).await, None);
    c.create("storage.k8s.io", "v1", "storageclasses", storage_class("slow", false)).await;
    c.create("storage.k8s.io", "v1", "storageclasses", storage_class("zeta", true)).await;
    assert_eq!(class_of(claim(json!({}))).await, Some(json!("zeta")));
    // Several defaults: the newest, then the first name (kube's order); "" means no class.
    c.create("storage.k8s.io", "v1", "storageclasses", storage_class("alpha", true)).await;
    assert_eq!(class_of(claim(json!({}))).await, Some(json!("alpha")));
    assert_eq!(class_of(claim(json!({"storageClassName": ""}))).await, Some(json!("")));
    assert_eq!(class_of(claim(json!({"storageClassName": "slow"}))).await, Some(json!("slow")));
    // Updates are not defaulted.
    let old = claim(json!({}));
    let mut update = attrs(Operation::Update, ("", "v1", "persistentvolumeclaims"), "PersistentVolumeClaim", "default", "data", Some(old.clone()), Some(old));
    c.admit(&mut update).await.0.unwrap();
    assert!(update.object.unwrap()["spec"].get("storageClassName").is_none());
}

#[tokio::test]
async fn ingresses_without_a_class_get_the_default_ingress_class() {
    let c = Cluster::new(|rest| Box::new(DefaultIngressClass::new(rest))).await;
    let class = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "nginx", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}}, "spec": {"controller": "example.com/nginx"}});
    c.create("networking.k8s.io", "v1", "ingressclasses", class).await;
    let ingress = |meta: Value, spec: Value| {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta,
            "spec": spec})
    };
    let backend = json!({"service": {"name": "web", "port": {"number": 80}}});
    let mut a = create_attrs("ingresses", ingress(json!({"name": "i", "namespace": "default"}), json!({"defaultBackend": backend})));
    c.admit(&mut a).await.0.unwrap();
    assert_eq!(a.object.unwrap()["spec"]["ingressClassName"], "nginx");
    // The older annotation is a choice too.
    let meta = json!({"name": "i", "namespace": "default", "annotations": {"kubernetes.io/ingress.class": "other"}});
    let mut a = create_attrs("ingresses", ingress(meta, json!({"defaultBackend": backend})));
    c.admit(&mut a).await.0.unwrap();
    assert!(a.object.unwrap()["spec"].get("ingressClassName").is_none());
}
