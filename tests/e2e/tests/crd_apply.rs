//! Server-side apply and managedFields on custom resources, with real kubectl (default and
//! 1.27): the CRD's list and map types decide ownership (a list-map keyed by name merged across
//! managers, a set, an atomic list, a granular map), conflicts answer kube's 409, forcing moves
//! ownership, a manager's dropped fields are removed, and client-side apply, edit, merge patch
//! and status writes record Update entries (the status ones with subresource "status").

use std::path::{Path, PathBuf};
use std::time::Duration;

use kapi_e2e::{OutputExt, versioned_kubectl, wait_for, Kapi, Request};
use serde_json::{json, Value};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const GADGETS: &str = "/apis/example.com/v1/namespaces/default/gadgets";

const GADGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
              args: {type: array, x-kubernetes-list-type: atomic, items: {type: string}}
              settings: {type: object, x-kubernetes-map-type: granular, additionalProperties: {type: string}}
          status:
            type: object
            properties:
              phase: {type: string}
              ready: {type: integer}
"#;

const G1: &str = "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\n  labels: {app: g}\nspec:\n  replicas: 2\n  ports:\n  - {name: http, port: 80}\n  - {name: https, port: 443}\n  tags: [a, b]\n  args: [--x, --y]\n  settings: {color: red, size: big}\n";

fn write(kapi: &Kapi, name: &str, text: &str) -> String {
    let path: PathBuf = kapi.data_dir().join(name);
    std::fs::write(&path, text).expect("write manifest");
    path.display().to_string()
}

/// Runs kubectl and returns (success, stdout, stderr).
fn run(kapi: &Kapi, bin: &Path, args: &[&str]) -> (bool, String, String) {
    kapi.kubectl_with(bin, args).outcome()
}

fn ok(kapi: &Kapi, bin: &Path, args: &[&str]) -> (String, String) {
    let out = kapi.kubectl_with(bin, args);
    (out.ok(&format!("kubectl {}", args.join(" "))), out.stderr_str())
}

fn install(kapi: &Kapi, bin: &Path) {
    let path = write(kapi, "crd.yaml", GADGET_CRD);
    ok(kapi, bin, &["create", "-f", &path]);
    let established = || {
        let crd = kapi.get_json(&format!("{CRDS}/gadgets.example.com"));
        crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    };
    assert!(wait_for(Duration::from_secs(10), || established().then_some(())).is_some(), "CRD not Established");
}

/// The managedFields entry of `manager` with `operation` on `subresource` ("" for the main
/// resource); panics with every entry when there is none.
fn entry<'a>(obj: &'a Value, manager: &str, operation: &str, subresource: &str) -> &'a Value {
    let entries = obj["metadata"]["managedFields"].as_array();
    entries
        .into_iter()
        .flatten()
        .find(|e| {
            e["manager"] == manager
                && e["operation"] == operation
                && e["subresource"].as_str().unwrap_or_default() == subresource
        })
        .unwrap_or_else(|| {
            panic!("no {operation} entry of {manager} ({subresource:?}): {}", obj["metadata"]["managedFields"])
        })
}

fn port(name: &str) -> String {
    format!("k:{{\"name\":\"{name}\"}}")
}

fn apply_flow(bin: &Path) {
    let kapi = Kapi::start().expect("start kapi");
    install(&kapi, bin);
    let get = |name: &str| kapi.get_json(&format!("{GADGETS}/{name}"));

    // Created by server-side apply: 201, one Apply entry with the fields kube records.
    let g1 = write(&kapi, "g1.yaml", G1);
    let (out, log) = ok(&kapi, bin, &["apply", "--server-side", "-f", &g1, "-v=6"]);
    assert_eq!(out.trim(), "gadget.example.com/g1 serverside-applied");
    assert!(log.lines().any(|l| l.contains("PATCH") && l.contains("201 Created")), "apply created the object: {log}");
    let obj = get("g1");
    assert_eq!(obj["metadata"]["managedFields"].as_array().map(Vec::len), Some(1), "{}", obj["metadata"]);
    let mine = entry(&obj, "kubectl", "Apply", "");
    assert_eq!((mine["apiVersion"].clone(), mine["fieldsType"].clone()), (json!("example.com/v1"), json!("FieldsV1")));
    assert!(mine["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{mine}");
    assert_eq!(
        mine["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:args": {},
                "f:ports": {(port("http")): {".": {}, "f:name": {}, "f:port": {}}, (port("https")): {".": {}, "f:name": {}, "f:port": {}}},
                "f:replicas": {},
                "f:settings": {"f:color": {}, "f:size": {}},
                "f:tags": {"v:\"a\"": {}, "v:\"b\"": {}}
            }
        })
    );

    // Another manager setting kubectl's fields conflicts: kubectl shows kube's message, the
    // API answers 409 with a cause per field (members before nested fields, as kube lists them).
    let ops1 = write(
        &kapi,
        "ops1.yaml",
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {replicas: 5}\n",
    );
    let (success, _, stderr) = run(&kapi, bin, &["apply", "--server-side", "--field-manager=ops", "-f", &ops1]);
    assert!(!success, "conflicting apply succeeded");
    assert!(stderr.contains("Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas"), "{stderr}");
    let body = r#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"replicas":5,"ports":[{"name":"http","port":8080}]}}"#;
    let r = kapi.request(
        &Request::new("PATCH", &format!("{GADGETS}/g1?fieldManager=ops")).raw("application/apply-patch+yaml", body),
    );
    assert_eq!(r.status, 409, "{}", r.raw);
    assert_eq!(r.reason(), "Conflict");
    assert_eq!(
        r.message(),
        "Apply failed with 2 conflicts: conflicts with \"kubectl\":\n- .spec.replicas\n- .spec.ports[name=\"http\"].port"
    );
    let cause =
        |field: &str| json!({"reason": "FieldManagerConflict", "message": "conflict with \"kubectl\"", "field": field});
    assert_eq!(r.body["details"]["causes"], json!([cause(".spec.replicas"), cause(".spec.ports[name=\"http\"].port")]));
    assert_eq!(get("g1")["spec"]["replicas"], json!(2), "nothing changed");

    // Forcing moves replicas to ops; ops's port and tag join kubectl's (merged by key and value).
    let ops2 = write(&kapi, "ops2.yaml", "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec:\n  replicas: 5\n  ports: [{name: metrics, port: 9090}]\n  tags: [c]\n");
    ok(&kapi, bin, &["apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", &ops2]);
    let obj = get("g1");
    assert_eq!(obj["spec"]["replicas"], json!(5));
    assert_eq!(
        obj["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}, {"name": "metrics", "port": 9090}])
    );
    assert_eq!(obj["spec"]["tags"], json!(["a", "b", "c"]));
    assert_eq!(
        entry(&obj, "ops", "Apply", "")["fieldsV1"],
        json!({"f:spec": {"f:ports": {(port("metrics")): {".": {}, "f:name": {}, "f:port": {}}}, "f:replicas": {}, "f:tags": {"v:\"c\"": {}}}})
    );
    assert!(
        entry(&obj, "kubectl", "Apply", "")["fieldsV1"]["f:spec"].get("f:replicas").is_none(),
        "replicas moved to ops"
    );

    // kubectl drops a port, a tag, a setting and replicas from its configuration: what only it
    // owned goes, ops's replicas, port and tag stay.
    let g1b = write(
        &kapi,
        "g1b.yaml",
        &G1.replace("  replicas: 2\n", "")
            .replace("  - {name: https, port: 443}\n", "")
            .replace("[a, b]", "[a]")
            .replace(", size: big", ""),
    );
    ok(&kapi, bin, &["apply", "--server-side", "-f", &g1b]);
    let obj = get("g1");
    assert_eq!(obj["spec"]["replicas"], json!(5));
    assert_eq!(obj["spec"]["ports"], json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}]));
    assert_eq!(obj["spec"]["tags"], json!(["a", "c"]));
    assert_eq!(obj["spec"]["settings"], json!({"color": "red"}));
    assert_eq!(obj["spec"]["args"], json!(["--x", "--y"]));
    assert_eq!(
        entry(&obj, "kubectl", "Apply", "")["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:args": {}, "f:ports": {(port("http")): {".": {}, "f:name": {}, "f:port": {}}}, "f:settings": {"f:color": {}}, "f:tags": {"v:\"a\"": {}}}
        })
    );

    // Status writes go through the status subresource and are recorded as such; a status
    // apply owns nothing outside status (kube resets metadata and spec there).
    ok(
        &kapi,
        bin,
        &["patch", "gadget", "g1", "--subresource=status", "--type=merge", "-p", r#"{"status":{"phase":"Ready"}}"#],
    );
    let obj = get("g1");
    let status = entry(&obj, "kubectl-patch", "Update", "status");
    assert_eq!(status["fieldsV1"], json!({"f:status": {".": {}, "f:phase": {}}}));
    let body = r#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g1","labels":{"extra":"x"}},"status":{"ready":1}}"#;
    let r = kapi.request(
        &Request::new("PATCH", &format!("{GADGETS}/g1/status?fieldManager=controller"))
            .raw("application/apply-patch+yaml", body),
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    let obj = get("g1");
    assert_eq!(obj["status"], json!({"phase": "Ready", "ready": 1}));
    assert_eq!(obj["metadata"]["labels"], json!({"app": "g"}), "a status write changes status only");
    assert_eq!(entry(&obj, "controller", "Apply", "status")["fieldsV1"], json!({"f:status": {"f:ready": {}}}));
    assert_eq!(
        entry(&obj, "kubectl-patch", "Update", "status")["fieldsV1"],
        json!({"f:status": {".": {}, "f:phase": {}}})
    );

    // Strategic merge patch stays refused; the 415 lists apply among the accepted types.
    let r = kapi
        .request(&Request::new("PATCH", &format!("{GADGETS}/g1")).raw("application/strategic-merge-patch+json", "{}"));
    assert_eq!(r.status, 415, "{}", r.raw);
    assert!(r.message().contains("application/apply-patch+yaml"), "{}", r.raw);

    update_entries(&kapi, bin);
}

/// Client-side apply, edit and merge patch record Update entries, and take over what they change.
fn update_entries(kapi: &Kapi, bin: &Path) {
    let get = || kapi.get_json(&format!("{GADGETS}/g2"));
    let g2 = write(
        kapi,
        "g2.yaml",
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g2}\nspec: {replicas: 1, tags: [x]}\n",
    );
    ok(kapi, bin, &["apply", "-f", &g2]);
    let obj = get();
    assert_eq!(
        entry(&obj, "kubectl-client-side-apply", "Update", "")["fieldsV1"],
        json!({
            "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}},
            "f:spec": {".": {}, "f:replicas": {}, "f:tags": {".": {}, "v:\"x\"": {}}}
        })
    );
    let g2 = write(
        kapi,
        "g2.yaml",
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g2}\nspec: {replicas: 2, tags: [x, w]}\n",
    );
    ok(kapi, bin, &["apply", "-f", &g2]);
    let obj = get();
    assert_eq!(obj["spec"], json!({"replicas": 2, "tags": ["x", "w"]}));
    assert_eq!(obj["metadata"]["managedFields"].as_array().map(Vec::len), Some(1), "{}", obj["metadata"]);
    assert!(entry(&obj, "kubectl-client-side-apply", "Update", "")["fieldsV1"]["f:spec"]["f:tags"]
        .get("v:\"w\"")
        .is_some());

    // kubectl edit (a merge patch for custom resources) takes replicas over.
    let editor = write(kapi, "editor.sh", "#!/bin/sh\nsed -i -e 's/replicas: 2/replicas: 3/' \"$1\"\n");
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let mut edit = kapi.kubectl_command(bin, &["edit", "gadget/g2"]);
    edit.env("KUBE_EDITOR", &editor).env("EDITOR", &editor);
    let out = edit.output().expect("kubectl edit");
    assert!(out.status.success(), "kubectl edit: {}", String::from_utf8_lossy(&out.stderr));
    let obj = get();
    assert_eq!(obj["spec"]["replicas"], json!(3));
    assert_eq!(entry(&obj, "kubectl-edit", "Update", "")["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    assert!(entry(&obj, "kubectl-client-side-apply", "Update", "")["fieldsV1"]["f:spec"].get("f:replicas").is_none());

    ok(kapi, bin, &["patch", "gadget", "g2", "--type=merge", "-p", r#"{"spec":{"settings":{"k":"v"}}}"#]);
    let obj = get();
    assert_eq!(
        entry(&obj, "kubectl-patch", "Update", "")["fieldsV1"],
        json!({"f:spec": {"f:settings": {".": {}, "f:k": {}}}})
    );

    // Applying to a missing custom resource over HTTP creates it: 201.
    let body = "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g3}\nspec: {args: [a]}\n";
    let r = kapi.request(
        &Request::new("PATCH", &format!("{GADGETS}/g3?fieldManager=tool")).raw("application/apply-patch+yaml", body),
    );
    assert_eq!(r.status, 201, "{}", r.raw);
    assert_eq!(entry(&r.body, "tool", "Apply", "")["fieldsV1"], json!({"f:spec": {"f:args": {}}}));
}

#[test]
fn custom_resource_apply_with_default_kubectl() {
    apply_flow(Path::new("kubectl"));
}

#[test]
fn custom_resource_apply_with_kubectl_1_27() {
    match versioned_kubectl("1.27") {
        Ok(bin) => apply_flow(&bin),
        Err(e) => eprintln!("skipping: kubectl 1.27 is not installed here ({e})"),
    }
}
