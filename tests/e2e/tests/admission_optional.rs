//! kube's admission plugins a cluster enables by name (issue 16): AlwaysPullImages,
//! DenyServiceExternalIPs, LimitPodHardAntiAffinityTopology, ExtendedResourceToleration,
//! NamespaceAutoProvision and AlwaysDeny, each with kube's effect and refusal; the
//! DefaultTolerationSeconds flags; and a plugin kapi does not implement, named in
//! `--enable-admission-plugins`, stops start-up instead of silently not running.

use std::process::Command;
use std::time::Duration;

use kapi_e2e::{kapi_binary, run_with_timeout, Kapi, Request};
use serde_json::{json, Value};

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn create(kapi: &Kapi, path: &str, body: &Value) -> kapi_e2e::HttpResponse {
    kapi.request(&Request::new("POST", path).json(body))
}

const PODS: &str = "/api/v1/namespaces/default/pods";

#[test]
fn plugins_enabled_by_name_do_what_kubes_do() {
    let kapi = Kapi::start_with(&[
        "--enable-admission-plugins",
        "AlwaysPullImages,DenyServiceExternalIPs,LimitPodHardAntiAffinityTopology,ExtendedResourceToleration,NamespaceAutoProvision",
        "--default-not-ready-toleration-seconds",
        "60",
    ])
    .expect("start kapi");

    // AlwaysPullImages: kubectl run's IfNotPresent becomes Always.
    let run = kapi.kubectl(&["run", "web", "--image=nginx:1.27", "--image-pull-policy=IfNotPresent"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let web = kapi.get_json(&format!("{PODS}/web"));
    assert_eq!(web["spec"]["containers"][0]["imagePullPolicy"], "Always");
    // DefaultTolerationSeconds with the flag's 60 for not-ready, kube's 300 for unreachable.
    let tolerations = web["spec"]["tolerations"].as_array().unwrap();
    let seconds = |key: &str| tolerations.iter().find(|t| t["key"] == key).map(|t| t["tolerationSeconds"].clone());
    assert_eq!(seconds("node.kubernetes.io/not-ready"), Some(json!(60)));
    assert_eq!(seconds("node.kubernetes.io/unreachable"), Some(json!(300)));

    // ExtendedResourceToleration: asking for a device tolerates its taint.
    let gpu =
        create(&kapi, PODS, &pod("gpu", json!({"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"example.com/gpu": "1"}}}]})));
    assert_eq!(gpu.status, 201, "{}", gpu.raw);
    assert!(
        gpu.body["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .contains(&json!({"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"})),
        "{}",
        gpu.body["spec"]["tolerations"]
    );

    // LimitPodHardAntiAffinityTopology: only the hostname key for required anti-affinity.
    let zone = pod(
        "zonal",
        json!({"containers": [{"name": "c", "image": "nginx"}], "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}}),
    );
    let refused = create(&kapi, PODS, &zone);
    assert_eq!(refused.status, 403, "{}", refused.raw);
    assert_eq!(
        refused.message(),
        "pods \"zonal\" is forbidden: affinity.PodAntiAffinity.RequiredDuringScheduling has TopologyKey topology.kubernetes.io/zone but only key kubernetes.io/hostname is allowed"
    );

    // DenyServiceExternalIPs: no new external IPs.
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
        "spec": {"selector": {"a": "b"}, "ports": [{"port": 80}], "externalIPs": ["192.0.2.10"]}});
    let denied = create(&kapi, "/api/v1/namespaces/default/services", &svc);
    assert_eq!(denied.status, 403, "{}", denied.raw);
    assert_eq!(denied.message(), "services \"ext\" is forbidden: use of external IPs is denied by admission control");
    let mut plain = svc.clone();
    plain["spec"].as_object_mut().unwrap().remove("externalIPs");
    assert_eq!(create(&kapi, "/api/v1/namespaces/default/services", &plain).status, 201);

    // NamespaceAutoProvision: a create in a namespace that does not exist makes it.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}});
    let provisioned = create(&kapi, "/api/v1/namespaces/fresh/configmaps", &cm);
    assert_eq!(provisioned.status, 201, "{}", provisioned.raw);
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/fresh")).status, 200);
}

#[test]
fn always_deny_and_unimplemented_plugins() {
    let kapi = Kapi::start_with(&["--enable-admission-plugins", "AlwaysDeny"]).expect("start kapi");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let denied = create(&kapi, "/api/v1/namespaces/default/configmaps", &cm);
    assert_eq!(denied.status, 403, "{}", denied.raw);
    assert_eq!(denied.message(), "configmaps \"c\" is forbidden: admission control is denying all modifications");
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/default/configmaps/c")).status, 404);
    drop(kapi);

    let bin = kapi_binary().expect("kapi binary");
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin);
    cmd.args(["--data-dir", dir.path().to_str().unwrap(), "--secure-port", "0", "--enable-admission-plugins", "PodNodeSelector"]);
    let out = run_with_timeout(&mut cmd, Duration::from_secs(30)).expect("run kapi");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("admission plugins PodNodeSelector are not implemented by kapi"), "{said}");
}
