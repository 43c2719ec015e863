//! Every kubectl from 1.27 to 1.33 validates against kapi: 1.27/1.28 load the OpenAPI v2
//! document in gnostic protobuf, later ones OpenAPI v3. All learn that kapi validates fields
//! itself and send `fieldValidation=Strict`, so an unknown field is refused by the server.
//! The versions not installed beside kubectl are skipped, each with a message.

use kapi_e2e::{versioned_kubectl_or_skip, Kapi};

#[test]
fn kubectl_1_27_to_1_33_explain_and_validate() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  a: b\nbogus: 1\n").expect("write");
    for minor in 27..=33 {
        let version = format!("1.{minor}");
        let Some(bin) = versioned_kubectl_or_skip(&version) else { continue };
        let out = kapi.kubectl_with(&bin, &["explain", "deployment.spec.replicas"]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "kubectl {version} explain: {}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("replicas") && text.contains("<integer>"), "kubectl {version} explain:\n{text}");

        let out = kapi.kubectl_with(&bin, &["create", "-f", &bad.display().to_string()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "kubectl {version} created an object with an unknown field");
        assert!(err.contains(r#"unknown field "bogus""#), "kubectl {version}: {err}");
        assert!(!err.contains("NotFound") && !err.contains("406"), "kubectl {version} could not load OpenAPI: {err}");
    }
    let left = kapi.kubectl(&["get", "configmap", "bad"]);
    assert!(!left.status.success(), "the invalid ConfigMap must not exist");
}
