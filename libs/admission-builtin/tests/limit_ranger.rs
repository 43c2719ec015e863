//! LimitRanger through `kapi_admission::Chain` over LimitRanges stored in SQLite.

mod support;

use kapi_admission::Operation;
use kapi_admission_builtin::LimitRanger;
use kapi_apimachinery::StatusReason;
use serde_json::{json, Value};
use support::{attrs, create_attrs, pod, Cluster};

async fn cluster(limits: Value) -> Cluster {
    let c = Cluster::new(|rest| Box::new(LimitRanger::new(rest))).await;
    let lr = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": "default"}, "spec": {"limits": limits}});
    c.create("", "v1", "limitranges", lr).await;
    c
}

fn container(name: &str, resources: Value) -> Value {
    json!({"name": name, "image": "nginx", "resources": resources})
}

#[tokio::test]
async fn containers_and_init_containers_get_the_defaults_they_lack() {
    // No defaultRequest for memory: kube's LimitRange defaults take it from the default limit.
    let c = cluster(json!([{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}}])).await;
    let spec = json!({
        "containers": [container("a", json!({})), container("b", json!({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}))],
        "initContainers": [container("init", json!({}))],
    });
    let mut a = create_attrs("pods", pod("default", "p", spec));
    let (r, _) = c.admit(&mut a).await;
    r.unwrap();
    let pod = a.object.unwrap();
    let containers = &pod["spec"]["containers"];
    assert_eq!(containers[0]["resources"], json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}));
    assert_eq!(containers[1]["resources"], json!({"limits": {"cpu": "1", "memory": "256Mi"}, "requests": {"cpu": "1", "memory": "256Mi"}}));
    assert_eq!(pod["spec"]["initContainers"][0]["resources"], containers[0]["resources"]);
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container a; cpu, memory limit for container a; \
         memory request for container b; memory limit for container b; \
         cpu, memory request for init container init; cpu, memory limit for init container init"
    );
}

#[tokio::test]
async fn a_container_over_the_max_is_refused_with_every_reason() {
    // max alone also defaults the limit and request, as kube's LimitRange defaults do
    let c = cluster(json!([{"type": "Container", "max": {"cpu": "2", "memory": "1Gi"}}])).await;
    let spec = json!({"containers": [container("c", json!({"limits": {"cpu": "3", "memory": "2048Mi"}, "requests": {"cpu": "3000m", "memory": "1Gi"}}))]});
    let (r, _) = c.admit(&mut create_attrs("pods", pod("default", "p", spec))).await;
    let err = r.unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(
        err.message,
        "pods \"p\" is forbidden: [maximum cpu usage per Container is 2, but limit is 3, maximum memory usage per Container is 1Gi, but limit is 2Gi]"
    );

    // A pod without resources gets the max as its limit and request, which pass.
    let mut bare = create_attrs("pods", pod("default", "q", json!({"containers": [container("c", json!({}))]})));
    c.admit(&mut bare).await.0.unwrap();
    assert_eq!(bare.object.unwrap()["spec"]["containers"][0]["resources"]["limits"], json!({"cpu": "2", "memory": "1Gi"}));
}

#[tokio::test]
async fn min_and_ratio_use_kubes_texts() {
    let c = cluster(json!([{"type": "Container", "min": {"memory": "64Mi"}, "maxLimitRequestRatio": {"cpu": "2"}}])).await;
    let spec = json!({"containers": [container("c", json!({"requests": {"cpu": "1", "memory": "32Mi"}, "limits": {"cpu": "3", "memory": "128Mi"}}))]});
    let err = c.admit(&mut create_attrs("pods", pod("default", "p", spec))).await.0.unwrap_err();
    assert_eq!(
        err.message,
        "pods \"p\" is forbidden: [minimum memory usage per Container is 64Mi, but request is 32Mi, \
         cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000]"
    );
    // One reason: no brackets.
    let spec = json!({"containers": [container("c", json!({"requests": {"cpu": "300m", "memory": "64Mi"}, "limits": {"cpu": "1"}}))]});
    let err = c.admit(&mut create_attrs("pods", pod("default", "p", spec))).await.0.unwrap_err();
    assert_eq!(err.message, "pods \"p\" is forbidden: cpu max limit to request ratio per Container is 2, but provided ratio is 3.333333");
}

#[tokio::test]
async fn pod_limits_count_every_container() {
    let c = cluster(json!([{"type": "Pod", "max": {"cpu": "2"}}])).await;
    let both = |cpu: &str| json!({"requests": {"cpu": cpu}, "limits": {"cpu": cpu}});
    let spec = json!({"containers": [container("a", both("1500m")), container("b", both("1500m"))], "initContainers": [container("i", both("2"))]});
    let err = c.admit(&mut create_attrs("pods", pod("default", "p", spec))).await.0.unwrap_err();
    assert_eq!(err.message, "pods \"p\" is forbidden: maximum cpu usage per Pod is 2, but limit is 3");
    // An init container runs alone: 2 fits, and so do two containers of 1.
    let spec = json!({"containers": [container("a", both("1")), container("b", both("1"))], "initContainers": [container("i", both("2"))]});
    c.admit(&mut create_attrs("pods", pod("default", "p", spec))).await.0.unwrap();
    // A sidecar adds to the containers.
    let mut sidecar = container("s", both("500m"));
    sidecar["restartPolicy"] = json!("Always");
    let spec = json!({"containers": [container("a", both("1")), container("b", both("1"))], "initContainers": [sidecar]});
    let err = c.admit(&mut create_attrs("pods", pod("default", "p", spec))).await.0.unwrap_err();
    assert!(err.message.contains("maximum cpu usage per Pod is 2, but limit is 2500m"), "{}", err.message);
}

fn claim(name: &str, storage: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}})
}

#[tokio::test]
async fn claims_are_bounded_by_their_requests() {
    let c = cluster(json!([{"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}])).await;
    let err = c.admit(&mut create_attrs("persistentvolumeclaims", claim("big", "20Gi"))).await.0.unwrap_err();
    assert_eq!(err.message, "persistentvolumeclaims \"big\" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi");
    let err = c.admit(&mut create_attrs("persistentvolumeclaims", claim("small", "500Mi"))).await.0.unwrap_err();
    assert_eq!(err.message, "persistentvolumeclaims \"small\" is forbidden: minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi");
    c.admit(&mut create_attrs("persistentvolumeclaims", claim("ok", "5Gi"))).await.0.unwrap();

    // An update leaving a stored request as it is passes even if a newer range refuses it
    // (`20480Mi` is the same value); one that changes it is checked.
    let gvr = ("", "v1", "persistentvolumeclaims");
    let mut unchanged = attrs(Operation::Update, gvr, "PersistentVolumeClaim", "default", "big", Some(claim("big", "20480Mi")), Some(claim("big", "20Gi")));
    c.admit(&mut unchanged).await.0.unwrap();
    let mut grown = attrs(Operation::Update, gvr, "PersistentVolumeClaim", "default", "big", Some(claim("big", "30Gi")), Some(claim("big", "20Gi")));
    assert_eq!(grown.operation, Operation::Update);
    assert_eq!(c.admit(&mut grown).await.0.unwrap_err().code, 403);
}

#[tokio::test]
async fn pod_updates_and_other_namespaces_are_left_alone() {
    let c = cluster(json!([{"type": "Container", "max": {"cpu": "1"}}])).await;
    c.namespace("free").await;
    let big = json!({"containers": [container("c", json!({"requests": {"cpu": "4"}, "limits": {"cpu": "4"}}))]});
    c.admit(&mut create_attrs("pods", pod("free", "p", big.clone()))).await.0.unwrap();
    let old = pod("default", "p", big.clone());
    let mut update = attrs(Operation::Update, ("", "v1", "pods"), "Pod", "default", "p", Some(old.clone()), Some(old));
    c.admit(&mut update).await.0.unwrap();
    // Status and other subresources are not looked at either.
    let mut status = create_attrs("pods", pod("default", "p", big));
    status.subresource = "status".into();
    c.admit(&mut status).await.0.unwrap();
}
