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

/// The objects of `fixtures/platform.yaml` as (API path, `kubectl apply` name).
const PLATFORM: &[(&str, &str)] = &[
    ("/api/v1/namespaces/platform", "namespace/platform"),
    ("/api/v1/namespaces/platform/serviceaccounts/operator", "serviceaccount/operator"),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles/platform-operator", "clusterrole.rbac.authorization.k8s.io/platform-operator"),
    (
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/platform-operator",
        "clusterrolebinding.rbac.authorization.k8s.io/platform-operator",
    ),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/platform/roles/leader-election", "role.rbac.authorization.k8s.io/leader-election"),
    (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/platform/rolebindings/leader-election",
        "rolebinding.rbac.authorization.k8s.io/leader-election",
    ),
    ("/api/v1/namespaces/platform/configmaps/operator-config", "configmap/operator-config"),
    ("/apis/apps/v1/namespaces/platform/deployments/operator", "deployment.apps/operator"),
    ("/api/v1/namespaces/platform/services/operator-webhook", "service/operator-webhook"),
    ("/apis/networking.k8s.io/v1/namespaces/platform/networkpolicies/operator", "networkpolicy.networking.k8s.io/operator"),
    (
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/platform-operator",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/platform-operator",
    ),
    (
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/platform-operator",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/platform-operator",
    ),
];

/// Checks that `out` has the line `<name> <verb>` for every object of the platform install.
fn each_object(out: &str, verb: &str, step: &str) {
    for (_, name) in PLATFORM {
        let line = format!("{name} {verb}");
        assert!(out.lines().any(|l| l.trim() == line), "{step}: no {line:?} in:\n{out}");
    }
}

/// An install's life as a platform engineer lives it: `kubectl apply` client-side, the same
/// apply again (nothing to change: every object `unchanged`), then the move to server-side
/// apply, which must neither conflict with the client-side owner nor fail kubectl's managed
/// fields migration, after which kubectl's server-side manager owns what the client-side one
/// did (kube's empty fields omitted, its defaults the same, its JSON patch on resourceVersion).
#[test]
fn client_side_install_moves_to_server_side_apply() {
    let kapi = Kapi::start().expect("start kapi");
    let file = kapi_e2e::fixture("platform.yaml").display().to_string();
    let created = kapi.kubectl(&["apply", "-f", &file]).ok("first client-side apply");
    each_object(&created, "created", "first apply");

    let again = kapi.kubectl(&["apply", "-f", &file]).ok("second client-side apply");
    each_object(&again, "unchanged", "re-apply");

    let (ok, out, err) = kapi.kubectl(&["apply", "--server-side", "-f", &file]).outcome();
    assert!(ok, "server-side apply failed:\nstdout:\n{out}\nstderr:\n{err}");
    each_object(&out, "serverside-applied", "server-side apply");
    assert!(!err.contains("managed fields migration"), "kubectl warned about the migration:\n{err}");
    assert!(!err.contains("conflict"), "{err}");

    for (path, name) in PLATFORM {
        let obj = kapi.get_json(path);
        let managed = obj["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
        let managers: Vec<(&str, &str)> = managed
            .iter()
            .map(|m| (m["manager"].as_str().unwrap_or(""), m["operation"].as_str().unwrap_or("")))
            .collect();
        assert!(!managers.iter().any(|(m, _)| *m == "kubectl-client-side-apply"), "{name}: client-side owner left: {managers:?}");
        // The Namespace and the ServiceAccount carry nothing but their names, which no
        // manager owns: kubectl's entry, empty, is dropped as kube drops empty entries.
        if name.starts_with("namespace/") || name.starts_with("serviceaccount/") {
            continue;
        }
        let ssa = managed
            .iter()
            .find(|m| m["manager"] == "kubectl" && m["operation"] == "Apply")
            .unwrap_or_else(|| panic!("{name}: no kubectl Apply entry: {managers:?}"));
        assert!(ssa["fieldsV1"].as_object().is_some_and(|f| !f.is_empty()), "{name}: {ssa}");
    }
    // And a later server-side apply of the same manifests changes nothing.
    let rv = |kapi: &Kapi| kapi.get_json(PLATFORM[3].0)["metadata"]["resourceVersion"].clone();
    let before = rv(&kapi);
    kapi.kubectl(&["apply", "--server-side", "-f", &file]).ok("second server-side apply");
    assert_eq!(rv(&kapi), before, "a no-op server-side apply wrote the binding");
}
