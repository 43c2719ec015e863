//! RuntimeClass through `kapi_admission::Chain` over RuntimeClasses stored in SQLite.

mod support;

use kapi_admission_builtin::RuntimeClass;
use kapi_apimachinery::StatusReason;
use serde_json::{json, Value};
use support::{create_attrs, pod, Cluster};

async fn cluster() -> Cluster {
    let c = Cluster::new(|rest| Box::new(RuntimeClass::new(rest))).await;
    let class = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "sandboxed"}, "handler": "runsc",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
        "scheduling": {"nodeSelector": {"runtime": "gvisor"}, "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]}});
    c.create("node.k8s.io", "v1", "runtimeclasses", class).await;
    c
}

fn spec(extra: Value) -> Value {
    let mut spec = json!({"runtimeClassName": "sandboxed", "containers": [{"name": "c", "image": "nginx"}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    spec
}

#[tokio::test]
async fn a_pod_gets_its_runtime_class_overhead_and_scheduling() {
    let c = cluster().await;
    let mut a = create_attrs("pods", pod("default", "p", spec(json!({"nodeSelector": {"disk": "ssd"}}))));
    c.admit(&mut a).await.0.unwrap();
    let got = a.object.unwrap()["spec"].clone();
    assert_eq!(got["overhead"], json!({"cpu": "250m", "memory": "120Mi"}));
    assert_eq!(got["nodeSelector"], json!({"disk": "ssd", "runtime": "gvisor"}));
    assert_eq!(got["tolerations"], json!([{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]));

    // A toleration of the pod's that covers the class's keeps the list as it was.
    let all = json!({"operator": "Exists"});
    let mut a = create_attrs("pods", pod("default", "p", spec(json!({"tolerations": [all.clone()]}))));
    c.admit(&mut a).await.0.unwrap();
    assert_eq!(a.object.unwrap()["spec"]["tolerations"], json!([all]));
    // The same overhead, spelled otherwise, is accepted.
    let same = spec(json!({"overhead": {"cpu": "0.25", "memory": "120Mi"}}));
    c.admit(&mut create_attrs("pods", pod("default", "p", same))).await.0.unwrap();
}

#[tokio::test]
async fn conflicts_and_unknown_classes_are_refused_with_kubes_texts() {
    let c = cluster().await;
    let refuse = |spec: Value| {
        let c = &c;
        async move { c.admit(&mut create_attrs("pods", pod("default", "p", spec))).await.0.unwrap_err() }
    };
    let err = refuse(spec(json!({"runtimeClassName": "nope"}))).await;
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(err.message, "pods \"p\" is forbidden: pod rejected: RuntimeClass \"nope\" not found");
    let err = refuse(spec(json!({"overhead": {"cpu": "1"}}))).await;
    assert_eq!(err.message, "pods \"p\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead");
    let err = refuse(spec(json!({"nodeSelector": {"runtime": "runc"}}))).await;
    assert_eq!(
        err.message,
        "pods \"p\" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[runtime] = gvisor; pod.spec.nodeSelector[runtime] = runc"
    );
    let no_class = json!({"containers": [{"name": "c", "image": "nginx"}], "overhead": {"cpu": "1"}});
    let err = refuse(no_class).await;
    assert_eq!(err.message, "pods \"p\" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead");
}
