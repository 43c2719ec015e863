//! The Node authorizer and NodeRestriction end to end, as a kubelet meets them: node-1 (user
//! `system:node:node-1` in `system:nodes`) on a server run with `--authorization-mode
//! Node,RBAC --enable-admission-plugins NodeRestriction` reads what its pods use and nothing
//! else, writes its own Node, mirror pods, pod statuses and Lease, and is refused the same
//! writes on node-2's objects with kube's messages.

use std::process::Output;
use std::time::Duration;

use kapi_e2e::{wait_for, Credential, Kapi, Request};
use serde_json::{json, Value};

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn admin_ok(kapi: &Kapi, method: &str, path: &str, body: Value) -> Value {
    let r = kapi.request(&Request::new(method, path).json(&body));
    assert!(r.status < 300, "{method} {path}: {} {}", r.status, r.raw);
    r.body
}

fn merge_patch(path: &str, body: Value) -> Request {
    Request::new("PATCH", path).raw("application/merge-patch+json", body.to_string())
}

fn forbidden(kapi: &Kapi, req: Request, message: &str) {
    let what = format!("{} {}", req.method, req.path);
    let r = kapi.request(&req);
    assert_eq!((r.status, r.reason()), (403, "Forbidden"), "{what}: {}", r.raw);
    assert_eq!(r.message(), message, "{what}");
}

struct Cluster {
    kapi: Kapi,
    node1: Credential,
    node1_uid: String,
}

/// Two nodes, namespace `apps` with two secrets, pod `web` on node-1 using secret `web-tls`
/// and pod `far` on node-2.
fn setup() -> Cluster {
    let kapi = Kapi::start_with(&["--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction"]).expect("start kapi");
    let mut node1_uid = String::new();
    for name in ["node-1", "node-2"] {
        let node = admin_ok(
            &kapi,
            "POST",
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}),
        );
        if name == "node-1" {
            node1_uid = node["metadata"]["uid"].as_str().unwrap().to_owned();
        }
    }
    admin_ok(&kapi, "POST", "/api/v1/namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}));
    for name in ["web-tls", "other"] {
        admin_ok(
            &kapi,
            "POST",
            "/api/v1/namespaces/apps/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"k": "v"}}),
        );
    }
    let sa = wait_for(Duration::from_secs(20), || {
        (kapi.request(&Request::get("/api/v1/namespaces/apps/serviceaccounts/default")).status == 200).then_some(())
    });
    assert!(sa.is_some(), "the default service account of apps never appeared");
    for (name, node) in [("web", "node-1"), ("far", "node-2")] {
        admin_ok(
            &kapi,
            "POST",
            "/api/v1/namespaces/apps/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}}, "spec": {"nodeName": node,
                "containers": [{"name": "c", "image": "nginx"}], "volumes": [{"name": "tls", "secret": {"secretName": "web-tls"}}]}}),
        );
    }
    let node1 = kapi.issue_client_cert("system:node:node-1", &["system:nodes"]);
    Cluster { kapi, node1, node1_uid }
}

#[test]
fn a_kubelet_reads_and_writes_only_what_its_node_has() {
    let Cluster { kapi, node1, node1_uid } = setup();
    let as_node = |req: Request| req.as_user(&node1);

    // Reads: the secret its pod mounts (once the graph has the pod), not another one.
    let read = wait_for(Duration::from_secs(10), || {
        (kapi.request(&as_node(Request::get("/api/v1/namespaces/apps/secrets/web-tls"))).status == 200).then_some(())
    });
    assert!(read.is_some(), "node-1 never got the secret its pod mounts");
    forbidden(
        &kapi,
        as_node(Request::get("/api/v1/namespaces/apps/secrets/other")),
        "secrets \"other\" is forbidden: User \"system:node:node-1\" cannot get resource \"secrets\" in API group \"\" in the namespace \"apps\": no relationship found between node 'node-1' and this object",
    );
    forbidden(
        &kapi,
        as_node(Request::get("/api/v1/nodes/node-2")),
        "nodes \"node-2\" is forbidden: User \"system:node:node-1\" cannot get resource \"nodes\" in API group \"\" at the cluster scope: node 'node-1' cannot read 'node-2', only its own Node object",
    );

    // kubectl with the node's kubeconfig: its Node (also listed by name), its pods by
    // spec.nodeName, its secret; all nodes are refused.
    let kubeconfig = kapi.kubeconfig_for("node-1", &node1);
    let out = kapi.kubectl_config(&kubeconfig, &["get", "node", "node-1", "-o", "name"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = kapi.kubectl_config(&kubeconfig, &["get", "nodes", "--field-selector", "metadata.name=node-1", "-o", "name"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "node/node-1", "{}", text(&out));
    let out = kapi.kubectl_config(&kubeconfig, &["get", "pods", "-A", "--field-selector", "spec.nodeName=node-1", "-o", "name"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "pod/web", "{}", text(&out));
    let out = kapi.kubectl_config(&kubeconfig, &["get", "secret", "web-tls", "-n", "apps", "-o", "name"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = kapi.kubectl_config(&kubeconfig, &["get", "nodes"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains(
            "cannot list resource \"nodes\" in API group \"\" at the cluster scope: node 'node-1' cannot read all nodes, only its own Node object"
        ),
        "{}",
        text(&out)
    );
    let out = kapi.kubectl_config(&kubeconfig, &["get", "pods", "-A"]);
    assert!(text(&out).contains("can only list/watch pods with spec.nodeName field selector"), "{}", text(&out));

    // Node status: its own, not node-2's.
    let condition = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
        "lastHeartbeatTime": "2024-01-01T00:00:00Z", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    let r = kapi.request(&as_node(merge_patch("/api/v1/nodes/node-1/status", condition.clone())));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["status"]["conditions"][0]["reason"], "KubeletReady");
    forbidden(
        &kapi,
        as_node(merge_patch("/api/v1/nodes/node-2/status", condition)),
        "nodes \"node-2\" is forbidden: node \"node-1\" is not allowed to modify node \"node-2\"",
    );

    // Labels: the kubelet's own set and other domains pass, restricted ones do not.
    let out = kapi.kubectl_config(&kubeconfig, &["label", "node", "node-1", "example.com/rack=r1", "node.kubernetes.io/pool=blue"]);
    assert!(out.status.success(), "{}", text(&out));
    forbidden(
        &kapi,
        as_node(merge_patch("/api/v1/nodes/node-1", json!({"metadata": {"labels": {"node-restriction.kubernetes.io/tier": "gold"}}}))),
        "nodes \"node-1\" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/tier",
    );
    let out = kapi.kubectl_config(&kubeconfig, &["label", "node", "node-1", "node-role.kubernetes.io/control-plane="]);
    assert!(text(&out).contains("is not allowed to modify labels: node-role.kubernetes.io/control-plane"), "{}", text(&out));
    let labels = kapi.get_json("/api/v1/nodes/node-1")["metadata"]["labels"].clone();
    assert_eq!((labels["example.com/rack"].as_str(), labels.get("node-role.kubernetes.io/control-plane")), (Some("r1"), None));

    // Mirror pods: bound to itself, owned by its Node, referring to nothing.
    let mirror = |name: &str, node: &str, volumes: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": {"kubernetes.io/config.mirror": "hash"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": node1_uid, "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}], "volumes": volumes}})
    };
    let pods = "/api/v1/namespaces/apps/pods";
    let r = kapi.request(&as_node(Request::new("POST", pods).json(&mirror("static-web-node-1", "node-1", json!([])))));
    assert_eq!(r.status, 201, "{}", r.raw);
    forbidden(
        &kapi,
        as_node(Request::new("POST", pods).json(&mirror("static-elsewhere", "node-2", json!([])))),
        "pods \"static-elsewhere\" is forbidden: node \"node-1\" can only create pods with spec.nodeName set to itself",
    );
    forbidden(
        &kapi,
        as_node(Request::new("POST", pods).json(&mirror("static-secret", "node-1", json!([{"name": "s", "secret": {"secretName": "other"}}])))),
        "pods \"static-secret\" is forbidden: node \"node-1\" can not create pods that reference secrets",
    );
    let mut stale_owner = mirror("static-stale", "node-1", json!([]));
    stale_owner["metadata"]["ownerReferences"][0]["uid"] = json!("an-old-node-uid");
    forbidden(
        &kapi,
        as_node(Request::new("POST", pods).json(&stale_owner)),
        &format!("pods \"static-stale\" is forbidden: node node-1 UID mismatch: expected an-old-node-uid got {node1_uid}"),
    );
    let mut plain = mirror("plain", "node-1", json!([]));
    plain["metadata"]["annotations"] = json!({});
    forbidden(
        &kapi,
        as_node(Request::new("POST", pods).json(&plain)),
        "pods \"plain\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"node-1\" can only create mirror pods",
    );

    // Pod status of its pods only.
    let status = json!({"status": {"phase": "Running"}});
    let r = kapi.request(&as_node(merge_patch("/api/v1/namespaces/apps/pods/web/status", status.clone())));
    assert_eq!(r.status, 200, "{}", r.raw);
    forbidden(
        &kapi,
        as_node(merge_patch("/api/v1/namespaces/apps/pods/far/status", status)),
        "pods \"far\" is forbidden: node \"node-1\" can only update pod status for pods with spec.nodeName set to itself",
    );

    // Evictions of its pods only; tokens only bound to its pods.
    let eviction = |pod: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": "apps"}});
    forbidden(
        &kapi,
        as_node(Request::new("POST", "/api/v1/namespaces/apps/pods/far/eviction").json(&eviction("far"))),
        "pods \"far\" is forbidden: node node-1 can only evict pods with spec.nodeName set to itself",
    );
    let uid = |pod: &str| kapi.get_json(&format!("/api/v1/namespaces/apps/pods/{pod}"))["metadata"]["uid"].as_str().unwrap().to_owned();
    let token = |pod: &str, uid: &str| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": [], "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}}})
    };
    let token_path = "/api/v1/namespaces/apps/serviceaccounts/default/token";
    let r = kapi.request(&as_node(Request::new("POST", token_path).json(&token("web", &uid("web")))));
    assert_eq!(r.status, 201, "{}", r.raw);
    assert!(r.body["status"]["token"].as_str().is_some_and(|t| !t.is_empty()), "{}", r.raw);
    forbidden(
        &kapi,
        as_node(Request::new("POST", token_path).json(&token("far", &uid("far")))),
        "serviceaccounts \"default\" is forbidden: node requested token bound to a pod scheduled on a different node",
    );
    forbidden(
        &kapi,
        as_node(Request::new("POST", token_path).json(&token("web", "not-the-uid"))),
        "serviceaccounts \"default\" is forbidden: the UID in the bound object reference (not-the-uid) does not match the UID in record. The object might have been deleted and then recreated",
    );

    // Deletes: its pod, not node-2's.
    forbidden(
        &kapi,
        as_node(Request::new("DELETE", "/api/v1/namespaces/apps/pods/far")),
        "pods \"far\" is forbidden: node \"node-1\" can only delete pods with spec.nodeName set to itself",
    );
    let r = kapi.request(&as_node(Request::new("DELETE", "/api/v1/namespaces/apps/pods/web")));
    assert_eq!(r.status, 200, "{}", r.raw);
    // A bound pod's deletion is graceful: until the kubelet finishes it, the pod (and the way
    // to its secret) stays.
    assert!(r.body["metadata"]["deletionTimestamp"].is_string(), "{}", r.raw);
    let r = kapi.request(&as_node(Request::get("/api/v1/namespaces/apps/secrets/web-tls")));
    assert_eq!(r.status, 200, "{}", r.raw);
    let finish = json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0});
    let r = kapi.request(&as_node(Request::new("DELETE", "/api/v1/namespaces/apps/pods/web").json(&finish)));
    assert_eq!(r.status, 200, "{}", r.raw);
    // The pod is gone: so is node-1's way to its secret.
    let revoked = wait_for(Duration::from_secs(10), || {
        (kapi.request(&as_node(Request::get("/api/v1/namespaces/apps/secrets/web-tls"))).status == 403).then_some(())
    });
    assert!(revoked.is_some(), "node-1 kept the secret of a deleted pod");

    // Its Lease in kube-node-lease.
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let lease = |name: &str| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}});
    let r = kapi.request(&as_node(Request::new("POST", leases).json(&lease("node-1"))));
    assert_eq!(r.status, 201, "{}", r.raw);
    let mut renewed = r.body.clone();
    renewed["spec"]["renewTime"] = json!("2024-01-01T00:00:10.000000Z");
    let r = kapi.request(&as_node(Request::new("PUT", &format!("{leases}/node-1")).json(&renewed)));
    assert_eq!(r.status, 200, "{}", r.raw);
    forbidden(
        &kapi,
        as_node(Request::new("POST", leases).json(&lease("node-2"))),
        "leases.coordination.k8s.io \"node-2\" is forbidden: can only access node lease with the same name as the requesting node",
    );
    forbidden(
        &kapi,
        as_node(Request::get(&format!("{leases}/node-2"))),
        "leases.coordination.k8s.io \"node-2\" is forbidden: User \"system:node:node-1\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-node-lease\": can only access node lease with the same name as the requesting node",
    );
    forbidden(
        &kapi,
        as_node(Request::new("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases").json(&lease("node-1"))),
        "leases.coordination.k8s.io is forbidden: User \"system:node:node-1\" cannot create resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"default\": can only access leases in the \"kube-node-lease\" system namespace",
    );
}

#[test]
fn users_that_are_not_nodes_are_left_to_rbac() {
    let kapi = Kapi::start_with(&["--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction"]).expect("start kapi");
    admin_ok(&kapi, "POST", "/api/v1/namespaces/default/secrets", json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}));
    // A node name without the system:nodes group is an ordinary user: RBAC alone decides.
    let impostor = kapi.issue_client_cert("system:node:node-1", &[]);
    forbidden(
        &kapi,
        Request::get("/api/v1/namespaces/default/secrets/s").as_user(&impostor),
        "secrets \"s\" is forbidden: User \"system:node:node-1\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\"",
    );
    // RBAC grants still apply to nodes for what the Node authorizer has no opinion on.
    admin_ok(
        &kapi,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "nodes-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]}),
    );
    let node = kapi.issue_client_cert("system:node:node-1", &["system:nodes"]);
    let listed = wait_for(Duration::from_secs(10), || {
        (kapi.request(&Request::get("/api/v1/namespaces/default/configmaps").as_user(&node)).status == 200).then_some(())
    });
    assert!(listed.is_some(), "RBAC did not decide after the Node authorizer's no opinion");
}
