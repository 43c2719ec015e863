//! kube's namespace controller as kubectl users meet it (issue 16): a deleted namespace has its
//! content removed (built-in kinds and custom resources), its deletion conditions set with
//! kube's reasons and messages, the `kubernetes` finalizer removed through
//! `namespaces/{name}/finalize`, and disappears once nothing holds it; an object with its own
//! finalizer keeps the namespace Terminating with `NamespaceFinalizersRemaining` until the
//! finalizer goes.

use std::path::PathBuf;
use std::time::Duration;

use kapi_e2e::{wait_for, Kapi, OutputExt, Request};
use serde_json::{json, Value};

/// Writes `obj` as a manifest kubectl can read.
fn manifest(dir: &tempfile::TempDir, name: &str, obj: &Value) -> PathBuf {
    let path = dir.path().join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(obj).unwrap()).unwrap();
    path
}

fn create(kapi: &Kapi, dir: &tempfile::TempDir, name: &str, obj: &Value) {
    kapi.kubectl(&["create", "-f", manifest(dir, name, obj).to_str().unwrap()]).ok(&format!("create {name}"));
}

/// Names of the objects of the cluster-wide list at `path` that live in `ns`.
fn names_in(kapi: &Kapi, path: &str, ns: &str) -> Vec<String> {
    let list = kapi.get_json(path);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["metadata"]["namespace"] == ns)
        .map(|o| o["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn condition(ns: &Value, ty: &str) -> Value {
    let found = ns["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == ty).cloned();
    let Some(mut c) = found else { return Value::Null };
    assert!(c["lastTransitionTime"].is_string(), "{c}");
    c.as_object_mut().unwrap().remove("lastTransitionTime");
    c
}

/// kube's conditions of a namespace whose content is all gone.
fn all_clear() -> Vec<Value> {
    vec![
        json!({"type": "NamespaceDeletionDiscoveryFailure", "status": "False", "reason": "ResourcesDiscovered", "message": "All resources successfully discovered"}),
        json!({"type": "NamespaceDeletionGroupVersionParsingFailure", "status": "False", "reason": "ParsedGroupVersions", "message": "All legacy kube types successfully parsed"}),
        json!({"type": "NamespaceDeletionContentFailure", "status": "False", "reason": "ContentDeleted", "message": "All content successfully deleted, may be waiting on finalization"}),
        json!({"type": "NamespaceContentRemaining", "status": "False", "reason": "ContentRemoved", "message": "All content successfully removed"}),
        json!({"type": "NamespaceFinalizersRemaining", "status": "False", "reason": "ContentRemoved", "message": "All content successfully removed"}),
    ]
}

fn conditions(ns: &Value) -> Vec<Value> {
    all_clear().iter().map(|c| condition(ns, c["type"].as_str().unwrap())).collect()
}

const WIDGET_CRD: &str = "widgets.e2e.kapi.dev";

fn install_widgets(kapi: &Kapi, dir: &tempfile::TempDir) {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": WIDGET_CRD},
        "spec": {"group": "e2e.kapi.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    create(kapi, dir, "crd", &crd);
    let established = wait_for(Duration::from_secs(10), || {
        let crd = kapi.get_json(&format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{WIDGET_CRD}"));
        crd["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Established" && c["status"] == "True").then_some(())
    });
    assert!(established.is_some(), "{WIDGET_CRD} not Established");
}

#[test]
fn deleting_a_namespace_removes_its_content_then_the_namespace() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();
    install_widgets(&kapi, &dir);
    // A finalizer of the test's own holds the namespace object once the controller is done,
    // so that its conditions and spec can be read before it goes.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed", "finalizers": ["e2e.kapi/hold"]}});
    create(&kapi, &dir, "ns", &ns);
    kapi.kubectl(&["create", "configmap", "settings", "-n", "doomed", "--from-literal=k=v"]).ok("create configmap");
    kapi.kubectl(&["create", "secret", "generic", "token", "-n", "doomed", "--from-literal=k=v"]).ok("create secret");
    kapi.kubectl(&["create", "deployment", "web", "-n", "doomed", "--image=nginx"]).ok("create deployment");
    let widget = json!({"apiVersion": "e2e.kapi.dev/v1", "kind": "Widget", "metadata": {"name": "gear", "namespace": "doomed"}, "size": 3});
    create(&kapi, &dir, "widget", &widget);
    // Something in another namespace stays.
    kapi.kubectl(&["create", "configmap", "bystander", "-n", "default", "--from-literal=k=v"]).ok("create bystander");

    let lists = ["/api/v1/configmaps", "/api/v1/secrets", "/apis/apps/v1/deployments", "/apis/e2e.kapi.dev/v1/widgets", "/api/v1/serviceaccounts"];
    assert!(names_in(&kapi, "/api/v1/configmaps", "doomed").contains(&"settings".to_owned()));
    kapi.kubectl(&["delete", "namespace", "doomed", "--wait=false"]).ok("delete namespace");
    let phase = kapi.kubectl(&["get", "namespace", "doomed", "-o", "jsonpath={.status.phase}"]).ok("get namespace");
    assert_eq!(phase, "Terminating");

    // kube's controller removes the content, then the `kubernetes` finalizer.
    let done = wait_for(Duration::from_secs(30), || {
        let ns = kapi.get_json("/api/v1/namespaces/doomed");
        (ns["spec"]["finalizers"].as_array().is_some_and(Vec::is_empty) || ns["spec"]["finalizers"].is_null()).then_some(ns)
    });
    let ns = done.expect("the namespace controller never removed the kubernetes finalizer");
    for path in lists {
        assert_eq!(names_in(&kapi, path, "doomed"), Vec::<String>::new(), "{path}");
    }
    assert_eq!(conditions(&ns), all_clear(), "{ns}");
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(names_in(&kapi, "/api/v1/configmaps", "default").contains(&"bystander".to_owned()));

    // Once the last finalizer goes, so does the namespace.
    kapi.kubectl(&["patch", "namespace", "doomed", "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#]).ok("release namespace");
    let (ok, _, stderr) = kapi.kubectl(&["get", "namespace", "doomed"]).outcome();
    assert!(!ok);
    assert!(stderr.contains("Error from server (NotFound): namespaces \"doomed\" not found"), "{stderr}");
}

#[test]
fn an_object_with_a_finalizer_keeps_its_namespace_terminating() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pinned", "finalizers": ["e2e.kapi/hold"]}});
    create(&kapi, &dir, "ns", &ns);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep", "namespace": "pinned", "finalizers": ["e2e.kapi/pin"]}});
    create(&kapi, &dir, "cm", &cm);
    kapi.kubectl(&["delete", "namespace", "pinned", "--wait=false"]).ok("delete namespace");

    let held = wait_for(Duration::from_secs(30), || {
        let ns = kapi.get_json("/api/v1/namespaces/pinned");
        (condition(&ns, "NamespaceFinalizersRemaining")["status"] == "True").then_some(ns)
    });
    let ns = held.expect("no NamespaceFinalizersRemaining condition");
    assert_eq!(
        condition(&ns, "NamespaceFinalizersRemaining"),
        json!({"type": "NamespaceFinalizersRemaining", "status": "True", "reason": "SomeFinalizerRemain",
            "message": "Some finalizers are remaining: e2e.kapi/pin in 1 resource instances"})
    );
    assert_eq!(
        condition(&ns, "NamespaceContentRemaining"),
        json!({"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain",
            "message": "Some resources are remaining: configmaps. has 1 resource instances"})
    );
    assert_eq!(
        condition(&ns, "NamespaceDeletionContentFailure"),
        json!({"type": "NamespaceDeletionContentFailure", "status": "False", "reason": "ContentDeleted",
            "message": "All content successfully deleted, may be waiting on finalization"})
    );
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(ns["status"]["phase"], "Terminating");
    // The held object is marked for deletion; everything else is gone.
    assert_eq!(names_in(&kapi, "/api/v1/configmaps", "pinned"), vec!["keep".to_owned()]);
    let keep = kapi.get_json("/api/v1/namespaces/pinned/configmaps/keep");
    assert!(keep["metadata"]["deletionTimestamp"].is_string(), "{keep}");
    assert_eq!(names_in(&kapi, "/api/v1/serviceaccounts", "pinned"), Vec::<String>::new());

    // The finalizer goes; the controller then finishes.
    kapi.kubectl(&["patch", "configmap", "keep", "-n", "pinned", "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#])
        .ok("release configmap");
    let finished = wait_for(Duration::from_secs(30), || {
        let ns = kapi.get_json("/api/v1/namespaces/pinned");
        (ns["spec"]["finalizers"].as_array().is_some_and(Vec::is_empty) || ns["spec"]["finalizers"].is_null()).then_some(ns)
    });
    let ns = finished.expect("the namespace controller never finished");
    assert_eq!(conditions(&ns), all_clear(), "{ns}");
    kapi.kubectl(&["patch", "namespace", "pinned", "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#]).ok("release namespace");
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/pinned")).status, 404);
}

#[test]
fn the_finalize_subresource_keeps_the_status() {
    let kapi = Kapi::start().expect("start kapi");
    kapi.kubectl(&["create", "namespace", "fin"]).ok("create namespace");
    let mut ns = kapi.get_json("/api/v1/namespaces/fin");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    ns["spec"]["finalizers"] = json!(["kubernetes", "e2e.kapi/extra"]);
    ns["metadata"]["labels"] = json!({"team": "a"});
    ns["status"]["phase"] = json!("Terminating");
    let r = kapi.request(&Request::new("PUT", "/api/v1/namespaces/fin/finalize").json(&ns));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["spec"]["finalizers"], json!(["kubernetes", "e2e.kapi/extra"]));
    let stored = kapi.get_json("/api/v1/namespaces/fin");
    assert_eq!(stored["spec"]["finalizers"], json!(["kubernetes", "e2e.kapi/extra"]));
    assert_eq!(stored["status"]["phase"], "Active");
    // kube's finalize strategy resets the status only.
    assert_eq!(stored["metadata"]["labels"]["team"], "a", "{stored}");

    // A stale resourceVersion conflicts; a bad finalizer name is invalid, as on create.
    let r = kapi.request(&Request::new("PUT", "/api/v1/namespaces/fin/finalize").json(&ns));
    assert_eq!(r.status, 409, "{}", r.raw);
    let mut bad = stored.clone();
    bad["spec"]["finalizers"] = json!(["plain"]);
    let r = kapi.request(&Request::new("PUT", "/api/v1/namespaces/fin/finalize").json(&bad));
    assert_eq!(r.status, 422, "{}", r.raw);
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec.finalizers[0]", "{}", r.raw);
}

/// kube's plain flow: `kubectl delete namespace` waits until the namespace is gone, and its
/// content went first (the store keeps a namespace while its `spec.finalizers` hold it).
#[test]
fn kubectl_delete_namespace_waits_for_its_content_to_go() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();
    install_widgets(&kapi, &dir);
    kapi.kubectl(&["create", "namespace", "plain"]).ok("create namespace");
    kapi.kubectl(&["create", "configmap", "settings", "-n", "plain", "--from-literal=k=v"]).ok("create configmap");
    kapi.kubectl(&["create", "secret", "generic", "token", "-n", "plain", "--from-literal=k=v"]).ok("create secret");
    kapi.kubectl(&["create", "deployment", "web", "-n", "plain", "--image=nginx"]).ok("create deployment");
    let widget = json!({"apiVersion": "e2e.kapi.dev/v1", "kind": "Widget", "metadata": {"name": "gear", "namespace": "plain"}});
    create(&kapi, &dir, "widget", &widget);
    let out = kapi.kubectl(&["delete", "namespace", "plain"]).ok("delete namespace");
    assert_eq!(out.trim(), "namespace \"plain\" deleted");
    let (ok, _, stderr) = kapi.kubectl(&["get", "namespace", "plain"]).outcome();
    assert!(!ok && stderr.contains("Error from server (NotFound): namespaces \"plain\" not found"), "{stderr}");
    for path in ["/api/v1/configmaps", "/api/v1/secrets", "/apis/apps/v1/deployments", "/apis/e2e.kapi.dev/v1/widgets", "/api/v1/serviceaccounts"] {
        assert_eq!(names_in(&kapi, path, "plain"), Vec::<String>::new(), "{path}");
    }
}
