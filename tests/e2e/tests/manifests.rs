//! The manifests we ship (k8s-manifests/) are valid Kubernetes objects: the default kubectl
//! applies them to a real kapi with strict server-side field validation, and kapi stores them
//! with the defaults kube-apiserver would add. The kustomize overlays (all-in-one, split)
//! render, and every object they render passes a server-side dry run against kapi, with the
//! Prometheus operator's and the FoundationDB operator's CRDs installed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kapi_e2e::{fixture, run_with_timeout, wait_for, Kapi, OutputExt};
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

/// The CRDs the overlays' custom objects need, as test fixtures: the Prometheus operator's
/// ServiceMonitor (an unchanged copy) and a FoundationDBCluster CRD written for this test.
const OPERATOR_CRDS: &[(&str, &str)] = &[
    ("crds/prometheus-operator/monitoring.coreos.com_servicemonitors.yaml", "servicemonitors.monitoring.coreos.com"),
    ("crds/foundationdb-operator/apps.foundationdb.org_foundationdbclusters.yaml", "foundationdbclusters.apps.foundationdb.org"),
];

fn established(kapi: &Kapi, name: &str) -> bool {
    let crd = kapi.get_json(&format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"));
    crd["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Established" && c["status"] == "True")
}

/// `kubectl kustomize k8s-manifests/overlays/<overlay>`, written to a file in `dir`.
fn render(overlay: &str, dir: &Path) -> (PathBuf, String) {
    let path = manifest(&format!("overlays/{overlay}"));
    let mut cmd = Command::new("kubectl");
    cmd.arg("kustomize").arg(&path);
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60)).expect("kubectl kustomize").ok(&format!("kubectl kustomize {overlay}"));
    let file = dir.join(format!("{overlay}.yaml"));
    std::fs::write(&file, &out).expect("write the rendered overlay");
    (file, out)
}

/// The rendered objects as kubectl names them (`deployment.apps/kapi`), from the server's
/// dry-run answer.
fn kubectl_name(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or_default().to_lowercase();
    let group = obj["apiVersion"].as_str().unwrap_or_default().rsplit_once('/').map(|(g, _)| g.to_owned());
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    match group {
        Some(g) => format!("{kind}.{g}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// A Go duration as kube's flags take it (`10s`, `1m0s`, `1h`), in seconds.
fn go_seconds(text: &str) -> u64 {
    let (mut total, mut number) = (0u64, String::new());
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number.parse().unwrap_or_else(|_| panic!("duration {text:?}"));
        number.clear();
        total += n * match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => panic!("duration {text:?}"),
        };
    }
    assert!(number.is_empty(), "duration {text:?} lacks a unit");
    total
}

/// Checks one kapi container of a rendered Deployment: kube's probes on kapi's health paths,
/// only flags its binary has, and a grace period that covers the preStop sleep, the shutdown
/// delay and the drain bounded by the request timeout (docs/lifecycle.md).
fn check_kapi_pod(deployment: &Value, binary: &str, help: &str) -> Vec<String> {
    let name = deployment["metadata"]["name"].as_str().unwrap_or_default();
    let pod = &deployment["spec"]["template"]["spec"];
    let container = pod["containers"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["command"][0].as_str().is_some_and(|cmd| cmd.ends_with(&format!("/{binary}")))))
        .unwrap_or_else(|| panic!("{name}: no container runs {binary}: {pod}"));
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], json!("/readyz"), "{name}");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], json!("/livez"), "{name}");
    assert_eq!(container["readinessProbe"]["httpGet"]["scheme"], json!("HTTPS"), "{name}");
    let args: Vec<String> =
        container["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(str::to_owned)).collect();
    for arg in &args {
        let flag = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
        assert!(help.contains(&format!("{flag} ")), "{name}: {binary} has no flag {flag}");
    }
    let flag = |f: &str| args.iter().find_map(|a| a.strip_prefix(&format!("{f}="))).map(str::to_owned);
    let pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
        .as_array()
        .filter(|c| c.first() == Some(&json!("sleep")))
        .and_then(|c| c.get(1)?.as_str()?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{name}: no preStop sleep: {container}"));
    let delay = go_seconds(&flag("--shutdown-delay-duration").unwrap_or_else(|| panic!("{name}: no --shutdown-delay-duration")));
    let request_timeout = go_seconds(&flag("--request-timeout").unwrap_or_else(|| "1m0s".to_owned()));
    let watch_grace = go_seconds(&flag("--shutdown-watch-termination-grace-period").unwrap_or_else(|| "0s".to_owned()));
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
    let needed = pre_stop + delay + request_timeout.max(watch_grace) + 2;
    assert!(delay > 0, "{name}: a zero shutdown delay leaves load balancers no time to notice /readyz");
    assert!(grace >= needed, "{name}: terminationGracePeriodSeconds {grace} < {needed} (preStop, delay, drain)");
    args
}

/// `k8s-manifests/overlays/{all-in-one,split}` render with kubectl's kustomize, and
/// `kubectl apply --dry-run=server` (strict field validation, kubectl's default) of every
/// rendered object succeeds against kapi with the operators' CRDs installed; nothing is stored.
#[test]
fn kustomize_overlays_pass_server_dry_run() {
    let kapi = Kapi::start().expect("start kapi");
    for (file, crd) in OPERATOR_CRDS {
        kapi.kubectl(&["create", "-f", &fixture(file).display().to_string()]).ok(&format!("kubectl create {file}"));
        assert!(wait_for(Duration::from_secs(20), || established(&kapi, crd).then_some(())).is_some(), "{crd} Established");
    }
    // The overlays' namespace exists (a dry run creates nothing a later object could live in).
    kapi.kubectl(&["create", "namespace", "kapi"]).ok("create namespace kapi");
    let dir = tempfile::tempdir().expect("temp dir");
    let binaries = kapi_e2e::kapi_binary().expect("kapi binary");
    let help = |binary: &str| {
        let mut cmd = Command::new(binaries.with_file_name(binary));
        cmd.arg("--help");
        run_with_timeout(&mut cmd, Duration::from_secs(30)).expect("--help").ok(&format!("{binary} --help"))
    };

    for (overlay, tiers) in [
        ("all-in-one", &[("kapi", "kapi")][..]),
        ("split", &[("kapi", "kapi-aggregator"), ("kapi-core", "kapi-core"), ("kapi-extensions", "kapi-extensions")][..]),
    ] {
        let (file, yaml) = render(overlay, dir.path());
        let file = file.display().to_string();
        let documents = yaml.split("\n---\n").filter(|d| !d.trim().is_empty()).count();

        let out = kapi.kubectl(&["apply", "--dry-run=server", "-f", &file]).ok(&format!("{overlay}: kubectl apply --dry-run=server"));
        let reported: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(reported.len(), documents, "{overlay}: one line per rendered object:\n{out}");
        for line in &reported {
            let ok = line.ends_with(" created (server dry run)") || *line == "namespace/kapi configured (server dry run)";
            assert!(ok, "{overlay}: {line:?}\n{out}");
        }

        // The server's answers: what kapi would have stored.
        let answer: Value = serde_json::from_str(
            &kapi.kubectl(&["apply", "--dry-run=server", "-o", "json", "-f", &file]).ok(&format!("{overlay}: dry run -o json")),
        )
        .expect("dry-run answer JSON");
        let items: Vec<Value> = match answer["kind"].as_str() {
            Some("List") => answer["items"].as_array().cloned().unwrap_or_default(),
            _ => vec![answer.clone()],
        };
        assert_eq!(items.len(), documents, "{overlay}: every rendered object answered");
        let names: BTreeSet<String> = items.iter().map(kubectl_name).collect();
        let of_kind = |kind: &str| items.iter().filter(|o| o["kind"] == kind).collect::<Vec<_>>();
        for (service, binary) in tiers {
            for kind in ["deployment.apps", "service", "poddisruptionbudget.policy", "horizontalpodautoscaler.autoscaling", "networkpolicy.networking.k8s.io"] {
                assert!(names.contains(&format!("{kind}/{service}")), "{overlay}: no {kind}/{service} in {names:?}");
            }
            let deployment =
                of_kind("Deployment").into_iter().find(|d| d["metadata"]["name"] == *service).expect("the tier's Deployment");
            let args = check_kapi_pod(deployment, binary, &help(binary));
            let has = |flag: &str| args.iter().any(|a| a == flag);
            if *binary == "kapi-core" || *binary == "kapi-extensions" {
                assert!(has("--endpoint-reconciler-type=none"), "{overlay}/{service}: {args:?}");
                assert!(has("--requestheader-allowed-names=front-proxy-client"), "{overlay}/{service}: {args:?}");
                assert!(args.iter().any(|a| a.starts_with("--requestheader-client-ca-file=")), "{overlay}/{service}: {args:?}");
            }
            if *binary == "kapi-aggregator" {
                for (flag, tier) in [("--core-url", "kapi-core"), ("--extensions-url", "kapi-extensions")] {
                    assert!(has(&format!("{flag}=https://{tier}.kapi.svc:6443")), "{overlay}: {flag} names the {tier} Service: {args:?}");
                }
                assert!(args.iter().any(|a| a.starts_with("--proxy-client-cert-file=")), "{overlay}: {args:?}");
            }
            // The HPA scales that Deployment; the PDB covers its pods.
            let hpa = of_kind("HorizontalPodAutoscaler").into_iter().find(|h| h["metadata"]["name"] == *service).expect("HPA");
            assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], json!(service), "{overlay}");
            let pdb = of_kind("PodDisruptionBudget").into_iter().find(|p| p["metadata"]["name"] == *service).expect("PDB");
            let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
            for (k, v) in pdb["spec"]["selector"]["matchLabels"].as_object().into_iter().flatten() {
                assert_eq!(&pod_labels[k], v, "{overlay}: PDB {service} selects the Deployment's pods");
            }
            // TLS from Secrets: the serving certificate and the CAs are mounted, never generated.
            let secrets: BTreeSet<&str> = deployment["spec"]["template"]["spec"]["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v["secret"]["secretName"].as_str())
                .collect();
            assert!(secrets.contains("kapi-serving") && secrets.contains("kapi-pki"), "{overlay}/{service}: {secrets:?}");
        }
        assert_eq!(of_kind("Deployment").len(), tiers.len(), "{overlay}: one Deployment per tier");
        for shared in [
            "servicemonitor.monitoring.coreos.com/kapi",
            "foundationdbcluster.apps.foundationdb.org/kapi-fdb",
            "statefulset.apps/nats",
            "poddisruptionbudget.policy/nats",
            "networkpolicy.networking.k8s.io/nats",
        ] {
            assert!(names.contains(shared), "{overlay}: no {shared} in {names:?}");
        }
        let nats_conf = of_kind("ConfigMap").iter().find_map(|c| c["data"]["nats.conf"].as_str()).unwrap_or_default().to_owned();
        assert!(nats_conf.contains("jetstream {"), "{overlay}: NATS runs JetStream:\n{nats_conf}");

        // Nothing was stored: kubectl finds only the namespace the test created, unannotated.
        let (_, found, err) =
            kapi.kubectl(&["get", "-f", &file, "--ignore-not-found", "-o", "name"]).outcome();
        assert_eq!(found.trim(), "namespace/kapi", "{overlay}: a dry run stored objects:\n{found}\n{err}");
        let ns = kapi.get_json("/api/v1/namespaces/kapi");
        assert!(ns["metadata"]["annotations"].get("kubectl.kubernetes.io/last-applied-configuration").is_none(), "{ns}");
    }
}
