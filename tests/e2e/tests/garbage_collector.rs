//! kube's garbage collector as kubectl users meet it (issue 16): a Deployment owning a
//! ReplicaSet owning Pods (ownerReferences made by the test, as kube's controllers would) is
//! deleted in background, foreground and orphan mode and leaves what kube leaves;
//! `kubectl delete --cascade=foreground` returns only once everything is gone; dangling
//! references are collected or dropped; a batch/v1 Job deleted without a propagation policy
//! orphans its pods (kube's default for Jobs); a custom resource's dependents are collected.

use std::path::Path;
use std::time::Duration;

use kapi_e2e::{wait_for, Kapi, OutputExt, Request};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

fn post(kapi: &Kapi, path: &str, obj: &Value) -> Value {
    let r = kapi.request(&Request::new("POST", path).json(obj));
    assert_eq!(r.status, 201, "POST {path}: {}", r.raw);
    r.body
}

fn owner_ref(owner: &Value, block: bool) -> Value {
    json!({"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": block})
}

/// An unscheduled pod (deleted at once, no kubelet to wait for) with `owners`.
fn pod(kapi: &Kapi, ns: &str, name: &str, owners: Vec<Value>, finalizers: &[&str]) -> Value {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}, "ownerReferences": owners, "finalizers": finalizers},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    post(kapi, &format!("/api/v1/namespaces/{ns}/pods"), &pod)
}

/// Deployment `web`, its ReplicaSet `web-1` and the ReplicaSet's pods `web-1-a`, `web-1-b`.
fn family(kapi: &Kapi, ns: &str) -> (Value, Value) {
    kapi.kubectl(&["create", "namespace", ns]).ok("create namespace");
    kapi.kubectl(&["create", "deployment", "web", "-n", ns, "--image=nginx"]).ok("create deployment");
    let deployment = kapi.get_json(&format!("/apis/apps/v1/namespaces/{ns}/deployments/web"));
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "ownerReferences": [owner_ref(&deployment, true)]},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let rs = post(kapi, &format!("/apis/apps/v1/namespaces/{ns}/replicasets"), &rs);
    for name in ["web-1-a", "web-1-b"] {
        pod(kapi, ns, name, vec![owner_ref(&rs, true)], &[]);
    }
    (deployment, rs)
}

fn exists(kapi: &Kapi, path: &str) -> bool {
    let r = kapi.request(&Request::get(path));
    assert!(r.status == 200 || r.status == 404, "GET {path}: {}", r.raw);
    r.status == 200
}

fn names(kapi: &Kapi, path: &str) -> Vec<String> {
    let list = kapi.get_json(path);
    list["items"].as_array().into_iter().flatten().map(|o| o["metadata"]["name"].as_str().unwrap_or_default().to_owned()).collect()
}

fn gone(kapi: &Kapi, paths: &[String]) -> bool {
    wait_for(WAIT, || paths.iter().all(|p| !exists(kapi, p)).then_some(())).is_some()
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj["metadata"]["ownerReferences"].as_array().into_iter().flatten().map(|r| r["uid"].as_str().unwrap_or_default().to_owned()).collect()
}

fn has_finalizer(obj: &Value, finalizer: &str) -> bool {
    obj["metadata"]["finalizers"].as_array().is_some_and(|f| f.iter().any(|v| v == finalizer))
}

#[test]
fn deleting_a_deployment_cascades_as_kube_does() {
    let kapi = Kapi::start().expect("start kapi");

    // (a) background: kubectl's default; the Deployment goes at once, then its dependents.
    family(&kapi, "bg");
    let out = kapi.kubectl(&["delete", "deployment", "web", "-n", "bg"]).ok("delete background");
    assert_eq!(out.trim(), "deployment.apps \"web\" deleted");
    let dependents = ["/apis/apps/v1/namespaces/bg/replicasets/web-1", "/api/v1/namespaces/bg/pods/web-1-a", "/api/v1/namespaces/bg/pods/web-1-b"];
    assert!(gone(&kapi, &dependents.map(String::from)), "background deletion left dependents");

    // (b) foreground: a pod held by a finalizer of the test's own holds the ReplicaSet and so
    // the Deployment, which kubectl waits for.
    let (_, rs) = family(&kapi, "fg");
    pod(&kapi, "fg", "web-1-held", vec![owner_ref(&rs, true)], &["e2e.kapi.dev/hold"]);
    let mut cmd = kapi.kubectl_command(Path::new("kubectl"), &["delete", "deployment", "web", "-n", "fg", "--cascade=foreground"]);
    let kubectl = std::thread::spawn(move || cmd.output().expect("run kubectl"));
    let held = wait_for(WAIT, || {
        let pods = names(&kapi, "/api/v1/namespaces/fg/pods");
        (pods == ["web-1-held"]).then_some(())
    });
    assert!(held.is_some(), "the plain pods were not deleted: {:?}", names(&kapi, "/api/v1/namespaces/fg/pods"));
    let deployment = kapi.get_json("/apis/apps/v1/namespaces/fg/deployments/web");
    assert!(deployment["metadata"]["deletionTimestamp"].is_string(), "{deployment}");
    assert!(has_finalizer(&deployment, "foregroundDeletion"), "{deployment}");
    // The ReplicaSet has dependents itself: deleted in the foreground too.
    let rs = kapi.get_json("/apis/apps/v1/namespaces/fg/replicasets/web-1");
    assert!(rs["metadata"]["deletionTimestamp"].is_string() && has_finalizer(&rs, "foregroundDeletion"), "{rs}");
    let held_pod = kapi.get_json("/api/v1/namespaces/fg/pods/web-1-held");
    assert!(held_pod["metadata"]["deletionTimestamp"].is_string(), "{held_pod}");
    std::thread::sleep(Duration::from_secs(1));
    assert!(!kubectl.is_finished(), "kubectl returned while the deployment was still held");
    kapi.kubectl(&["patch", "pod", "web-1-held", "-n", "fg", "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#])
        .ok("release pod");
    let out = kubectl.join().expect("kubectl thread");
    assert_eq!(out.ok("delete foreground").trim(), "deployment.apps \"web\" deleted");
    for path in
        ["/apis/apps/v1/namespaces/fg/deployments/web", "/apis/apps/v1/namespaces/fg/replicasets/web-1", "/api/v1/namespaces/fg/pods/web-1-held"]
    {
        assert!(!exists(&kapi, path), "{path} outlived kubectl delete --cascade=foreground");
    }
    assert_eq!(names(&kapi, "/api/v1/namespaces/fg/pods"), Vec::<String>::new());

    // (c) orphan: the Deployment goes; the ReplicaSet no longer names it; the pods keep theirs.
    let (deployment, rs) = family(&kapi, "or");
    let out = kapi.kubectl(&["delete", "deployment", "web", "-n", "or", "--cascade=orphan"]).ok("delete orphan");
    assert_eq!(out.trim(), "deployment.apps \"web\" deleted");
    assert!(!exists(&kapi, "/apis/apps/v1/namespaces/or/deployments/web"));
    std::thread::sleep(Duration::from_secs(2));
    let kept = kapi.get_json("/apis/apps/v1/namespaces/or/replicasets/web-1");
    assert!(kept["metadata"]["deletionTimestamp"].is_null(), "{kept}");
    assert!(!owner_uids(&kept).contains(&deployment["metadata"]["uid"].as_str().unwrap().to_owned()), "{kept}");
    assert!(kept["metadata"]["ownerReferences"].is_null(), "{kept}");
    for name in ["web-1-a", "web-1-b"] {
        let p = kapi.get_json(&format!("/api/v1/namespaces/or/pods/{name}"));
        assert_eq!(owner_uids(&p), [rs["metadata"]["uid"].as_str().unwrap()], "{p}");
    }
}

#[test]
fn dangling_references_defaults_and_custom_resources() {
    let kapi = Kapi::start().expect("start kapi");
    let ns = "default";

    // (d) a pod whose only owner never existed is collected; an object with a live owner and
    // a dangling one keeps the live one.
    let ghost = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "ghost", "uid": "00000000-0000-0000-0000-00000000dead", "blockOwnerDeletion": true});
    pod(&kapi, ns, "stray", vec![ghost.clone()], &[]);
    let live =
        post(&kapi, "/api/v1/namespaces/default/configmaps", &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "live-owner"}}));
    let mut live_ref = owner_ref(&live, false);
    live_ref["controller"] = json!(false);
    let both = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "two-owners", "ownerReferences": [ghost, live_ref]}});
    post(&kapi, "/api/v1/namespaces/default/configmaps", &both);
    assert!(gone(&kapi, &["/api/v1/namespaces/default/pods/stray".to_owned()]), "the pod with a dangling owner was not collected");
    let pruned = wait_for(WAIT, || {
        let cm = kapi.get_json("/api/v1/namespaces/default/configmaps/two-owners");
        (owner_uids(&cm).len() == 1).then_some(cm)
    });
    let cm = pruned.expect("the dangling reference was not removed");
    assert_eq!(owner_uids(&cm), [live["metadata"]["uid"].as_str().unwrap()], "{cm}");
    assert!(cm["metadata"]["deletionTimestamp"].is_null(), "{cm}");

    // (e) a batch/v1 Job deleted without a propagation policy orphans its pods.
    kapi.kubectl(&["create", "job", "pi", "--image=busybox"]).ok("create job");
    let job = kapi.get_json("/apis/batch/v1/namespaces/default/jobs/pi");
    pod(&kapi, ns, "pi-x", vec![owner_ref(&job, true)], &[]);
    let r = kapi.request(&Request::new("DELETE", "/apis/batch/v1/namespaces/default/jobs/pi"));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert!(has_finalizer(&r.body, "orphan"), "{}", r.raw);
    assert!(gone(&kapi, &["/apis/batch/v1/namespaces/default/jobs/pi".to_owned()]), "the job was never released");
    let p = kapi.get_json("/api/v1/namespaces/default/pods/pi-x");
    assert!(p["metadata"]["deletionTimestamp"].is_null() && p["metadata"]["ownerReferences"].is_null(), "{p}");

    // (f) a custom resource created after start owns a ConfigMap, collected in background.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.e2e.kapi.dev"},
        "spec": {"group": "e2e.kapi.dev", "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    post(&kapi, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd);
    let widget = wait_for(WAIT, || {
        let r = kapi.request(&Request::new("POST", "/apis/e2e.kapi.dev/v1/namespaces/default/widgets").json(&json!({
            "apiVersion": "e2e.kapi.dev/v1", "kind": "Widget", "metadata": {"name": "gear"}})));
        (r.status == 201).then_some(r.body)
    });
    let widget = widget.expect("widgets never served");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gear-settings", "ownerReferences": [owner_ref(&widget, true)]}});
    post(&kapi, "/api/v1/namespaces/default/configmaps", &cm);
    std::thread::sleep(Duration::from_secs(2));
    assert!(exists(&kapi, "/api/v1/namespaces/default/configmaps/gear-settings"), "a dependent of a live custom resource was collected");
    kapi.kubectl(&["delete", "widget", "gear"]).ok("delete widget");
    assert!(gone(&kapi, &["/api/v1/namespaces/default/configmaps/gear-settings".to_owned()]), "the custom resource's dependent was not collected");
    assert!(exists(&kapi, "/api/v1/namespaces/default/configmaps/live-owner"));
}

/// Two replicas on one database both run the collector: their writes race (deletes with
/// preconditions, conditional metadata edits), the outcome is kube's, and a lost race is
/// neither an error nor a retry loop in their logs.
#[test]
fn replicas_collect_side_by_side() {
    let replicas = Kapi::start_replicas(2, &[]).expect("start replicas");
    let kapi = &replicas[0];
    let (_, rs) = family(kapi, "dup");
    pod(kapi, "dup", "web-1-c", vec![owner_ref(&rs, true)], &[]);
    let out = kapi.kubectl(&["delete", "deployment", "web", "-n", "dup", "--cascade=foreground"]).ok("delete foreground");
    assert_eq!(out.trim(), "deployment.apps \"web\" deleted");
    for replica in &replicas {
        assert!(!exists(replica, "/apis/apps/v1/namespaces/dup/replicasets/web-1"));
        assert_eq!(names(replica, "/api/v1/namespaces/dup/pods"), Vec::<String>::new());
    }
    let (_, rs) = family(&replicas[1], "dup2");
    let stray = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": rs["metadata"]["uid"], "blockOwnerDeletion": true});
    let r = replicas[1].request(&Request::new("DELETE", "/apis/apps/v1/namespaces/dup2/deployments/web"));
    assert_eq!(r.status, 200, "{}", r.raw);
    pod(&replicas[1], "dup2", "late", vec![stray], &[]);
    let all = ["/apis/apps/v1/namespaces/dup2/replicasets/web-1", "/api/v1/namespaces/dup2/pods/web-1-a", "/api/v1/namespaces/dup2/pods/late"];
    assert!(gone(kapi, &all.map(String::from)), "background deletion left dependents");
    for replica in &replicas {
        let log = replica.log();
        let noisy: Vec<&str> = log.lines().filter(|l| l.contains("garbage collector") && (l.contains("WARN") || l.contains("ERROR"))).collect();
        assert!(noisy.is_empty(), "{}", noisy.join("\n"));
    }
}
