//! Each check family against JSON fixtures (`fixtures/*.json`): a pod spec (and metadata), a
//! level and version, and kube's aggregated detail ("" when allowed). `harden` fills in what
//! the restricted level asks of every pod and container where the case leaves the field out,
//! so a restricted case shows only the violation it is about.

use serde_json::{json, Value};

use super::super::api::{Level, LevelVersion, Version};
use super::*;

fn harden(spec: &mut Value) {
    let sc = spec.as_object_mut().unwrap().entry("securityContext").or_insert_with(|| json!({}));
    let sc = sc.as_object_mut().unwrap();
    sc.entry("runAsNonRoot").or_insert(json!(true));
    sc.entry("seccompProfile").or_insert(json!({"type": "RuntimeDefault"}));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            let sc = c.as_object_mut().unwrap().entry("securityContext").or_insert_with(|| json!({}));
            let sc = sc.as_object_mut().unwrap();
            sc.entry("allowPrivilegeEscalation").or_insert(json!(false));
            sc.entry("capabilities").or_insert(json!({"drop": ["ALL"]}));
        }
    }
}

fn run(fixtures: &str) {
    let cases: Vec<Value> = serde_json::from_str(fixtures).expect("fixtures parse");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["case"].as_str().unwrap();
        let (level, err) = Level::parse(case["level"].as_str().unwrap());
        assert!(err.is_none(), "{name}: level");
        let (version, err) = Version::parse(case.get("version").and_then(Value::as_str).unwrap_or("latest"));
        assert!(err.is_none(), "{name}: version");
        let mut spec = case["spec"].clone();
        if case.get("harden").and_then(Value::as_bool) == Some(true) {
            harden(&mut spec);
        }
        let metadata = case.get("metadata").cloned().unwrap_or_else(|| json!({}));
        let got = detail(&evaluate(LevelVersion { level, version }, &metadata, &spec));
        let want = case["expect"].as_str().unwrap();
        if got != want {
            failures.push(format!("{name}:\n  want {want}\n  got  {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn host_namespaces_paths_ports_probes_and_processes() {
    run(include_str!("fixtures/host.json"));
}

#[test]
fn privileged_capabilities_and_privilege_escalation() {
    run(include_str!("fixtures/privileges.json"));
}

#[test]
fn app_armor_selinux_and_seccomp_profiles() {
    run(include_str!("fixtures/profiles.json"));
}

#[test]
fn proc_mount_sysctls_and_volume_types() {
    run(include_str!("fixtures/proc_sysctls_volumes.json"));
}

#[test]
fn run_as_non_root_and_run_as_user() {
    run(include_str!("fixtures/users.json"));
}

#[test]
fn violations_come_in_kube_order() {
    run(include_str!("fixtures/order.json"));
}

#[test]
fn check_ids_sort_as_kube_sorts_them() {
    let ids: Vec<&str> = registry().iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        [
            "appArmorProfile",
            "capabilities_baseline",
            "hostNamespaces",
            "hostPathVolumes",
            "hostPorts",
            "hostProbesAndHostLifecycle",
            "privileged",
            "procMount",
            "seLinuxOptions",
            "seccompProfile_baseline",
            "sysctls",
            "windowsHostProcess",
            "allowPrivilegeEscalation",
            "capabilities_restricted",
            "procMount_restricted",
            "restrictedVolumes",
            "runAsNonRoot",
            "runAsUser",
            "seccompProfile_restricted",
        ]
    );
    assert_eq!(max_minor(), EMULATED_MINOR);
}

#[test]
fn go_quoting() {
    assert_eq!(go_quote("unconfined"), r#""unconfined""#);
    assert_eq!(go_quote("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\x01""#);
}
