//! `metadata` fields kube's `ObjectMeta` omits when empty (issue 25, point 7's class): labels,
//! annotations, finalizers, ownerReferences, managedFields and empty strings are neither stored
//! nor answered, whatever the write (create, update, merge patch, server-side apply, status)
//! and for custom resources too (kube round-trips their `metadata` through `ObjectMeta`).
//! A client-side re-apply of an object with `labels: {}` is then a no-op write. Built-in kinds
//! go further: their whole body goes through kube's Go structs, so every `omitempty` field is
//! dropped when empty and nil fields without it are answered as `null`.

use std::time::Duration;

use kapi_e2e::{wait_for, Kapi, OutputExt, Request};
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const GADGETS: &str = "/apis/example.com/v1/namespaces/default/gadgets";

/// What a client sends for "nothing" in each omitempty field of `metadata`.
fn empty_meta(name: &str) -> Value {
    json!({"name": name, "generateName": "", "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": []})
}

/// The keys of an answer's `metadata`, sorted.
fn meta_keys(obj: &Value) -> Vec<String> {
    let mut keys: Vec<String> = obj["metadata"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    keys.sort();
    keys
}

/// What kube answers in `metadata` for an object written with [`empty_meta`].
fn expected_keys(namespaced: bool) -> Vec<String> {
    let mut keys = vec!["creationTimestamp", "managedFields", "name", "resourceVersion", "uid"];
    if namespaced {
        keys.push("namespace");
    }
    keys.sort();
    keys.into_iter().map(str::to_owned).collect()
}

fn ok(r: kapi_e2e::HttpResponse, what: &str) -> Value {
    assert!(r.status == 200 || r.status == 201, "{what}: {} {}", r.status, r.raw);
    r.body
}

#[test]
fn empty_metadata_fields_are_dropped_on_every_write() {
    let kapi = Kapi::start().expect("start kapi");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": empty_meta("e"), "data": {"a": "1"}});
    let created = ok(kapi.request(&Request::new("POST", CMS).json(&cm)), "create");
    assert_eq!(meta_keys(&created), expected_keys(true), "create: {created}");
    // Stored as answered.
    assert_eq!(meta_keys(&kapi.get_json(&format!("{CMS}/e"))), expected_keys(true));

    let mut put = cm.clone();
    put["data"]["a"] = json!("2");
    let updated = ok(kapi.request(&Request::new("PUT", &format!("{CMS}/e")).json(&put)), "update");
    assert_eq!(meta_keys(&updated), expected_keys(true), "update: {updated}");
    assert_eq!(updated["data"], json!({"a": "2"}));

    let patch = json!({"metadata": {"annotations": {}, "labels": {}, "finalizers": []}, "data": {"a": "3"}});
    let patched = ok(
        kapi.request(&Request::new("PATCH", &format!("{CMS}/e")).raw("application/merge-patch+json", patch.to_string())),
        "merge patch",
    );
    assert_eq!(meta_keys(&patched), expected_keys(true), "merge patch: {patched}");

    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "labels": {}, "annotations": {}}, "data": {"a": "1"}});
    let applied = ok(
        kapi.request(
            &Request::new("PATCH", &format!("{CMS}/s?fieldManager=test")).raw("application/apply-patch+yaml", applied.to_string()),
        ),
        "apply",
    );
    assert_eq!(meta_keys(&applied), expected_keys(true), "apply: {applied}");

    // A status write through a built-in kind's status subresource.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": empty_meta("empty-meta")});
    let created = ok(kapi.request(&Request::new("POST", "/api/v1/namespaces").json(&ns)), "namespace");
    assert!(meta_keys(&created).contains(&"labels".to_owned()), "namespaces get kube's name label: {created}");
    let mut status = created.clone();
    status["metadata"]["annotations"] = json!({});
    status["metadata"]["finalizers"] = json!([]);
    let updated = ok(kapi.request(&Request::new("PUT", "/api/v1/namespaces/empty-meta/status").json(&status)), "status");
    assert!(updated["metadata"].get("annotations").is_none() && updated["metadata"].get("finalizers").is_none(), "status: {updated}");
}

#[test]
fn custom_resources_drop_empty_metadata_fields_too() {
    let kapi = Kapi::start().expect("start kapi");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    ok(kapi.request(&Request::new("POST", CRDS).json(&crd)), "crd");
    let served = || (kapi.request(&Request::get(GADGETS)).status == 200).then_some(());
    assert!(wait_for(Duration::from_secs(10), served).is_some(), "gadgets not served");

    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": empty_meta("g"), "spec": {"empty": {}}});
    let created = ok(kapi.request(&Request::new("POST", GADGETS).json(&gadget)), "create");
    let mut with_generation = expected_keys(true);
    with_generation.push("generation".to_owned());
    with_generation.sort();
    assert_eq!(meta_keys(&created), with_generation, "create: {created}");
    // Only metadata goes through ObjectMeta: the custom resource's own empty map stays.
    assert_eq!(created["spec"], json!({"empty": {}}));

    let mut status = created.clone();
    status["metadata"]["labels"] = json!({});
    status["status"] = json!({"ok": true});
    let updated = ok(kapi.request(&Request::new("PUT", &format!("{GADGETS}/g/status")).json(&status)), "status");
    assert_eq!(meta_keys(&updated), with_generation, "status: {updated}");
}

#[test]
fn client_side_reapply_of_empty_labels_writes_nothing() {
    let kapi = Kapi::start().expect("start kapi");
    let file = kapi.write_file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: reapply\n  labels: {}\n  annotations: {}\ndata:\n  a: \"1\"\n",
    );
    let file = file.to_str().unwrap_or_default();
    let first = kapi.kubectl(&["apply", "-f", file]).ok("first apply");
    assert_eq!(first.trim(), "configmap/reapply created");
    // kubectl diffs the answered object (no labels, as kube answers) with the file: its patch
    // is `{"metadata":{"labels":{}}}`, not `{}`, so kubectl reports `configured` against kube
    // too; what matters is that the write changes nothing and stores no empty labels.
    let before = kapi.get_json(&format!("{CMS}/reapply"));
    let again = kapi.kubectl(&["apply", "-f", file]).ok("second apply");
    assert_eq!(again.trim(), "configmap/reapply configured");
    let after = kapi.get_json(&format!("{CMS}/reapply"));
    assert_eq!(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"], "a no-op write: {after}");
    let stored = kapi.get_json(&format!("{CMS}/reapply"));
    assert!(stored["metadata"].get("labels").is_none(), "{stored}");
    // Only kubectl's last-applied configuration is annotated.
    let annotations = stored["metadata"]["annotations"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>());
    assert_eq!(annotations, Some(vec!["kubectl.kubernetes.io/last-applied-configuration".to_owned()]));
}

/// RBAC with a ServiceAccount subject (no `apiGroup`, as manifests write it), an aggregated
/// ClusterRole without `rules`, and a headless Service written with `ports: []`.
const RBAC_AND_SERVICE: &str = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: reader
  namespace: default
subjects:
- kind: ServiceAccount
  name: default
  namespace: default
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: aggregated-empty
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      example.com/aggregate-to-empty: \"true\"
---
apiVersion: v1
kind: Service
metadata:
  name: headless
  namespace: default
spec:
  clusterIP: None
  selector:
    app: headless
  ports: []
";

#[test]
fn built_in_kinds_drop_empty_omitempty_fields_as_go_writes_them() {
    let kapi = Kapi::start().expect("start kapi");
    // Raw bodies: what kube's Go structs write back.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "raw"},
        "subjects": [{"kind": "ServiceAccount", "apiGroup": "", "name": "default", "namespace": "default"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}});
    let created = ok(
        kapi.request(&Request::new("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings").json(&binding)),
        "rolebinding",
    );
    assert_eq!(created["subjects"], json!([{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]));

    // `rules` has no omitempty: kube answers `"rules": null` for a ClusterRole without rules.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "no-rules"}});
    let r = kapi.request(&Request::new("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles").json(&role));
    assert_eq!(r.status, 201, "{}", r.raw);
    assert!(r.raw.contains(r#""rules":null"#), "{}", r.raw);

    // A container's empty lists, zero host port and false flags are dropped; pointers and
    // structs stay (`securityContext: {}`, `terminationGracePeriodSeconds: 0`).
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {}, "volumes": [], "automountServiceAccountToken": false,
            "containers": [{"name": "c", "image": "nginx", "command": [], "env": [],
                "ports": [{"containerPort": 80, "hostPort": 0}], "stdin": false, "securityContext": {}}]}});
    let created = ok(kapi.request(&Request::new("POST", "/api/v1/namespaces/default/pods").json(&pod)), "pod");
    let spec = &created["spec"];
    assert_eq!(spec["terminationGracePeriodSeconds"], 0, "{spec}");
    for gone in ["nodeSelector", "volumes"] {
        assert!(spec.get(gone).is_none(), "{gone}: {spec}");
    }
    let c = &spec["containers"][0];
    for gone in ["command", "env", "stdin"] {
        assert!(c.get(gone).is_none(), "{gone}: {c}");
    }
    assert_eq!(c["ports"], json!([{"containerPort": 80, "protocol": "TCP"}]), "{c}");
    assert_eq!(c["securityContext"], json!({}), "{c}");
}

#[test]
fn client_side_reapply_of_rbac_is_unchanged_and_server_side_apply_takes_over() {
    let kapi = Kapi::start().expect("start kapi");
    let file = kapi.write_file("rbac.yaml", RBAC_AND_SERVICE);
    let file = file.to_str().unwrap_or_default();
    let first = kapi.kubectl(&["apply", "-f", file]).ok("first apply");
    assert_eq!(
        first.trim(),
        "rolebinding.rbac.authorization.k8s.io/reader created\n\
         clusterrole.rbac.authorization.k8s.io/aggregated-empty created\n\
         service/headless created"
    );
    let binding = kapi.get_json("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/reader");
    assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]));
    let service = kapi.get_json("/api/v1/namespaces/default/services/headless");
    assert!(service["spec"].get("ports").is_none(), "kube drops ports: []: {service}");

    let before = kapi.get_json("/api/v1/namespaces/default/services/headless");
    let again = kapi.kubectl(&["apply", "-f", file]).ok("second apply");
    // The Service's patch is `{"spec":{"ports":[]}}` (the file has it, the answer does not),
    // so kubectl reports it `configured` against kube too; the write changes nothing.
    assert_eq!(
        again.trim(),
        "rolebinding.rbac.authorization.k8s.io/reader unchanged\n\
         clusterrole.rbac.authorization.k8s.io/aggregated-empty unchanged\n\
         service/headless configured"
    );
    let after = kapi.get_json("/api/v1/namespaces/default/services/headless");
    assert_eq!(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"], "a no-op write: {after}");

    let out = kapi.kubectl(&["apply", "--server-side", "-f", file]);
    let (success, stdout, stderr) = out.outcome();
    assert!(success, "server-side apply: {stdout} {stderr}");
    assert!(!stderr.contains("conflict"), "{stderr}");
    assert!(stdout.contains("rolebinding.rbac.authorization.k8s.io/reader serverside-applied"), "{stdout}");
}
