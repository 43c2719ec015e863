//! prometheus-operator's ten CRDs (up to 830 KB each), installed as users install them:
//! `kubectl create` and `kubectl apply --server-side`; client-side `kubectl apply` of the
//! largest is refused for its last-applied annotation as kube refuses it. Objects written from
//! the operator's documented examples are served with their short names, categories and printer
//! columns.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kapi_e2e::{OutputExt, fixture, wait_for, Kapi};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const NAMES: [&str; 10] = [
    "alertmanagerconfigs",
    "alertmanagers",
    "podmonitors",
    "probes",
    "prometheusagents",
    "prometheuses",
    "prometheusrules",
    "scrapeconfigs",
    "servicemonitors",
    "thanosrulers",
];

fn crd_file(plural: &str) -> PathBuf {
    fixture(&format!("crds/prometheus-operator/monitoring.coreos.com_{plural}.yaml"))
}

fn kubectl(kapi: &Kapi, args: &[&str]) -> (bool, String, String) {
    kapi.kubectl(args).outcome()
}

fn ok(kapi: &Kapi, args: &[&str]) -> String {
    kapi.kubectl(args).ok(&format!("kubectl {}", args.join(" ")))
}

fn all_established(kapi: &Kapi) -> bool {
    let list = kapi.get_json(CRDS);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items.len() == NAMES.len()
        && items.iter().all(|crd| {
            crd["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Established" && c["status"] == "True")
        })
}

fn install_all(kapi: &Kapi, args: &[&str]) -> Duration {
    let started = Instant::now();
    for plural in NAMES {
        let file = crd_file(plural);
        let mut full: Vec<&str> = args.to_vec();
        full.extend(["-f", file.to_str().unwrap_or_default()]);
        ok(kapi, &full);
    }
    assert!(wait_for(Duration::from_secs(20), || all_established(kapi).then_some(())).is_some(), "all ten Established");
    started.elapsed()
}

const EXAMPLES: &str = r#"
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: example-app
  labels: {team: frontend}
spec:
  selector:
    matchLabels: {app: example-app}
  endpoints:
  - port: web
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: example-app
  labels: {team: frontend}
spec:
  selector:
    matchLabels: {app: example-app}
  podMetricsEndpoints:
  - port: web
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: prometheus-example-rules
  labels: {prometheus: example, role: alert-rules}
spec:
  groups:
  - name: ./example.rules
    rules:
    - alert: ExampleAlert
      expr: vector(1)
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata:
  name: prometheus
spec:
  serviceAccountName: prometheus
  version: v2.55.0
  replicas: 1
  serviceMonitorSelector:
    matchLabels: {team: frontend}
  resources:
    requests: {memory: 400Mi}
  enableAdminAPI: false
"#;

fn examples(kapi: &Kapi) {
    let path = kapi.data_dir().join("examples.yaml");
    std::fs::write(&path, EXAMPLES).expect("write examples");
    ok(kapi, &["apply", "-f", path.to_str().unwrap_or_default()]);
    let smon = ok(kapi, &["get", "smon"]);
    assert!(smon.lines().nth(1).is_some_and(|l| l.starts_with("example-app")), "{smon}");
    assert!(ok(kapi, &["get", "podmonitors", "-o", "name"]).contains("podmonitor.monitoring.coreos.com/example-app"));
    assert!(ok(kapi, &["get", "promrule", "-o", "name"]).contains("prometheusrule.monitoring.coreos.com/prometheus-example-rules"));
    let prom = ok(kapi, &["get", "prom"]);
    let header: Vec<&str> = prom.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "VERSION", "DESIRED", "READY", "RECONCILED", "AVAILABLE", "AGE"], "{prom}");
    let row: Vec<&str> = prom.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(&row[..3], ["prometheus", "v2.55.0", "1"], "{prom}");
    // The category expands to every kind of the operator.
    let category = ok(kapi, &["get", "prometheus-operator", "-o", "name"]);
    for name in ["servicemonitor.monitoring.coreos.com/example-app", "prometheus.monitoring.coreos.com/prometheus"] {
        assert!(category.contains(name), "{category}");
    }
    // Prometheus has the scale subresource, over its shards (specReplicasPath .spec.shards).
    ok(kapi, &["scale", "prometheus", "prometheus", "--replicas=2"]);
    let scaled = kapi.get_json("/apis/monitoring.coreos.com/v1/namespaces/default/prometheuses/prometheus");
    assert_eq!((scaled["spec"]["shards"].clone(), scaled["spec"]["replicas"].clone()), (serde_json::json!(2), serde_json::json!(1)));
    // Schema validation of a real schema: an int-or-string port, a wrong type refused.
    let (success, _, stderr) = kubectl(kapi, &["patch", "smon", "example-app", "--type=merge", "-p", r#"{"spec":{"endpoints":[{"port":"web","interval":5}]}}"#]);
    assert!(!success, "a number where the schema says string is refused");
    assert!(stderr.contains("spec.endpoints[0].interval: Invalid value: \"integer\""), "{stderr}");
}

#[test]
fn installed_with_kubectl_create() {
    let kapi = Kapi::start().expect("start kapi");
    let took = install_all(&kapi, &["create"]);
    eprintln!("ten prometheus-operator CRDs created and Established in {took:?}");
    examples(&kapi);

    // Client-side apply of the largest: the last-applied annotation is too big, as on kube.
    let largest = crd_file("prometheuses");
    assert!(std::fs::metadata(&largest).map(|m| m.len()).unwrap_or(0) > 800_000);
    let (success, _, stderr) = kubectl(&kapi, &["apply", "-f", largest.to_str().unwrap_or_default()]);
    assert!(!success, "client-side apply of an 830 KB CRD must fail");
    assert!(
        stderr.contains(r#"The CustomResourceDefinition "prometheuses.monitoring.coreos.com" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"#),
        "{stderr}"
    );
}

#[test]
fn installed_with_kubectl_apply_server_side() {
    let kapi = Kapi::start().expect("start kapi");
    let took = install_all(&kapi, &["apply", "--server-side"]);
    eprintln!("ten prometheus-operator CRDs applied server-side and Established in {took:?}");
    // Re-applying changes nothing.
    let before = kapi.get_json(&format!("{CRDS}/prometheuses.monitoring.coreos.com"))["metadata"]["resourceVersion"].clone();
    let file = crd_file("prometheuses");
    ok(&kapi, &["apply", "--server-side", "-f", file.to_str().unwrap_or_default()]);
    let after = kapi.get_json(&format!("{CRDS}/prometheuses.monitoring.coreos.com"))["metadata"]["resourceVersion"].clone();
    assert_eq!(before, after, "a no-op apply keeps the resourceVersion");
    examples(&kapi);
}
