//! Pod Security admission as kubectl users meet it (issue 16, done-when 2): a privileged pod
//! refused in a namespace labelled `enforce=restricted` with kube's exact message, kube's
//! warnings under `warn=baseline` and for workloads, the warnings of a raised enforce label,
//! an invalid label refused, and an exemption by username from `--admission-control-config-file`
//! honoured, with kube's audit annotations.

use std::path::{Path, PathBuf};

use kapi_e2e::{Kapi, OutputExt, Request};
use serde_json::{json, Value};

fn manifest(dir: &Path, name: &str, obj: &Value) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(obj).unwrap()).unwrap();
    path
}

fn privileged_pod(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "nginx", "securityContext": {"privileged": true}}]}})
}

const RESTRICTED: &str = "privileged (container \"c\" must not set securityContext.privileged=true), \
    allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
    unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
    runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
    seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

const BASELINE: &str = "privileged (container \"c\" must not set securityContext.privileged=true)";

#[test]
fn namespace_labels_enforce_and_warn_with_kube_texts() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();
    kapi.kubectl(&["create", "namespace", "locked"]).ok("create locked");
    kapi.kubectl(&["label", "namespace", "locked", "pod-security.kubernetes.io/enforce=restricted"]).ok("label locked");

    // enforce=restricted: refused with every violation, in kube's order; nothing stored.
    let pod = manifest(dir.path(), "priv", &privileged_pod("locked", "priv"));
    let (ok, stdout, stderr) = kapi.kubectl(&["create", "-f", pod.to_str().unwrap()]).outcome();
    assert!(!ok, "{stdout}");
    let message = format!("pods \"priv\" is forbidden: violates PodSecurity \"restricted:latest\": {RESTRICTED}");
    assert!(stderr.contains(&format!("Error from server (Forbidden): error when creating \"{}\": {message}", pod.display())), "{stderr}");
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/locked/pods").json(&privileged_pod("locked", "priv")));
    assert_eq!(
        (r.status, r.body["reason"].as_str(), r.body["message"].as_str()),
        (403, Some("Forbidden"), Some(message.as_str())),
        "{}",
        r.raw
    );
    assert_eq!(r.body["details"], json!({"name": "priv", "kind": "pods"}), "{}", r.raw);
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/locked/pods/priv")).status, 404);

    // A workload is never refused: its template is warned about at the enforce level.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "locked"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": privileged_pod("locked", "x")["spec"].clone()}}});
    let path = manifest(dir.path(), "deployment", &deployment);
    let (ok, stdout, stderr) = kapi.kubectl(&["create", "-f", path.to_str().unwrap()]).outcome();
    assert!(ok, "{stderr}");
    assert!(stdout.contains("deployment.apps/web created"), "{stdout}");
    assert!(stderr.contains(&format!("Warning: would violate PodSecurity \"restricted:latest\": {RESTRICTED}")), "{stderr}");

    // warn=baseline: the pod goes in, and kubectl prints kube's warning.
    kapi.kubectl(&["create", "namespace", "watched"]).ok("create watched");
    kapi.kubectl(&["label", "namespace", "watched", "pod-security.kubernetes.io/warn=baseline"]).ok("label watched");
    let pod = manifest(dir.path(), "watched", &privileged_pod("watched", "priv"));
    let (ok, stdout, stderr) = kapi.kubectl(&["create", "-f", pod.to_str().unwrap()]).outcome();
    assert!(ok, "{stderr}");
    assert!(stdout.contains("pod/priv created"), "{stdout}");
    assert!(stderr.contains(&format!("Warning: would violate PodSecurity \"baseline:latest\": {BASELINE}")), "{stderr}");

    // Raising enforce lists the pods already there that the new level would refuse.
    let (ok, _, stderr) = kapi.kubectl(&["label", "namespace", "watched", "pod-security.kubernetes.io/enforce=baseline"]).outcome();
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("Warning: existing pods in namespace \"watched\" violate the new PodSecurity enforce level \"baseline:latest\""),
        "{stderr}"
    );
    assert!(stderr.contains("Warning: priv: privileged"), "{stderr}");

    // A label kube cannot read is refused.
    let (ok, _, stderr) =
        kapi.kubectl(&["label", "namespace", "watched", "--overwrite", "pod-security.kubernetes.io/enforce=strict"]).outcome();
    assert!(!ok);
    assert!(
        stderr.contains(
            "Namespace \"watched\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
        ),
        "{stderr}"
    );
}

const ADMISSION_CONFIG: &str = r#"apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
    exemptions:
      usernames: ["ci-bot"]
"#;

const AUDIT_POLICY: &str =
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources:\n  - group: \"\"\n    resources: [\"pods\"]\n";

#[test]
fn configured_defaults_apply_and_exempt_users_are_let_through() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("admission.yaml");
    std::fs::write(&config, ADMISSION_CONFIG).unwrap();
    let policy = dir.path().join("audit-policy.yaml");
    std::fs::write(&policy, AUDIT_POLICY).unwrap();
    let log = dir.path().join("audit.log");
    let (config, policy, log_arg) =
        (config.to_string_lossy().into_owned(), policy.to_string_lossy().into_owned(), log.to_string_lossy().into_owned());
    let kapi =
        Kapi::start_with(&["--admission-control-config-file", &config, "--audit-policy-file", &policy, "--audit-log-path", &log_arg])
            .expect("start kapi");

    // The configured default (enforce=baseline) holds in an unlabelled namespace ...
    let pod = manifest(dir.path(), "priv", &privileged_pod("default", "priv"));
    let (ok, _, stderr) = kapi.kubectl(&["create", "-f", pod.to_str().unwrap()]).outcome();
    assert!(!ok);
    assert!(stderr.contains(&format!("pods \"priv\" is forbidden: violates PodSecurity \"baseline:latest\": {BASELINE}")), "{stderr}");

    // ... but not for the exempt user.
    let (ok, stdout, stderr) = kapi.kubectl(&["--as=ci-bot", "--as-group=system:masters", "create", "-f", pod.to_str().unwrap()]).outcome();
    assert!(ok, "{stderr}");
    assert!(stdout.contains("pod/priv created"), "{stdout}");
    assert!(!stderr.contains("PodSecurity"), "{stderr}");

    // kube's audit annotations say which policy refused and why the other went through.
    let creates = |events: &[Value]| -> Vec<Value> {
        events.iter().filter(|e| e["verb"] == "create" && e["stage"] == "ResponseComplete").cloned().collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let events = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON event per line")).collect();
        if creates(&events).len() >= 2 || std::time::Instant::now() > deadline {
            break events;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let creates = creates(&events);
    assert_eq!(creates.len(), 2, "{events:?}");
    assert_eq!(creates[0]["responseStatus"]["code"], 403);
    assert_eq!(creates[0]["annotations"]["pod-security.kubernetes.io/enforce-policy"], "baseline:latest", "{}", creates[0]);
    assert_eq!(creates[1]["annotations"]["pod-security.kubernetes.io/exempt"], "user", "{}", creates[1]);
}

#[test]
fn a_configuration_kube_refuses_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("admission.yaml");
    std::fs::write(&config, ADMISSION_CONFIG.replace("enforce: baseline", "enforce: strict")).unwrap();
    // Run the binary itself: the harness would wait for a readiness that never comes.
    let child = std::process::Command::new(kapi_e2e::kapi_binary().expect("kapi binary"))
        .args(["--secure-port", "0", "--bind-address", "127.0.0.1", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--admission-control-config-file")
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn kapi");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()).ok());
    let Ok(output) = rx.recv_timeout(std::time::Duration::from_secs(30)) else {
        std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status().ok();
        panic!("kapi kept running with an invalid PodSecurity configuration");
    };
    let output = output.expect("wait for kapi");
    let (status, stderr) = (output.status, String::from_utf8_lossy(&output.stderr).into_owned());
    assert!(!status.success());
    assert!(
        stderr.contains(
            r#"couldn't init admission plugin "PodSecurity": PodSecurity invalid: defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted"#
        ),
        "{stderr}"
    );
}
