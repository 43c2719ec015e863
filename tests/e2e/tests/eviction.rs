//! `pods/eviction` and PodDisruptionBudgets (issue 16, "Done when" 5): the in-process
//! disruption controller keeps a budget's status, an eviction the budget allows deletes the pod
//! and takes a disruption, one it does not is refused 429 with kube's message and cause (and
//! `kubectl drain` reports it and retries), pods that already caused their disruption go
//! regardless, and bad requests change nothing.

use std::time::Duration;

use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::{json, Value};

const NS: &str = "ev";

fn post(kapi: &Kapi, path: &str, body: &Value) -> kapi_e2e::HttpResponse {
    kapi.request(&Request::new("POST", path).json(body))
}

/// A pod of the ReplicaSet `web` on `node`, Running and Ready when `ready`.
fn pod(kapi: &Kapi, name: &str, rs_uid: &str, node: Option<&str>, ready: bool) {
    let mut spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs_uid, "controller": true}]},
        "spec": spec});
    let r = post(kapi, &format!("/api/v1/namespaces/{NS}/pods"), &body);
    assert_eq!(r.status, 201, "{}", r.raw);
    if ready {
        let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
        let r = kapi.request(
            &Request::new("PATCH", &format!("/api/v1/namespaces/{NS}/pods/{name}/status")).raw("application/merge-patch+json", status.to_string()),
        );
        assert_eq!(r.status, 200, "{}", r.raw);
    }
}

fn eviction(name: &str, delete_options: Value) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}, "deleteOptions": delete_options})
}

fn evict(kapi: &Kapi, name: &str, delete_options: Value) -> kapi_e2e::HttpResponse {
    post(kapi, &format!("/api/v1/namespaces/{NS}/pods/{name}/eviction"), &eviction(name, delete_options))
}

fn budget_status(kapi: &Kapi) -> Value {
    kapi.get_json(&format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web"))["status"].clone()
}

fn exists(kapi: &Kapi, pod: &str) -> bool {
    kapi.request(&Request::get(&format!("/api/v1/namespaces/{NS}/pods/{pod}"))).status == 200
}

#[test]
fn evictions_honour_pod_disruption_budgets() {
    let kapi = Kapi::start().expect("start kapi");
    assert_eq!(post(&kapi, "/api/v1/namespaces", &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).status, 201);
    assert_eq!(post(&kapi, "/api/v1/nodes", &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})).status, 201);
    let rs = post(
        &kapi,
        &format!("/apis/apps/v1/namespaces/{NS}/replicasets"),
        &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"}, "spec": {"replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    );
    assert_eq!(rs.status, 201, "{}", rs.raw);
    let rs_uid = rs.body["metadata"]["uid"].as_str().unwrap().to_owned();
    for i in 0..3 {
        pod(&kapi, &format!("web-{i}"), &rs_uid, Some("node-1"), true);
    }
    let pdb = post(
        &kapi,
        &format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"),
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}),
    );
    assert_eq!(pdb.status, 201, "{}", pdb.raw);

    // The disruption controller's numbers.
    let status = wait_for(Duration::from_secs(10), || {
        let s = budget_status(&kapi);
        (s["observedGeneration"] == 1 && s["currentHealthy"] == 3).then_some(s)
    })
    .expect("the budget's status is computed");
    assert_eq!(
        (status["desiredHealthy"].clone(), status["expectedPods"].clone(), status["disruptionsAllowed"].clone()),
        (json!(2), json!(3), json!(1))
    );
    assert_eq!(status["conditions"][0]["type"], "DisruptionAllowed");
    assert_eq!((status["conditions"][0]["status"].clone(), status["conditions"][0]["reason"].clone()), (json!("True"), json!("SufficientPods")));

    // Bad requests change nothing.
    let mismatch = post(&kapi, &format!("/api/v1/namespaces/{NS}/pods/web-0/eviction"), &eviction("web-1", json!({})));
    assert_eq!(mismatch.status, 400, "{}", mismatch.raw);
    assert_eq!(mismatch.message(), "name in URL does not match name in Eviction object");
    // A dry run is allowed and takes nothing.
    let dry = evict(&kapi, "web-0", json!({"dryRun": ["All"]}));
    assert_eq!(dry.status, 201, "{}", dry.raw);
    assert!(exists(&kapi, "web-0"));
    assert_eq!(budget_status(&kapi)["disruptionsAllowed"], 1);

    // The budget allows one: the pod goes, the disruption is taken.
    let allowed = evict(&kapi, "web-0", json!({"gracePeriodSeconds": 0}));
    assert_eq!(allowed.status, 201, "{}", allowed.raw);
    assert_eq!(allowed.body["status"], "Success");
    assert!(!exists(&kapi, "web-0"));
    wait_for(Duration::from_secs(10), || (budget_status(&kapi)["currentHealthy"] == 2).then_some(())).expect("the controller sees the pod gone");
    let status = budget_status(&kapi);
    assert_eq!(status["disruptionsAllowed"], 0);
    assert_eq!((status["conditions"][0]["status"].clone(), status["conditions"][0]["reason"].clone()), (json!("False"), json!("InsufficientPods")));

    // The next is refused with kube's 429, and nothing happens to the pod.
    let refused = evict(&kapi, "web-1", json!({}));
    assert_eq!(refused.status, 429, "{}", refused.raw);
    assert_eq!(refused.reason(), "TooManyRequests");
    assert_eq!(refused.message(), "Cannot evict pod as it would violate the pod's disruption budget.");
    assert_eq!(
        refused.body["details"]["causes"],
        json!([{"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}])
    );
    assert!(exists(&kapi, "web-1"));

    // kubectl drain cordons the node, is refused the same way, retries, and gives up at its timeout.
    let drain = kapi.kubectl(&["drain", "node-1", "--timeout=4s", "--grace-period=0"]);
    assert!(!drain.status.success());
    let said = format!("{}{}", String::from_utf8_lossy(&drain.stdout), String::from_utf8_lossy(&drain.stderr));
    assert!(said.contains("Cannot evict pod as it would violate the pod's disruption budget."), "{said}");
    assert!(exists(&kapi, "web-1") && exists(&kapi, "web-2"));
    assert_eq!(kapi.get_json("/api/v1/nodes/node-1")["spec"]["unschedulable"], true);

    // A pod that is not running yet caused no disruption: it goes whatever the budget says.
    pod(&kapi, "web-pending", &rs_uid, None, false);
    let pending = evict(&kapi, "web-pending", json!({}));
    assert_eq!(pending.status, 201, "{}", pending.raw);
    assert!(!exists(&kapi, "web-pending"));

    // Two budgets selecting one pod: kube's 500.
    let second = post(
        &kapi,
        &format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets"),
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web-too"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    );
    assert_eq!(second.status, 201, "{}", second.raw);
    let two = evict(&kapi, "web-1", json!({}));
    assert_eq!(two.status, 500, "{}", two.raw);
    assert_eq!(two.message(), "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.");
    assert!(exists(&kapi, "web-1"));
    // maxUnavailable counts the ReplicaSet's scale: 3 expected, 2 desired.
    let other = wait_for(Duration::from_secs(10), || {
        let s = kapi.get_json(&format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/web-too"))["status"].clone();
        (s["observedGeneration"] == 1).then_some(s)
    })
    .expect("the second budget's status");
    assert_eq!((other["expectedPods"].clone(), other["desiredHealthy"].clone()), (json!(3), json!(2)));
}
