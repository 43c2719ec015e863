//! Priority through `kapi_admission::Chain` over PriorityClasses stored in SQLite.

mod support;

use kapi_admission::Operation;
use kapi_admission_builtin::Priority;
use kapi_apimachinery::StatusReason;
use serde_json::{json, Value};
use support::{attrs, create_attrs, pod, Cluster};

async fn cluster() -> Cluster {
    Cluster::new(|rest| Box::new(Priority::new(rest))).await
}

fn class(name: &str, value: i64, extra: Value) -> Value {
    let mut pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value});
    if let (Some(pc), Some(extra)) = (pc.as_object_mut(), extra.as_object()) {
        pc.extend(extra.clone());
    }
    pc
}

async fn admitted(c: &Cluster, spec: Value) -> Value {
    let mut a = create_attrs("pods", pod("default", "p", spec));
    c.admit(&mut a).await.0.unwrap();
    a.object.unwrap()["spec"].clone()
}

fn containers() -> Value {
    json!([{"name": "c", "image": "nginx"}])
}

#[tokio::test]
async fn a_pod_gets_its_class_value_and_preemption_policy() {
    let c = cluster().await;
    // Without any class, kube's default: priority 0 and PreemptLowerPriority, no class name.
    let spec = admitted(&c, json!({"containers": containers()})).await;
    assert_eq!((spec["priority"].clone(), spec["preemptionPolicy"].clone()), (json!(0), json!("PreemptLowerPriority")));
    assert!(spec.get("priorityClassName").is_none(), "{spec}");

    c.create("scheduling.k8s.io", "v1", "priorityclasses", class("high", 1000, json!({"preemptionPolicy": "Never"}))).await;
    let spec = admitted(&c, json!({"containers": containers(), "priorityClassName": "high"})).await;
    assert_eq!((spec["priority"].clone(), spec["preemptionPolicy"].clone()), (json!(1000), json!("Never")));

    // The system classes resolve before their objects exist.
    let spec = admitted(&c, json!({"containers": containers(), "priorityClassName": "system-node-critical"})).await;
    assert_eq!(spec["priority"], 2_000_001_000);
    let spec = admitted(&c, json!({"containers": containers(), "priorityClassName": "system-cluster-critical"})).await;
    assert_eq!(spec["priority"], 2_000_000_000);

    // A matching priority may be given; it is checked, not trusted.
    let spec = admitted(&c, json!({"containers": containers(), "priorityClassName": "high", "priority": 1000})).await;
    assert_eq!(spec["priority"], 1000);
}

#[tokio::test]
async fn the_global_default_class_applies_to_pods_without_one() {
    let c = cluster().await;
    c.create("scheduling.k8s.io", "v1", "priorityclasses", class("low", 100, json!({"globalDefault": true}))).await;
    let spec = admitted(&c, json!({"containers": containers()})).await;
    assert_eq!(spec["priorityClassName"], "low");
    assert_eq!((spec["priority"].clone(), spec["preemptionPolicy"].clone()), (json!(100), json!("PreemptLowerPriority")));

    // A second default is refused; the default itself may be updated.
    let other = class("other", 5, json!({"globalDefault": true}));
    let err = c.admit(&mut create_attrs("priorityclasses", other)).await.0.unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(
        err.message,
        "priorityclasses.scheduling.k8s.io \"other\" is forbidden: PriorityClass low is already marked as default. Only one default can exist"
    );
    let low = class("low", 100, json!({"globalDefault": true, "description": "x"}));
    let gvr = ("scheduling.k8s.io", "v1", "priorityclasses");
    let mut update = attrs(Operation::Update, gvr, "PriorityClass", "", "low", Some(low.clone()), Some(low));
    c.admit(&mut update).await.0.unwrap();
    let not_default = class("plain", 1, json!({}));
    c.admit(&mut create_attrs("priorityclasses", not_default)).await.0.unwrap();
}

#[tokio::test]
async fn unknown_classes_and_disagreeing_values_are_refused_with_kubes_texts() {
    let c = cluster().await;
    c.create("scheduling.k8s.io", "v1", "priorityclasses", class("high", 1000, json!({}))).await;
    let refuse = |spec: Value| {
        let c = &c;
        async move { c.admit(&mut create_attrs("pods", pod("default", "p", spec))).await.0.unwrap_err() }
    };
    let err = refuse(json!({"containers": containers(), "priorityClassName": "nope"})).await;
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(err.message, "pods \"p\" is forbidden: no PriorityClass with name nope was found");

    let err = refuse(json!({"containers": containers(), "priorityClassName": "high", "priority": 5})).await;
    assert_eq!(
        err.message,
        "pods \"p\" is forbidden: the integer value of priority (5) must not be provided in pod spec; \
         priority admission controller computed 1000 from the given PriorityClass name"
    );
    let err = refuse(json!({"containers": containers(), "priorityClassName": "high", "preemptionPolicy": "Never"})).await;
    assert_eq!(
        err.message,
        "pods \"p\" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; \
         priority admission controller computed PreemptLowerPriority from the given PriorityClass name"
    );
}

#[tokio::test]
async fn updates_keep_what_creation_set() {
    let c = cluster().await;
    let old = pod("default", "p", json!({"containers": containers(), "priority": 7, "preemptionPolicy": "Never"}));
    let new = pod("default", "p", json!({"containers": containers()}));
    let mut update = attrs(Operation::Update, ("", "v1", "pods"), "Pod", "default", "p", Some(new), Some(old));
    c.admit(&mut update).await.0.unwrap();
    let spec = &update.object.as_ref().unwrap()["spec"];
    assert_eq!((spec["priority"].clone(), spec["preemptionPolicy"].clone()), (json!(7), json!("Never")));
}
