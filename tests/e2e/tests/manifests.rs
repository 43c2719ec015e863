//! The manifests we ship (k8s-manifests/) are valid Kubernetes objects: the default kubectl
//! applies them to a real kapi with strict server-side field validation, and kapi stores them
//! with the defaults kube-apiserver would add.

use std::path::PathBuf;

use kapi_e2e::{Kapi, OutputExt};
use serde_json::{json, Value};

fn manifest(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../k8s-manifests").join(rel)
}

#[test]
fn embedded_manifests_apply_strictly() {
    let kapi = Kapi::start().expect("start kapi");
    let path = manifest("embedded/kapi.yaml");
    let out = kapi
        .kubectl(&["apply", "--validate=strict", "-f", &path.display().to_string()])
        .ok("kubectl apply k8s-manifests/embedded/kapi.yaml");
    for expected in ["namespace/kapi created", "service/kapi created", "statefulset.apps/kapi created"] {
        assert!(out.lines().any(|l| l.trim() == expected), "apply output lacks {expected:?}:\n{out}");
    }
    let sts: Value = serde_json::from_str(
        &kapi.kubectl(&["get", "statefulset", "kapi", "-n", "kapi", "-o", "json"]).ok("get statefulset"),
    )
    .expect("statefulset JSON");
    assert_eq!(sts["spec"]["template"]["spec"]["containers"][0]["image"], json!("kapi:dev"));
    assert_eq!(sts["spec"]["podManagementPolicy"], json!("OrderedReady"), "defaulted like kube-apiserver");
    assert_eq!(sts["spec"]["updateStrategy"]["type"], json!("RollingUpdate"));
    assert_eq!(sts["metadata"]["generation"], json!(1));
}
