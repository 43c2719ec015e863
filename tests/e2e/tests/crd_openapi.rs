//! OpenAPI of custom resources end to end: once a CRD is Established its group version shows
//! in the `/openapi/v3` index within a second, its definitions in `/openapi/v2` (JSON and
//! protobuf) and `kubectl explain` (the default kubectl and kubectl 1.27, both on OpenAPI v3)
//! prints its descriptions and fields; an update shows in explain; a delete removes it all.
//! Built-in kinds keep explaining.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kapi_e2e::{versioned_kubectl, wait_for, Kapi, Request};
use serde_json::Value;

const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
const GV: &str = "apis/example.com/v1";

fn crd(extra_field: &str) -> String {
    format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
      scale: {{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}}
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget is a small made-up thing for explain to describe.
        properties:
          spec:
            type: object
            description: The widget as its owner wants it.
            properties:
              color:
                type: string
                description: Paint colour of the widget, red or blue.
                enum: [red, blue]
              replicas:
                type: integer
                description: How many copies of the widget to keep.
              port:
                x-kubernetes-int-or-string: true
                description: Port as a number or a name.
{extra_field}
          status:
            type: object
            properties:
              replicas: {{type: integer}}
"#
    )
}

const SHAPE_FIELD: &str = "              shape:
                type: string
                description: Outline of the widget, added by an update.";

fn write(kapi: &Kapi, name: &str, text: &str) -> PathBuf {
    let path = kapi.data_dir().join(name);
    std::fs::write(&path, text).expect("write manifest");
    path
}

fn kubectl_ok(kapi: &Kapi, bin: &Path, args: &[&str]) -> String {
    let out = kapi.kubectl_with(bin, args);
    assert!(
        out.status.success(),
        "{} {}: {}\n{}",
        bin.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr),
        kapi.log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn established(kapi: &Kapi) -> bool {
    let r = kapi.request(&Request::get(CRD_PATH));
    r.status == 200
        && r.body["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
}

fn v3_index_has(kapi: &Kapi, gv: &str) -> bool {
    kapi.get_json("/openapi/v3")["paths"].get(gv).is_some()
}

fn v2_definitions(kapi: &Kapi) -> Value {
    kapi.get_json("/openapi/v2")["definitions"].clone()
}

/// The kubectl binaries to explain with: the default one and 1.27 when installed.
fn kubectls() -> Vec<PathBuf> {
    let mut bins = vec![PathBuf::from("kubectl")];
    match versioned_kubectl("1.27") {
        Ok(bin) => bins.push(bin),
        Err(e) => eprintln!("skipping kubectl 1.27 (not installed next to kubectl: {e})"),
    }
    bins
}

fn explain(kapi: &Kapi, bin: &Path, args: &[&str], wanted: &[&str]) {
    let mut all = vec!["explain"];
    all.extend_from_slice(args);
    let out = kubectl_ok(kapi, bin, &all);
    for w in wanted {
        assert!(out.contains(w), "{} explain {}: no {w:?} in\n{out}", bin.display(), args.join(" "));
    }
}

#[test]
fn crd_openapi_follows_the_crd() {
    let kapi = Kapi::start().expect("start kapi");
    assert!(!v3_index_has(&kapi, GV));
    let path = write(&kapi, "crd.yaml", &crd(""));
    kubectl_ok(&kapi, Path::new("kubectl"), &["create", "-f", path.to_str().unwrap_or_default()]);

    // Established, then the v3 index names the group version within a second.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !established(&kapi) {
        assert!(Instant::now() < deadline, "CRD not Established\n{}", kapi.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen_established = Instant::now();
    while !v3_index_has(&kapi, GV) {
        assert!(
            seen_established.elapsed() < Duration::from_secs(1),
            "{GV} not in /openapi/v3 within 1 s of Established"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("{GV} in the v3 index {:?} after Established was seen", seen_established.elapsed());

    // The group-version document and v2 (JSON and protobuf).
    let url = kapi.get_json("/openapi/v3")["paths"][GV]["serverRelativeURL"].as_str().unwrap_or_default().to_owned();
    assert!(url.starts_with(&format!("/openapi/v3/{GV}?hash=")), "{url}");
    let doc = kapi.get_json(&url);
    let widget = &doc["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(widget["x-kubernetes-group-version-kind"][0]["kind"], "Widget");
    assert_eq!(widget["properties"]["spec"]["properties"]["port"]["anyOf"][0]["type"], "integer");
    assert!(doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    let ns_path = "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale";
    assert_eq!(doc["paths"][ns_path]["get"]["x-kubernetes-action"], "get");
    let defs = v2_definitions(&kapi);
    assert!(defs["com.example.v1.WidgetList"].is_object());
    assert!(defs["com.example.v1.Widget"]["properties"]["spec"]["properties"]["port"].get("anyOf").is_none());
    assert!(defs["io.k8s.api.apps.v1.Deployment"].is_object(), "built-in definitions stay");
    let proto =
        kapi.request(&Request::get("/openapi/v2").accept("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"));
    assert_eq!(proto.status, 200);
    assert!(proto.raw.contains("com.example.v1.Widget"), "protobuf v2 lacks the CRD");
    // apiextensions.k8s.io keeps its own paths.
    assert!(v3_index_has(&kapi, "apis/apiextensions.k8s.io/v1"));

    for bin in kubectls() {
        explain(
            &kapi,
            &bin,
            &["widgets"],
            &["Widget", "A Widget is a small made-up thing", "spec", "status", "metadata"],
        );
        explain(&kapi, &bin, &["widgets.spec", "--recursive"], &["color", "replicas", "port"]);
        explain(&kapi, &bin, &["widget.spec.color"], &["Paint colour of the widget"]);
        explain(&kapi, &bin, &["deployments.spec.replicas"], &["Number of desired pods"]);
    }

    // An update with a new described field shows in explain.
    let path = write(&kapi, "crd-v2.yaml", &crd(SHAPE_FIELD));
    kubectl_ok(&kapi, Path::new("kubectl"), &["apply", "-f", path.to_str().unwrap_or_default()]);
    let shown = wait_for(Duration::from_secs(5), || {
        let out = kapi.kubectl(&["explain", "widget.spec.shape"]);
        String::from_utf8_lossy(&out.stdout).contains("Outline of the widget").then_some(())
    });
    assert!(shown.is_some(), "explain never showed the new field\n{}", kapi.log());
    for bin in kubectls() {
        explain(&kapi, &bin, &["widgets.spec", "--recursive"], &["shape", "color"]);
    }

    // Deleted: gone from the v3 index, the group-version document and v2.
    kubectl_ok(&kapi, Path::new("kubectl"), &["delete", "crd", "widgets.example.com"]);
    let gone = wait_for(Duration::from_secs(10), || {
        let defs = v2_definitions(&kapi);
        (!v3_index_has(&kapi, GV)
            && defs.get("com.example.v1.Widget").is_none()
            && defs.get("com.example.v1.WidgetList").is_none())
        .then_some(())
    });
    assert!(gone.is_some(), "CRD parts still published after delete\n{}", kapi.log());
    assert_eq!(kapi.request(&Request::get(&format!("/openapi/v3/{GV}"))).status, 404);
    explain(&kapi, Path::new("kubectl"), &["deployments.spec.replicas"], &["Number of desired pods"]);
}
