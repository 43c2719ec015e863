//! kube's built-in admission plugins as kubectl users meet them: NamespaceLifecycle (no
//! content in a terminating or missing namespace, the system namespaces undeletable),
//! LimitRanger defaults and refusals, Priority values and unknown classes (issue 16).

use std::path::PathBuf;

use kapi_e2e::{Kapi, OutputExt, Request};
use serde_json::{json, Value};

/// Writes `obj` as a manifest kubectl can read.
fn manifest(dir: &tempfile::TempDir, name: &str, obj: &Value) -> PathBuf {
    let path = dir.path().join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(obj).unwrap()).unwrap();
    path
}

fn refused(kapi: &Kapi, args: &[&str]) -> String {
    let (ok, stdout, stderr) = kapi.kubectl(args).outcome();
    assert!(!ok, "kubectl {} succeeded: {stdout}", args.join(" "));
    stderr
}

#[test]
fn namespaces_that_terminate_or_do_not_exist_take_no_new_content() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();
    // A finalizer nobody removes keeps the namespace Terminating once deleted.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "going", "finalizers": ["e2e.kapi/hold"]}});
    kapi.kubectl(&["create", "-f", manifest(&dir, "ns", &ns).to_str().unwrap()]).ok("create namespace");
    kapi.kubectl(&["create", "configmap", "before", "-n", "going", "--from-literal=k=v"]).ok("create while active");
    kapi.kubectl(&["delete", "namespace", "going", "--wait=false"]).ok("delete namespace");
    let phase = kapi.kubectl(&["get", "namespace", "going", "-o", "jsonpath={.status.phase}"]).ok("get namespace");
    assert_eq!(phase, "Terminating");

    let stderr = refused(&kapi, &["create", "configmap", "after", "-n", "going", "--from-literal=k=v"]);
    // kubectl's generators print their own prefix before the server's message.
    assert!(
        stderr.contains(
            "error: failed to create configmap: configmaps \"after\" is forbidden: unable to create new content in namespace going because it is being terminated"
        ),
        "{stderr}"
    );
    // The Status as kube writes it: reason, details and the NamespaceTerminating cause.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}});
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/going/configmaps").json(&cm));
    assert_eq!(r.status, 403, "{}", r.raw);
    assert_eq!(r.body["reason"], "Forbidden");
    assert_eq!(
        r.body["details"],
        json!({"name": "after", "kind": "configmaps",
            "causes": [{"reason": "NamespaceTerminating", "message": "namespace going is being terminated", "field": "metadata.namespace"}]}),
        "{}",
        r.raw
    );
    // What is inside may still be changed and removed, so that cleanup can finish.
    kapi.kubectl(&["label", "configmap", "before", "-n", "going", "cleanup=yes"]).ok("label in a terminating namespace");
    kapi.kubectl(&["delete", "configmap", "before", "-n", "going"]).ok("delete in a terminating namespace");

    let stderr = refused(&kapi, &["create", "configmap", "x", "-n", "nowhere", "--from-literal=k=v"]);
    assert!(stderr.contains("error: failed to create configmap: namespaces \"nowhere\" not found"), "{stderr}");
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/nowhere/configmaps").json(&cm));
    assert_eq!((r.status, r.body["reason"].as_str()), (404, Some("NotFound")), "{}", r.raw);
    assert_eq!(r.body["details"], json!({"name": "nowhere", "kind": "namespaces"}), "{}", r.raw);

    for name in ["default", "kube-system", "kube-public"] {
        let stderr = refused(&kapi, &["delete", "namespace", name]);
        assert!(
            stderr.contains(&format!("Error from server (Forbidden): namespaces \"{name}\" is forbidden: this namespace may not be deleted")),
            "{stderr}"
        );
    }
    let phase = kapi.kubectl(&["get", "namespace", "default", "-o", "jsonpath={.status.phase}"]).ok("get default");
    assert_eq!(phase, "Active");
}

fn container(name: &str, resources: Value) -> Value {
    json!({"name": name, "image": "nginx", "resources": resources})
}

#[test]
fn created_pods_carry_limit_range_defaults_and_their_priority() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();
    let limits = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": "default"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"},
            "max": {"cpu": "2", "memory": "1Gi"}}]}});
    let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"},
        "value": 1000, "preemptionPolicy": "Never", "description": "batch work"});
    for (name, obj) in [("limits", &limits), ("class", &class)] {
        kapi.kubectl(&["create", "-f", manifest(&dir, name, obj).to_str().unwrap()]).ok(name);
    }

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"priorityClassName": "batch", "containers": [container("app", json!({})), container("side", json!({"limits": {"cpu": "1"}}))]}});
    kapi.kubectl(&["create", "-f", manifest(&dir, "web", &pod).to_str().unwrap()]).ok("create pod");
    let got: Value = serde_json::from_str(&kapi.kubectl(&["get", "pod", "web", "-o", "json"]).ok("get pod")).unwrap();
    let spec = &got["spec"];
    assert_eq!(spec["containers"][0]["resources"], json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}));
    // kube's Pod defaults copy the given limit to the request before LimitRanger runs.
    assert_eq!(spec["containers"][1]["resources"], json!({"limits": {"cpu": "1", "memory": "256Mi"}, "requests": {"cpu": "1", "memory": "256Mi"}}));
    assert_eq!(
        got["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app; \
         memory request for container side; memory limit for container side"
    );
    assert_eq!((spec["priorityClassName"].clone(), spec["priority"].clone(), spec["preemptionPolicy"].clone()), (json!("batch"), json!(1000), json!("Never")));

    // Without a class: kube's priority 0; a system class resolves by name.
    kapi.kubectl(&["run", "plain", "--image=nginx"]).ok("run plain");
    let plain: Value = serde_json::from_str(&kapi.kubectl(&["get", "pod", "plain", "-o", "json"]).ok("get plain")).unwrap();
    assert_eq!((plain["spec"]["priority"].clone(), plain["spec"]["preemptionPolicy"].clone()), (json!(0), json!("PreemptLowerPriority")));
    let critical = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "critical", "namespace": "default"},
        "spec": {"priorityClassName": "system-cluster-critical", "containers": [container("c", json!({}))]}});
    kapi.kubectl(&["create", "-f", manifest(&dir, "critical", &critical).to_str().unwrap()]).ok("create critical");
    let priority = kapi.kubectl(&["get", "pod", "critical", "-o", "jsonpath={.spec.priority}"]).ok("get critical");
    assert_eq!(priority, "2000000000");

    // Over the max: refused with every reason, nothing stored.
    let big = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "default"},
        "spec": {"containers": [container("c", json!({"limits": {"cpu": "3", "memory": "2Gi"}}))]}});
    let path = manifest(&dir, "big", &big);
    let stderr = refused(&kapi, &["create", "-f", path.to_str().unwrap()]);
    assert!(
        stderr.contains(
            "pods \"big\" is forbidden: [maximum cpu usage per Container is 2, but limit is 3, maximum memory usage per Container is 1Gi, but limit is 2Gi]"
        ),
        "{stderr}"
    );
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/default/pods/big")).status, 404);
}

#[test]
fn a_pod_naming_an_unknown_priority_class_is_refused() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lost", "namespace": "default"},
        "spec": {"priorityClassName": "nope", "containers": [container("c", json!({}))]}});
    let path = manifest(&dir, "lost", &pod);
    let stderr = refused(&kapi, &["create", "-f", path.to_str().unwrap()]);
    assert!(
        stderr.contains("Error from server (Forbidden): error when creating")
            && stderr.contains("pods \"lost\" is forbidden: no PriorityClass with name nope was found"),
        "{stderr}"
    );
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/default/pods").json(&pod));
    assert_eq!((r.status, r.body["reason"].as_str()), (403, Some("Forbidden")), "{}", r.raw);
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/default/pods/lost")).status, 404);
}
