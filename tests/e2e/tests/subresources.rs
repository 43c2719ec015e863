//! Subresources over raw HTTP: pods/binding, status and scale (autoscaling/v1 Scale) for
//! replication controllers, as kube-apiserver serves them.

use kapi_e2e::{Kapi, Request};
use serde_json::json;

const PODS: &str = "/api/v1/namespaces/default/pods";

fn post(kapi: &Kapi, path: &str, body: serde_json::Value) -> kapi_e2e::HttpResponse {
    kapi.request(&Request::new("POST", path).json(&body))
}

#[test]
fn pod_binding_sets_the_node_once() {
    let kapi = Kapi::start().expect("start kapi");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(post(&kapi, PODS, pod).status, 201);
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
                         "metadata": {"name": "p", "annotations": {"scheduled-by": "e2e"}},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
    let r = post(&kapi, &format!("{PODS}/p/binding"), binding.clone());
    assert_eq!(r.status, 201, "binding: {}", r.raw);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["status"], "Success");
    let pod = kapi.get_json(&format!("{PODS}/p"));
    assert_eq!(pod["spec"]["nodeName"], "node-1");
    assert_eq!(pod["metadata"]["annotations"]["scheduled-by"], "e2e");
    let scheduled = pod["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "PodScheduled");
    assert_eq!(scheduled.map(|c| c["status"].clone()), Some(json!("True")), "{pod}");
    // A bound pod cannot be bound again.
    let again = post(&kapi, &format!("{PODS}/p/binding"), binding);
    assert_eq!(again.status, 409, "{}", again.raw);
    assert_eq!(again.reason(), "Conflict");
    // A plain pod update still may not change nodeName.
    let mut changed = kapi.get_json(&format!("{PODS}/p"));
    changed["spec"]["nodeName"] = json!("node-2");
    let r = kapi.request(&Request::new("PUT", &format!("{PODS}/p")).json(&changed));
    assert_eq!(r.status, 422, "{}", r.raw);
}

#[test]
fn replication_controller_status_and_scale() {
    let kapi = Kapi::start().expect("start kapi");
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
                    "spec": {"replicas": 1, "selector": {"app": "x"},
                             "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
                    "status": {"replicas": 7}});
    let created = post(&kapi, rcs, rc);
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!(created.body["status"]["replicas"], json!(0), "status in a create body is ignored: {}", created.raw);

    // The status subresource changes status only.
    let mut st = created.body.clone();
    st["status"] = json!({"replicas": 1, "readyReplicas": 1});
    st["spec"]["replicas"] = json!(9);
    let r = kapi.request(&Request::new("PUT", &format!("{rcs}/rc/status")).json(&st));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!((r.body["status"]["readyReplicas"].clone(), r.body["spec"]["replicas"].clone()), (json!(1), json!(1)));

    // Scale: an autoscaling/v1 Scale with the selector as a string.
    let scale = kapi.get_json(&format!("{rcs}/rc/scale"));
    assert_eq!((scale["apiVersion"].clone(), scale["kind"].clone()), (json!("autoscaling/v1"), json!("Scale")));
    assert_eq!(scale["status"]["selector"], "app=x");
    let mut bigger = scale.clone();
    bigger["spec"]["replicas"] = json!(4);
    let r = kapi.request(&Request::new("PUT", &format!("{rcs}/rc/scale")).json(&bigger));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(kapi.get_json(&format!("{rcs}/rc"))["spec"]["replicas"], json!(4));
    // A stale Scale resourceVersion conflicts like any update.
    let r = kapi.request(&Request::new("PUT", &format!("{rcs}/rc/scale")).json(&bigger));
    assert_eq!(r.status, 409, "{}", r.raw);
}
