//! NodeRestriction's decisions that need no cache, with kube's messages.

use kapi_admission::attributes::Gvx;
use kapi_auth::UserInfo;
use serde_json::{json, Value};

use super::*;

fn attrs(op: Operation, (group, resource, sub): (&str, &str, &str), ns: &str, name: &str, obj: Option<Value>, old: Option<Value>) -> Attributes {
    Attributes {
        kind: Gvx::default(),
        resource: Gvx { group: group.into(), version: "v1".into(), name: resource.into() },
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        operation: op,
        options: Value::Null,
        dry_run: false,
        user: UserInfo::new("system:node:node-1", ["system:nodes"]),
        object: obj,
        old_object: old,
        reinvocation: Default::default(),
    }
}

fn node(labels: Value, taints: Value) -> Value {
    json!({"metadata": {"name": "node-1", "labels": labels}, "spec": {"taints": taints}})
}

#[test]
fn kubelet_label_rules() {
    for ok in [
        "kubernetes.io/hostname",
        "node.kubernetes.io/exclude-from-external-load-balancers",
        "x.kubelet.kubernetes.io/a",
        "example.com/rack",
        "plain",
    ] {
        assert!(kubelet_may_set_label(ok), "{ok}");
    }
    for no in [
        "node-restriction.kubernetes.io/a",
        "x.node-restriction.kubernetes.io/a",
        "node-role.kubernetes.io/master",
        "k8s.io/x",
        "a.k8s.io/x",
        "kubernetes.io/role",
    ] {
        assert!(!kubelet_may_set_label(no), "{no}");
    }
    // A domain that merely ends in the same letters is not a subdomain.
    assert!(kubelet_may_set_label("notkubernetes.io/x"));
}

#[test]
fn node_updates() {
    let old = node(json!({"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/worker": ""}), json!([]));
    let relabel = node(
        json!({"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/worker": "", "node-restriction.kubernetes.io/pool": "a", "team": "x"}),
        json!([]),
    );
    let a = attrs(Operation::Update, ("", "nodes", ""), "", "node-1", Some(relabel), Some(old.clone()));
    assert_eq!(check_node("node-1", &a), Err("is not allowed to modify labels: node-restriction.kubernetes.io/pool".into()));
    let removed = node(json!({"kubernetes.io/hostname": "n1"}), json!([]));
    let a = attrs(Operation::Update, ("", "nodes", ""), "", "node-1", Some(removed), Some(old.clone()));
    assert_eq!(check_node("node-1", &a), Err("is not allowed to modify labels: node-role.kubernetes.io/worker".into()));
    let tainted = node(json!({"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/worker": ""}), json!([{"key": "k", "effect": "NoSchedule"}]));
    let a = attrs(Operation::Update, ("", "nodes", "status"), "", "node-1", Some(tainted), Some(old.clone()));
    assert_eq!(check_node("node-1", &a), Err("node \"node-1\" is not allowed to modify taints".into()));
    let a = attrs(Operation::Update, ("", "nodes", "status"), "", "node-2", Some(old.clone()), Some(old.clone()));
    assert_eq!(check_node("node-1", &a), Err("node \"node-1\" is not allowed to modify node \"node-2\"".into()));
    let same = attrs(Operation::Update, ("", "nodes", "status"), "", "node-1", Some(old.clone()), Some(old));
    assert_eq!(check_node("node-1", &same), Ok(()));
    let create =
        attrs(Operation::Create, ("", "nodes", ""), "", "node-1", Some(node(json!({"b.k8s.io/x": "", "a.kubernetes.io/y": ""}), json!(null))), None);
    assert_eq!(
        check_node("node-1", &create),
        Err("node \"node-1\" is not allowed to set the following labels: a.kubernetes.io/y, b.k8s.io/x".into())
    );
}

#[test]
fn mirror_pods() {
    let owner = json!({"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "u1", "controller": true});
    let pod = |node: &str, owners: Value, spec: Value| {
        let mut spec = spec;
        spec["nodeName"] = json!(node);
        json!({"metadata": {"name": "static-web", "annotations": {"kubernetes.io/config.mirror": "h"}, "ownerReferences": owners}, "spec": spec})
    };
    assert_eq!(check_mirror_pod("node-1", &pod("node-1", json!([owner]), json!({}))), Ok(()));
    assert_eq!(
        check_mirror_pod("node-1", &json!({"metadata": {}, "spec": {"nodeName": "node-1"}})),
        Err("pod does not have \"kubernetes.io/config.mirror\" annotation, node \"node-1\" can only create mirror pods".into())
    );
    assert_eq!(
        check_mirror_pod("node-1", &pod("node-2", json!([owner]), json!({}))),
        Err("node \"node-1\" can only create pods with spec.nodeName set to itself".into())
    );
    assert_eq!(
        check_mirror_pod("node-1", &pod("node-1", json!([]), json!({}))),
        Err("node \"node-1\" can only create pods with an owner reference set to itself".into())
    );
    assert_eq!(
        check_mirror_pod("node-1", &pod("node-1", json!([owner, owner]), json!({}))),
        Err("node \"node-1\" can only create pods with a single owner reference set to itself".into())
    );
    let mut not_controller = owner.clone();
    not_controller["controller"] = json!(false);
    assert_eq!(
        check_mirror_pod("node-1", &pod("node-1", json!([not_controller]), json!({}))),
        Err("node \"node-1\" can only create pods with a controller owner reference set to itself".into())
    );
    let secret = pod("node-1", json!([owner]), json!({"volumes": [{"name": "s", "secret": {"secretName": "x"}}]}));
    assert_eq!(check_pod_references("node-1", &secret), Err("node \"node-1\" can not create pods that reference secrets".into()));
    let sa = pod("node-1", json!([owner]), json!({"serviceAccountName": "default"}));
    assert_eq!(check_pod_references("node-1", &sa), Err("node \"node-1\" can not create pods that reference a service account".into()));
    let cm = pod("node-1", json!([owner]), json!({"containers": [{"envFrom": [{"configMapRef": {"name": "c"}}]}]}));
    assert_eq!(check_pod_references("node-1", &cm), Err("node \"node-1\" can not create pods that reference configmaps".into()));
    let pvc = pod("node-1", json!([owner]), json!({"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]}));
    assert_eq!(check_pod_references("node-1", &pvc), Err("node \"node-1\" can not create pods that reference persistentvolumeclaims".into()));
    assert_eq!(check_pod_references("node-1", &pod("node-1", json!([owner]), json!({"containers": [{"name": "c"}]}))), Ok(()));
}

#[test]
fn pod_status_and_claim_status() {
    let old = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"nodeName": "node-1"}, "status": {}});
    let mut relabeled = old.clone();
    relabeled["metadata"]["labels"]["a"] = json!("2");
    assert_eq!(
        check_pod_status("node-1", &attrs(Operation::Update, ("", "pods", "status"), "ns", "p", Some(old.clone()), Some(old.clone()))),
        Ok(())
    );
    assert_eq!(
        check_pod_status("node-1", &attrs(Operation::Update, ("", "pods", "status"), "ns", "p", Some(relabeled), Some(old.clone()))),
        Err("node \"node-1\" cannot update labels through pod status".into())
    );
    assert_eq!(
        check_pod_status("node-2", &attrs(Operation::Update, ("", "pods", "status"), "ns", "p", Some(old.clone()), Some(old))),
        Err("node \"node-2\" can only update pod status for pods with spec.nodeName set to itself".into())
    );
    let pvc = json!({"metadata": {"resourceVersion": "1"}, "spec": {"resources": {}}, "status": {"capacity": {"storage": "1Gi"}}});
    let mut grown = pvc.clone();
    grown["status"]["capacity"]["storage"] = json!("2Gi");
    grown["metadata"]["resourceVersion"] = json!("2");
    assert_eq!(
        check_pvc_status(
            "node-1",
            &attrs(Operation::Update, ("", "persistentvolumeclaims", "status"), "ns", "c", Some(grown.clone()), Some(pvc.clone()))
        ),
        Ok(())
    );
    grown["metadata"]["labels"] = json!({"x": "y"});
    assert_eq!(
        check_pvc_status("node-1", &attrs(Operation::Update, ("", "persistentvolumeclaims", "status"), "ns", "c", Some(grown), Some(pvc))),
        Err("node \"node-1\" is not allowed to update fields other than status.capacity and status.conditions: metadata".into())
    );
}

#[test]
fn leases() {
    let lease = |ns: &str, name: &str| json!({"metadata": {"namespace": ns, "name": name}});
    let create = |ns: &str, name: &str| attrs(Operation::Create, ("coordination.k8s.io", "leases", ""), ns, "", Some(lease(ns, name)), None);
    assert_eq!(check_own_named("node-1", &create("kube-node-lease", "node-1"), "node lease"), Ok(()));
    assert_eq!(
        check_own_named("node-1", &create("kube-node-lease", "node-2"), "node lease"),
        Err("can only access node lease with the same name as the requesting node".into())
    );
    assert_eq!(
        check_own_named("node-1", &create("default", "node-1"), "node lease"),
        Err("can only access leases in the \"kube-node-lease\" system namespace".into())
    );
    let update =
        attrs(Operation::Update, ("coordination.k8s.io", "leases", ""), "kube-node-lease", "node-2", Some(lease("kube-node-lease", "node-2")), None);
    assert!(check_own_named("node-1", &update, "node lease").is_err());
}
