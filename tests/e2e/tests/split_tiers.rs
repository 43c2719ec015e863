//! The three tiers as separate services (issue 18): `kapi-core`, `kapi-extensions` and two
//! `kapi-aggregator`s on one store with NATS, haproxy in front of the aggregators. kubectl
//! works through haproxy for built-in kinds, RBAC, patches and applies, CRDs and custom
//! resources; a CRD seen Established through one aggregator is in both aggregators' merged
//! discovery at once; a forbidden user is refused at the front door; the tiers behind it trust only
//! the aggregator's front-proxy certificate.

use std::path::Path;
use std::time::Duration;

use kapi_e2e::{wait_for, Endpoint, Haproxy, Kapi, NatsServer, OutputExt, Request};
use serde_json::{json, Value};

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// A kubeconfig for the admin user at `port` (haproxy's).
fn kubeconfig(dir: &Path, pki: &Path, port: u16) -> std::path::PathBuf {
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "lb", "cluster": {"server": format!("https://127.0.0.1:{port}"), "certificate-authority": pki.join("ca.crt")}}],
        "users": [{"name": "admin", "user": {"client-certificate": pki.join("admin.crt"), "client-key": pki.join("admin.key")}}],
        "contexts": [{"name": "lb", "context": {"cluster": "lb", "user": "admin"}}],
        "current-context": "lb",
    });
    let path = dir.join("kubeconfig-lb");
    std::fs::write(&path, config.to_string()).expect("write the kubeconfig");
    path
}

fn has_group(discovery: &Value, group: &str) -> bool {
    discovery["items"].as_array().is_some_and(|items| items.iter().any(|g| g["metadata"]["name"] == group))
}

#[test]
fn three_tiers_as_services_behind_haproxy_serve_kubectl_unchanged() {
    let nats = NatsServer::start().expect("start nats-server");
    let nats_url = nats.url();
    let tier_args = ["--nats-url", nats_url.as_str(), "--endpoint-reconciler-type", "none"];
    let core = Kapi::start_binary("kapi-core", &tier_args).expect("start kapi-core");
    let extensions = core.start_tier("kapi-extensions", &tier_args).expect("start kapi-extensions");
    let (core_url, extensions_url) = (core.url(), extensions.url());
    let aggregator_args =
        ["--nats-url", nats_url.as_str(), "--core-url", core_url.as_str(), "--extensions-url", extensions_url.as_str()];
    let aggregators = [
        core.start_tier("kapi-aggregator", &aggregator_args).expect("start aggregator 1"),
        core.start_tier("kapi-aggregator", &aggregator_args).expect("start aggregator 2"),
    ];
    let pki = core.pki_dir();
    let haproxy = Haproxy::start(&aggregators.iter().map(Kapi::port).collect::<Vec<_>>(), &pki.join("ca.crt")).expect("haproxy");
    let scratch = tempfile::tempdir().expect("scratch dir");
    let config = kubeconfig(scratch.path(), &pki, haproxy.port());
    let kubectl = |args: &[&str]| core.kubectl_config(&config, args);

    // Built-in kinds, patches and applies, through the front door.
    kubectl(&["create", "namespace", "split"]).ok("create namespace");
    kubectl(&["-n", "split", "create", "configmap", "settings", "--from-literal=mode=fast"]).ok("create configmap");
    kubectl(&["-n", "split", "patch", "configmap", "settings", "-p", r#"{"data":{"mode":"slow"}}"#]).ok("strategic merge patch");
    let applied = scratch.path().join("deploy.yaml");
    std::fs::write(&applied, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: split}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: nginx}]}\n").expect("write");
    kubectl(&["apply", "-f", applied.to_str().unwrap()]).ok("client-side apply");
    kubectl(&["apply", "--server-side", "-f", applied.to_str().unwrap()]).ok("server-side apply");
    let mode = kubectl(&["-n", "split", "get", "configmap", "settings", "-o", "jsonpath={.data.mode}"]).ok("get configmap");
    assert_eq!(mode, "slow");
    let replicas = kubectl(&["-n", "split", "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]).ok("get deployment");
    assert_eq!(replicas, "2");
    let resources = kubectl(&["api-resources", "-o", "name"]).ok("api-resources");
    for kind in ["pods", "deployments.apps", "customresourcedefinitions.apiextensions.k8s.io", "apiservices.apiregistration.k8s.io"] {
        assert!(resources.lines().any(|l| l == kind), "{kind} missing from discovery:\n{resources}");
    }
    kubectl(&["explain", "deployment.spec.replicas"]).ok("explain a built-in kind");

    // A CRD through the front door: served by the extensions tier, and in both aggregators'
    // discovery as soon as a client can see it Established (discovery is a consistent read:
    // an aggregator whose CRD cache lags catches up first).
    let crd = scratch.path().join("crd.yaml");
    std::fs::write(&crd, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.split.example.com}\nspec:\n  group: split.example.com\n  names: {kind: Widget, plural: widgets, singular: widget, shortNames: [wd]}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: integer, description: widget size}}}}}}\n").expect("write");
    kubectl(&["apply", "-f", crd.to_str().unwrap()]).ok("create the CRD");
    kubectl(&["wait", "--for", "condition=Established", "crd/widgets.split.example.com", "--timeout=30s"]).ok("Established");
    for aggregator in &aggregators {
        let r = aggregator.request(&Request::get("/apis").accept(AGGREGATED));
        assert!(has_group(&r.body, "split.example.com"), "Established, yet not in aggregator {}'s discovery:\n{}", aggregator.port(), aggregator.log());
    }
    // The same, five times over, seen Established through one aggregator and asked of the
    // other at once: the race a client meets when the load balancer alternates.
    for i in 0..5 {
        let group = format!("g{i}.split.example.com");
        let body = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("things.{group}")},
            "spec": {"group": group, "scope": "Namespaced", "names": {"kind": "Thing", "plural": "things"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]},
        });
        let created = aggregators[0].request(&Request::new("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions").json(&body));
        assert_eq!(created.status, 201, "{}", created.raw);
        let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.{group}");
        let established = wait_for(Duration::from_secs(10), || {
            let crd = aggregators[0].request(&Request::get(&path));
            crd.body["status"]["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True")).then_some(())
        });
        assert!(established.is_some(), "{group} not Established");
        let r = aggregators[1].request(&Request::get("/apis").accept(AGGREGATED));
        assert!(has_group(&r.body, &group), "{group} Established through aggregator 1, yet not in aggregator 2's discovery");
    }
    let widget = scratch.path().join("widget.yaml");
    std::fs::write(&widget, "apiVersion: split.example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: split}\nspec: {size: 3}\n").expect("write");
    kubectl(&["apply", "-f", widget.to_str().unwrap()]).ok("create a custom resource");
    kubectl(&["-n", "split", "patch", "wd", "w1", "--type", "merge", "-p", r#"{"spec":{"size":4}}"#]).ok("merge patch");
    assert_eq!(kubectl(&["-n", "split", "get", "wd", "w1", "-o", "jsonpath={.spec.size}"]).ok("get"), "4");
    let explained = kubectl(&["explain", "widgets.spec.size"]).ok("explain a custom resource");
    assert!(explained.contains("widget size"), "{explained}");
    let apiservice = kubectl(&["get", "apiservice", "v1.split.example.com", "-o", "jsonpath={.status.conditions[0].reason}"]).ok("its APIService");
    assert_eq!(apiservice, "Local");

    // RBAC: refused at the front door, allowed once bound (each tier follows the store).
    let viewer = core.issue_client_cert("viewer", &[]);
    let as_viewer = |path: &str| Endpoint::new(format!("https://127.0.0.1:{}", haproxy.port()), pki.clone(), scratch.path().to_owned()).try_request(&Request::get(path).as_user(&viewer)).expect("request through haproxy");
    assert_eq!(as_viewer("/api/v1/namespaces/split/configmaps").status, 403);
    kubectl(&["-n", "split", "create", "rolebinding", "viewer", "--clusterrole=view", "--user=viewer"]).ok("bind view");
    let allowed = wait_for(Duration::from_secs(10), || (as_viewer("/api/v1/namespaces/split/configmaps").status == 200).then_some(()));
    assert!(allowed.is_some(), "the binding never reached the tiers");

    // The tiers behind the aggregator trust identity headers only under its certificate.
    let forged = core.request(&Request::get("/api/v1/namespaces/split/configmaps").as_user(&viewer).header("X-Remote-User", "kapi-admin").header("X-Remote-Group", "system:masters"));
    assert_eq!(forged.status, 200, "viewer may list here, as itself: {}", forged.raw);
    let secrets = core.request(&Request::get("/api/v1/namespaces/split/secrets").as_user(&viewer).header("X-Remote-User", "kapi-admin").header("X-Remote-Group", "system:masters"));
    assert_eq!(secrets.status, 403, "headers from a client without the front-proxy certificate are ignored: {}", secrets.raw);
    drop(nats);
}
