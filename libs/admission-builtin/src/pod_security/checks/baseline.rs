//! The baseline checks: what is known to escalate privileges (host namespaces, privileged
//! containers, added capabilities, hostPath volumes, host ports, unmasked /proc, custom
//! AppArmor, SELinux and seccomp profiles, unsafe sysctls, Windows host processes, probes and
//! lifecycle hooks aimed at other hosts). Texts are kube's, word for word.

use std::collections::BTreeSet;

use serde_json::Value;

use super::*;

pub(super) static CHECKS: &[Check] = &[
    Check { id: "appArmorProfile", level: Level::Baseline, revisions: &[rev(0, app_armor)] },
    Check { id: CAPABILITIES_BASELINE, level: Level::Baseline, revisions: &[rev(0, capabilities)] },
    Check { id: "hostNamespaces", level: Level::Baseline, revisions: &[rev(0, host_namespaces)] },
    Check { id: HOST_PATH_VOLUMES, level: Level::Baseline, revisions: &[rev(0, host_path_volumes)] },
    Check { id: "hostPorts", level: Level::Baseline, revisions: &[rev(0, host_ports)] },
    Check { id: "hostProbesAndHostLifecycle", level: Level::Baseline, revisions: &[rev(34, host_probes_and_lifecycle)] },
    Check { id: "privileged", level: Level::Baseline, revisions: &[rev(0, privileged)] },
    Check { id: PROC_MOUNT, level: Level::Baseline, revisions: &[rev(0, proc_mount), rev(35, proc_mount_1_35)] },
    Check { id: "seLinuxOptions", level: Level::Baseline, revisions: &[rev(0, se_linux_1_0), rev(31, se_linux_1_31)] },
    Check { id: SECCOMP_BASELINE, level: Level::Baseline, revisions: &[rev(0, seccomp_annotations), rev(19, seccomp)] },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        revisions: &[rev(0, sysctls_1_0), rev(27, sysctls_1_27), rev(29, sysctls_1_29), rev(32, sysctls_1_32), rev(37, sysctls_1_37)],
    },
    Check { id: "windowsHostProcess", level: Level::Baseline, revisions: &[rev(0, windows_host_process)] },
];

/// IDs restricted checks override.
pub(super) const CAPABILITIES_BASELINE: &str = "capabilities_baseline";
pub(super) const HOST_PATH_VOLUMES: &str = "hostPathVolumes";
pub(super) const PROC_MOUNT: &str = "procMount";
pub(super) const SECCOMP_BASELINE: &str = "seccompProfile_baseline";

const APP_ARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn app_armor(metadata: &Value, spec: &Value) -> Option<Violation> {
    let allowed = |t: &str| t == "RuntimeDefault" || t == "Localhost";
    let profile_type = |v: &Value| field(v, "appArmorProfile").map(|p| str_of(p, "type").to_owned());
    let mut setters = Vec::new();
    let mut values = BTreeSet::new();
    if let Some(t) = pod_security_context(spec).and_then(profile_type).filter(|t| !allowed(t)) {
        setters.push("pod".to_owned());
        values.insert(t);
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        if let Some(t) = security_context(c).and_then(profile_type).filter(|t| !allowed(t)) {
            bad.push(name(c));
            values.insert(t);
        }
    }
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    let mut annotations: Vec<String> = metadata
        .get("annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(APP_ARMOR_ANNOTATION_PREFIX))
        .filter_map(|(k, v)| {
            let v = v.as_str().unwrap_or("");
            let ok = v.is_empty() || v == "runtime/default" || v.starts_with("localhost/");
            (!ok).then(|| format!("{k}={}", go_quote(v)))
        })
        .collect();
    let mut values: Vec<String> = values.into_iter().collect();
    if !annotations.is_empty() {
        annotations.sort();
        setters.push(plural("annotation", "annotations", annotations.len()).to_owned());
        values.extend(annotations);
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        plural("forbidden AppArmor profile", "forbidden AppArmor profiles", values.len()),
        format!("{} must not set AppArmor profile type to {}", setters.join(" and "), join_quote(&values)),
    )
}

const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn capabilities(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut added = BTreeSet::new();
    for c in containers(spec) {
        let Some(caps) = security_context(c).and_then(|sc| field(sc, "capabilities")) else { continue };
        let mut valid = true;
        for cap in strings(caps, "add").filter(|cap| !DEFAULT_CAPABILITIES.contains(cap)) {
            valid = false;
            added.insert(cap);
        }
        if !valid {
            bad.push(name(c));
        }
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "non-default capabilities",
        format!("{} must not include {} in securityContext.capabilities.add", containers_named(&bad), join_quote(added)),
    )
}

fn host_namespaces(_: &Value, spec: &Value) -> Option<Violation> {
    let set: Vec<&str> = [("hostNetwork", "hostNetwork=true"), ("hostPID", "hostPID=true"), ("hostIPC", "hostIPC=true")]
        .into_iter()
        .filter(|(f, _)| bool_of(spec, f) == Some(true))
        .map(|(_, text)| text)
        .collect();
    if set.is_empty() {
        return None;
    }
    Violation::new("host namespaces", set.join(", "))
}

fn host_path_volumes(_: &Value, spec: &Value) -> Option<Violation> {
    let volumes: Vec<String> = items(spec, "volumes").filter(|v| field(v, "hostPath").is_some()).map(name).collect();
    if volumes.is_empty() {
        return None;
    }
    Violation::new("hostPath volumes", format!("{} {}", plural("volume", "volumes", volumes.len()), join_quote(&volumes)))
}

fn host_ports(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut ports = BTreeSet::new();
    for c in containers(spec) {
        let mut valid = true;
        for port in items(c, "ports").filter_map(|p| p.get("hostPort").and_then(Value::as_i64)).filter(|p| *p != 0) {
            valid = false;
            ports.insert(port.to_string());
        }
        if !valid {
            bad.push(name(c));
        }
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_named(&bad),
            plural("uses", "use", bad.len()),
            plural("hostPort", "hostPorts", ports.len()),
            ports.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

fn host_probes_and_lifecycle(_: &Value, spec: &Value) -> Option<Violation> {
    let hosts = |handler: Option<&Value>| -> Vec<String> {
        let Some(h) = handler else { return Vec::new() };
        ["httpGet", "tcpSocket"]
            .iter()
            .filter_map(|k| field(h, k))
            .map(|a| str_of(a, "host").to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let mut bad = BTreeSet::new();
    let mut forbidden = BTreeSet::new();
    for c in containers(spec) {
        let lifecycle = field(c, "lifecycle");
        let handlers = [
            field(c, "livenessProbe"),
            field(c, "readinessProbe"),
            field(c, "startupProbe"),
            lifecycle.and_then(|l| field(l, "postStart")),
            lifecycle.and_then(|l| field(l, "preStop")),
        ];
        for found in handlers.into_iter().map(hosts).filter(|h| !h.is_empty()) {
            bad.insert(name(c));
            forbidden.extend(found);
        }
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "probe or lifecycle host",
        format!(
            "{} {} {} {} {}",
            plural("container", "containers", bad.len()),
            join_quote(&bad),
            plural("uses", "use", bad.len()),
            plural("probe or lifecycle host", "probe or lifecycle hosts", forbidden.len()),
            join_quote(&forbidden)
        ),
    )
}

fn privileged(_: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<String> =
        containers(spec).filter(|c| security_context(c).and_then(|sc| bool_of(sc, "privileged")) == Some(true)).map(name).collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new("privileged", format!("{} must not set securityContext.privileged=true", containers_named(&bad)))
}

/// Also the restricted level's `procMount_restricted` from 1.35 on.
pub(super) fn proc_mount(_: &Value, spec: &Value) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for c in containers(spec) {
        let Some(pm) = security_context(c).and_then(|sc| sc.get("procMount")).and_then(Value::as_str) else { continue };
        if pm != "Default" {
            bad.push(name(c));
            types.insert(pm.to_owned());
        }
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new("procMount", format!("{} must not set securityContext.procMount to {}", containers_named(&bad), join_quote(types)))
}

fn proc_mount_1_35(metadata: &Value, spec: &Value) -> Option<Violation> {
    if in_user_namespace(spec) {
        return None;
    }
    proc_mount(metadata, spec)
}

fn se_linux_1_0(_: &Value, spec: &Value) -> Option<Violation> {
    se_linux(spec, &["", "container_t", "container_init_t", "container_kvm_t"])
}

fn se_linux_1_31(_: &Value, spec: &Value) -> Option<Violation> {
    se_linux(spec, &["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"])
}

fn se_linux(spec: &Value, allowed: &[&str]) -> Option<Violation> {
    let (mut bad_types, mut set_user, mut set_role) = (BTreeSet::new(), false, false);
    let mut valid = |opts: &Value| -> bool {
        let mut ok = true;
        let t = str_of(opts, "type");
        if !allowed.contains(&t) {
            ok = false;
            bad_types.insert(t.to_owned());
        }
        if !str_of(opts, "user").is_empty() {
            ok = false;
            set_user = true;
        }
        if !str_of(opts, "role").is_empty() {
            ok = false;
            set_role = true;
        }
        ok
    };
    fn options(v: &Value) -> Option<&Value> {
        security_context(v).and_then(|sc| field(sc, "seLinuxOptions"))
    }
    let mut setters = Vec::new();
    if options(spec).is_some_and(|o| !valid(o)) {
        setters.push("pod".to_owned());
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        if options(c).is_some_and(|o| !valid(o)) {
            bad.push(name(c));
        }
    }
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !bad_types.is_empty() {
        data.push(format!("{} {}", plural("type", "types", bad_types.len()), join_quote(&bad_types)));
    }
    if set_user {
        data.push("user may not be set".to_owned());
    }
    if set_role {
        data.push("role may not be set".to_owned());
    }
    Violation::new("seLinuxOptions", format!("{} set forbidden securityContext.seLinuxOptions: {}", setters.join(" and "), data.join("; ")))
}

/// RuntimeDefault and Localhost profiles are the allowed seccomp types.
pub(super) fn valid_seccomp(t: &str) -> bool {
    t == "RuntimeDefault" || t == "Localhost"
}

/// Before 1.19 seccomp was chosen by annotations.
fn seccomp_annotations(metadata: &Value, spec: &Value) -> Option<Violation> {
    const POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
    const CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";
    let annotations = metadata.get("annotations").and_then(Value::as_object);
    let valid = |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let mut forbidden = BTreeSet::new();
    let keys = std::iter::once(POD.to_owned()).chain(containers(spec).map(|c| format!("{CONTAINER_PREFIX}{}", str_of(c, "name"))));
    for key in keys {
        if let Some(v) = annotations.and_then(|a| a.get(&key)).map(|v| v.as_str().unwrap_or("")) {
            if !valid(v) {
                forbidden.insert(format!("{key}={}", go_quote(v)));
            }
        }
    }
    if forbidden.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            plural("annotation", "annotations", forbidden.len()),
            forbidden.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

fn seccomp(_: &Value, spec: &Value) -> Option<Violation> {
    let profile_type = |v: &Value| security_context(v).and_then(|sc| field(sc, "seccompProfile")).map(|p| str_of(p, "type").to_owned());
    let mut setters = Vec::new();
    let mut values = BTreeSet::new();
    if let Some(t) = profile_type(spec).filter(|t| !valid_seccomp(t)) {
        setters.push("pod".to_owned());
        values.insert(t);
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        if let Some(t) = profile_type(c).filter(|t| !valid_seccomp(t)) {
            bad.push(name(c));
            values.insert(t);
        }
    }
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new(
        "seccompProfile",
        format!("{} must not set securityContext.seccompProfile.type to {}", setters.join(" and "), join_quote(values)),
    )
}

const SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SYSCTLS_1_29: &[&str] =
    &["net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"];
const SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];
const SYSCTLS_1_37: &[&str] = &["net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"];

fn sysctls_1_0(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[SYSCTLS_1_0])
}
fn sysctls_1_27(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[SYSCTLS_1_0, SYSCTLS_1_27])
}
fn sysctls_1_29(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}
fn sysctls_1_32(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32])
}
fn sysctls_1_37(_: &Value, spec: &Value) -> Option<Violation> {
    sysctls(spec, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32, SYSCTLS_1_37])
}

fn sysctls(spec: &Value, allowed: &[&[&str]]) -> Option<Violation> {
    let sc = pod_security_context(spec)?;
    let forbidden: Vec<&str> =
        items(sc, "sysctls").map(|s| str_of(s, "name")).filter(|n| !allowed.iter().any(|set| set.contains(n))).collect();
    if forbidden.is_empty() {
        return None;
    }
    Violation::new("forbidden sysctls", forbidden.join(", "))
}

fn windows_host_process(_: &Value, spec: &Value) -> Option<Violation> {
    let host_process =
        |v: &Value| security_context(v).and_then(|sc| field(sc, "windowsOptions")).and_then(|w| bool_of(w, "hostProcess")) == Some(true);
    let bad: Vec<String> = containers(spec).filter(|c| host_process(c)).map(name).collect();
    let mut setters = Vec::new();
    if host_process(spec) {
        setters.push("pod".to_owned());
    }
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new("hostProcess", format!("{} must not set securityContext.windowsOptions.hostProcess=true", setters.join(" and ")))
}
