//! CustomResourceDefinitions end to end with kubectl and raw HTTP: a CRD is created, Established
//! and served (printer columns, short names, categories, patches, scale, status only through
//! its subresource, watch, dry-run, schema validation), served in two versions, refused when
//! malformed or when its names conflict, and deleted with its instances, routes and discovery
//! entries (creates refused while it terminates).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kapi_e2e::{OutputExt, versioned_kubectl, wait_for, Kapi, Request};
use serde_json::{json, Value};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Ready, type: string, priority: 1, jsonPath: ".status.conditions[?(@.type==\"Ready\")].status"}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties:
              color: {type: string, enum: [red, blue]}
              replicas: {type: integer, minimum: 0, default: 1}
              size: {type: string, pattern: '^[0-9]+(Mi|Gi)$'}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
"#;

fn write(kapi: &Kapi, name: &str, text: &str) -> PathBuf {
    let path = kapi.data_dir().join(name);
    std::fs::write(&path, text).expect("write manifest");
    path
}

/// Runs kubectl and returns (success, stdout, stderr).
fn run(kapi: &Kapi, bin: &Path, args: &[&str]) -> (bool, String, String) {
    kapi.kubectl_with(bin, args).outcome()
}

fn ok(kapi: &Kapi, bin: &Path, args: &[&str]) -> String {
    kapi.kubectl_with(bin, args).ok(&format!("kubectl {}", args.join(" ")))
}

fn established(kapi: &Kapi, name: &str) -> bool {
    let crd = kapi.get_json(&format!("{CRDS}/{name}"));
    crd["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Established" && c["status"] == "True")
}

fn install(kapi: &Kapi, bin: &Path, file: &str, manifest: &str, name: &str) {
    let path = write(kapi, file, manifest);
    ok(kapi, bin, &["create", "-f", path.to_str().unwrap_or_default()]);
    assert!(wait_for(Duration::from_secs(10), || established(kapi, name).then_some(())).is_some(), "{name} not Established");
}

/// The lines of `kubectl get` output, split into columns.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect()
}

fn widget_flow(bin: &Path) {
    let kapi = Kapi::start().expect("start kapi");
    install(&kapi, bin, "crd.yaml", WIDGET_CRD, "widgets.example.com");

    // Created with client-side apply; the schema's default fills spec.replicas.
    let w1 = write(&kapi, "w1.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, labels: {app: a}}\nspec: {color: red}\n");
    ok(&kapi, bin, &["apply", "-f", w1.to_str().unwrap_or_default()]);
    let got = rows(&ok(&kapi, bin, &["get", "wd"]));
    assert_eq!(got[0], ["NAME", "REPLICAS", "COLOR", "AGE"], "printer columns: {got:?}");
    assert_eq!(&got[1][..3], ["w1", "1", "red"]);
    let wide = rows(&ok(&kapi, bin, &["get", "widgets.example.com", "-o", "wide"]));
    assert_eq!(wide[0], ["NAME", "REPLICAS", "COLOR", "READY", "AGE"], "priority columns with -o wide: {wide:?}");
    for name in ["widget", "widgets", "Widget", "wd", "widget.example.com"] {
        assert!(ok(&kapi, bin, &["get", name, "w1", "-o", "name"]).contains("widget.example.com/w1"), "{name}");
    }
    assert!(ok(&kapi, bin, &["get", "all"]).contains("widget.example.com/w1"), "category all");

    // Patches: JSON and merge through kubectl; strategic merge is refused as kube refuses it.
    ok(&kapi, bin, &["patch", "wd", "w1", "--type=json", "-p", r#"[{"op":"add","path":"/spec/size","value":"2Gi"}]"#]);
    ok(&kapi, bin, &["patch", "wd", "w1", "--type=merge", "-p", r#"{"metadata":{"labels":{"tier":"x"}}}"#]);
    let strategic = kapi.request(
        &Request::new("PATCH", &format!("{WIDGETS}/w1")).raw("application/strategic-merge-patch+json", br#"{"spec":{"color":"blue"}}"#.to_vec()),
    );
    assert_eq!(strategic.status, 415, "{}", strategic.raw);
    let obj = kapi.get_json(&format!("{WIDGETS}/w1"));
    assert_eq!((obj["spec"]["size"].clone(), obj["metadata"]["labels"]["tier"].clone()), (json!("2Gi"), json!("x")));
    assert_eq!(obj["spec"]["color"], "red");

    // Schema validation: every failing field in one 422, nothing stored.
    let bad = kapi.request(&Request::new("PATCH", &format!("{WIDGETS}/w1")).raw(
        "application/merge-patch+json",
        br#"{"spec":{"color":"green","replicas":-1,"size":"big"}}"#.to_vec(),
    ));
    assert_eq!(bad.status, 422, "{}", bad.raw);
    assert_eq!(bad.reason(), "Invalid");
    for expected in [
        r#"spec.color: Unsupported value: "green": supported values: "red", "blue""#,
        "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
        r#"spec.size: Invalid value: "big": spec.size in body should match '^[0-9]+(Mi|Gi)$'"#,
    ] {
        assert!(bad.message().contains(expected), "missing {expected:?} in {}", bad.message());
    }
    assert_eq!(bad.body["details"]["causes"].as_array().map(Vec::len), Some(3), "{}", bad.raw);
    assert_eq!(kapi.get_json(&format!("{WIDGETS}/w1"))["metadata"]["resourceVersion"], obj["metadata"]["resourceVersion"]);

    // Scale through the subresource.
    ok(&kapi, bin, &["scale", "widget", "w1", "--replicas=3"]);
    let scale = kapi.get_json(&format!("{WIDGETS}/w1/scale"));
    assert_eq!((scale["kind"].clone(), scale["apiVersion"].clone(), scale["spec"]["replicas"].clone()), (json!("Scale"), json!("autoscaling/v1"), json!(3)));

    // Status only through its subresource: a main-resource update keeps the stored status,
    // a status write changes nothing else.
    let mut with_status = kapi.get_json(&format!("{WIDGETS}/w1"));
    with_status["status"] = json!({"replicas": 9});
    let put = kapi.request(&Request::new("PUT", &format!("{WIDGETS}/w1")).json(&with_status));
    assert_eq!(put.status, 200, "{}", put.raw);
    assert!(put.body.get("status").is_none(), "status ignored on the main resource: {}", put.raw);
    ok(&kapi, bin, &["patch", "wd", "w1", "--subresource=status", "--type=merge", "-p",
        r#"{"spec":{"color":"blue"},"status":{"replicas":3,"selector":"app=a","conditions":[{"type":"Ready","status":"True"}]}}"#]);
    let obj = kapi.get_json(&format!("{WIDGETS}/w1"));
    assert_eq!((obj["status"]["replicas"].clone(), obj["spec"]["color"].clone()), (json!(3), json!("red")));
    assert_eq!(kapi.get_json(&format!("{WIDGETS}/w1/scale"))["status"], json!({"replicas": 3, "selector": "app=a"}));
    assert_eq!(rows(&ok(&kapi, bin, &["get", "wd", "w1", "-o", "wide", "--no-headers"]))[0][3], "True");

    // Watch from a resourceVersion sees later changes in order.
    let rv = obj["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_owned();
    ok(&kapi, bin, &["label", "wd", "w1", "watched=yes"]);
    let w2 = write(&kapi, "w2.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {color: blue}\n");
    ok(&kapi, bin, &["create", "-f", w2.to_str().unwrap_or_default()]);
    ok(&kapi, bin, &["delete", "wd", "w2"]);
    let events = ok(&kapi, bin, &["get", "--raw", &format!("{WIDGETS}?watch=1&resourceVersion={rv}&timeoutSeconds=1")]);
    let seen: Vec<(String, String)> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| (e["type"].as_str().unwrap_or_default().to_owned(), e["object"]["metadata"]["name"].as_str().unwrap_or_default().to_owned()))
        .collect();
    let expected: Vec<(String, String)> =
        [("MODIFIED", "w1"), ("ADDED", "w2"), ("DELETED", "w2")].iter().map(|(t, n)| ((*t).to_owned(), (*n).to_owned())).collect();
    assert_eq!(seen, expected, "{events}");

    // Dry-run stores nothing.
    ok(&kapi, bin, &["create", "-f", w2.to_str().unwrap_or_default(), "--dry-run=server"]);
    assert_eq!(kapi.request(&Request::get(&format!("{WIDGETS}/w2"))).status, 404);

    // Deleting the CRD deletes its instances, then its routes and discovery entries. An
    // instance held by a finalizer keeps the CRD terminating, and creates are refused.
    ok(&kapi, bin, &["patch", "wd", "w1", "--type=merge", "-p", r#"{"metadata":{"finalizers":["example.com/hold"]}}"#]);
    ok(&kapi, bin, &["delete", "crd", "widgets.example.com", "--wait=false"]);
    let terminating = wait_for(Duration::from_secs(10), || {
        let crd = kapi.get_json(&format!("{CRDS}/widgets.example.com"));
        let cond = crd["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Terminating").cloned()?;
        (cond["reason"] == "InstanceDeletionCheck").then_some(cond)
    });
    assert!(terminating.is_some(), "CRD waits for the held instance: {}", kapi.get_json(&format!("{CRDS}/widgets.example.com")));
    let create = kapi.request(&Request::new("POST", WIDGETS).json(&json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w3"}, "spec": {"color": "red"}})));
    assert_eq!(create.status, 405, "{}", create.raw);
    assert_eq!(create.message(), "create not allowed while custom resource definition is terminating");
    ok(&kapi, bin, &["patch", "wd", "w1", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    let gone = wait_for(Duration::from_secs(15), || (kapi.request(&Request::get(&format!("{CRDS}/widgets.example.com"))).status == 404).then_some(()));
    assert!(gone.is_some(), "CRD deleted once its instances are gone");
    assert_eq!(kapi.request(&Request::get(WIDGETS)).status, 404);
    assert_eq!(kapi.request(&Request::get("/apis/example.com/v1")).status, 404);
    let groups = kapi.get_json("/apis");
    assert!(!groups["groups"].as_array().into_iter().flatten().any(|g| g["name"] == "example.com"), "{groups}");
    assert!(!ok(&kapi, bin, &["api-resources"]).contains("widgets"));
}

#[test]
fn widget_crd_with_default_kubectl() {
    widget_flow(Path::new("kubectl"));
}

#[test]
fn widget_crd_with_kubectl_1_27() {
    match versioned_kubectl("1.27") {
        Ok(bin) => widget_flow(&bin),
        Err(e) => eprintln!("skipping: kubectl 1.27 is not installed here ({e})"),
    }
}

const APP_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: apps.demo.io
spec:
  group: demo.io
  scope: Cluster
  names: {plural: apps, singular: app, kind: App}
  versions:
  - name: v1alpha1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: "demo.io/v1alpha1 App is going away; use demo.io/v1"
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {image: {type: string}, tier: {type: string, default: gold}}}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {image: {type: string}}}
"#;

#[test]
fn two_served_versions_share_storage() {
    let kapi = Kapi::start().expect("start kapi");
    let kubectl = Path::new("kubectl");
    install(&kapi, kubectl, "app.yaml", APP_CRD, "apps.demo.io");
    let groups = kapi.get_json("/apis/demo.io");
    assert_eq!(groups["preferredVersion"]["version"], "v1", "{groups}");
    assert_eq!(groups["versions"].as_array().map(|v| v.iter().map(|x| x["version"].clone()).collect::<Vec<_>>()), Some(vec![json!("v1"), json!("v1alpha1")]));

    // Both versions are stored as v1: discovery gives them the same storageVersionHash.
    let hash = |v: &str| kapi.get_json(&format!("/apis/demo.io/{v}"))["resources"][0]["storageVersionHash"].clone();
    assert!(hash("v1").as_str().is_some_and(|h| h.len() == 12), "{}", hash("v1"));
    assert_eq!(hash("v1"), hash("v1alpha1"));
    let created = kapi.request(&Request::new("POST", "/apis/demo.io/v1alpha1/apps").json(
        &json!({"apiVersion": "demo.io/v1alpha1", "kind": "App", "metadata": {"name": "a"}, "spec": {"image": "nginx"}}),
    ));
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!((created.body["apiVersion"].clone(), created.body["spec"]["tier"].clone()), (json!("demo.io/v1alpha1"), json!("gold")));
    let v1 = kapi.get_json("/apis/demo.io/v1/apps/a");
    assert_eq!(v1["apiVersion"], "demo.io/v1");
    assert_eq!(v1["spec"]["image"], "nginx");
    let list = kapi.get_json("/apis/demo.io/v1alpha1/apps");
    assert_eq!(list["items"][0]["apiVersion"], "demo.io/v1alpha1", "{list}");
    // The wrong version in a body is refused.
    let wrong = kapi.request(&Request::new("POST", "/apis/demo.io/v1alpha1/apps").json(&json!({"apiVersion": "demo.io/v1", "kind": "App", "metadata": {"name": "b"}})));
    assert_eq!(wrong.status, 400, "{}", wrong.raw);
    // A deprecated version warns on every request.
    let (success, _, stderr) = run(&kapi, kubectl, &["get", "apps.v1alpha1.demo.io"]);
    assert!(success, "{stderr}");
    assert!(stderr.contains("Warning: demo.io/v1alpha1 App is going away; use demo.io/v1"), "{stderr}");
}

#[test]
fn malformed_crds_and_name_conflicts() {
    let kapi = Kapi::start().expect("start kapi");
    let crd = |name: &str, plural: &str, kind: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
               "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                                      "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})
    };
    let post = |body: &Value| kapi.request(&Request::new("POST", CRDS).json(body));

    let mut mismatched = crd("things.example.com", "gizmos", "Gizmo");
    let r = post(&mismatched);
    assert_eq!(r.status, 422, "{}", r.raw);
    assert!(r.message().contains(r#"metadata.name: Invalid value: "things.example.com": must be spec.names.plural+"."+spec.group"#), "{}", r.message());
    mismatched["metadata"]["name"] = json!("gizmos.example.com");
    mismatched["spec"]["versions"][0]["storage"] = json!(false);
    let r = post(&mismatched);
    assert_eq!(r.status, 422, "{}", r.raw);
    assert!(r.message().contains("must have exactly one version marked as storage version"), "{}", r.message());
    let mut untyped = crd("gizmos.example.com", "gizmos", "Gizmo");
    untyped["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = json!({"properties": {"a": {"type": "string"}}});
    let r = post(&untyped);
    assert_eq!(r.status, 422, "{}", r.raw);
    assert!(r.message().contains("type: Required value: must not be empty for specified object fields"), "{}", r.message());
    assert_eq!(kapi.get_json(CRDS)["items"], json!([]), "nothing stored");

    // Two CRDs of one group claiming the same kind: the second is not accepted nor served.
    assert_eq!(post(&crd("gizmos.example.com", "gizmos", "Gizmo")).status, 201);
    assert!(wait_for(Duration::from_secs(10), || established(&kapi, "gizmos.example.com").then_some(())).is_some());
    assert_eq!(post(&crd("gadgets.example.com", "gadgets", "Gizmo")).status, 201);
    let cond = wait_for(Duration::from_secs(10), || {
        let c = kapi.get_json(&format!("{CRDS}/gadgets.example.com"));
        c["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "NamesAccepted").cloned()
    })
    .expect("NamesAccepted set");
    // kube checks kind then listKind; the last conflict found is the one reported.
    assert_eq!((cond["status"].as_str(), cond["reason"].as_str()), (Some("False"), Some("ListKindConflict")), "{cond}");
    assert_eq!(cond["message"], "\"GizmoList\" is already in use");
    assert!(!established(&kapi, "gadgets.example.com"));
    assert_eq!(kapi.request(&Request::get("/apis/example.com/v1/namespaces/default/gadgets")).status, 404);
    assert_eq!(kapi.request(&Request::get("/apis/example.com/v1/namespaces/default/gizmos")).status, 200);
}

/// kube defaults what it reads from storage too: a default added to a CRD's schema shows on
/// objects stored before it, in GET, LIST and watch answers, without a write.
#[test]
fn defaults_added_later_show_on_reads_of_older_objects() {
    let kapi = Kapi::start().expect("start kapi");
    let crd = |size: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "gadgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                                      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                          "spec": {"type": "object", "properties": {"color": {"type": "string"}, "size": size}}}}}}]}})
    };
    let created = kapi.request(&Request::new("POST", CRDS).json(&crd(json!({"type": "string"}))));
    assert_eq!(created.status, 201, "{}", created.raw);
    assert!(wait_for(Duration::from_secs(10), || established(&kapi, "gadgets.example.com").then_some(())).is_some());
    let gadgets = "/apis/example.com/v1/namespaces/default/gadgets";
    let made = wait_for(Duration::from_secs(10), || {
        let r = kapi.request(&Request::new("POST", gadgets).json(&json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"color": "red"}})));
        (r.status == 201).then_some(r.body)
    })
    .expect("gadget created");
    assert!(made["spec"].get("size").is_none(), "{made}");
    let stored_rv = made["metadata"]["resourceVersion"].clone();

    // The CRD gains a default for spec.size.
    let mut current = kapi.get_json(&format!("{CRDS}/gadgets.example.com"));
    current["spec"] = crd(json!({"type": "string", "default": "small"}))["spec"].clone();
    let updated = kapi.request(&Request::new("PUT", &format!("{CRDS}/gadgets.example.com")).json(&current));
    assert_eq!(updated.status, 200, "{}", updated.raw);

    let got = wait_for(Duration::from_secs(10), || {
        let g = kapi.get_json(&format!("{gadgets}/g"));
        (g["spec"]["size"] == "small").then_some(g)
    })
    .expect("GET answers the new default");
    assert_eq!(got["spec"]["color"], "red");
    assert_eq!(got["metadata"]["resourceVersion"], stored_rv, "a read default is not a write");
    let list = kapi.get_json(gadgets);
    assert_eq!(list["items"][0]["spec"]["size"], "small", "{list}");
    let watch = kapi.request(&Request::get(&format!("{gadgets}?watch=1&resourceVersion=0&timeoutSeconds=1")));
    let event: Value = serde_json::from_str(watch.raw.lines().next().unwrap_or_default()).expect("one watch event");
    assert_eq!((event["type"].as_str(), event["object"]["spec"]["size"].as_str()), (Some("ADDED"), Some("small")), "{}", watch.raw);
    // An explicit value is kept, and objects written now store the default.
    let explicit = kapi.request(&Request::new("POST", gadgets).json(&json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "h"}, "spec": {"size": "large"}})));
    assert_eq!(explicit.body["spec"]["size"], "large", "{}", explicit.raw);
}
