//! The restricted checks: hardening on top of baseline (no privilege escalation, every
//! capability dropped, a non-root user, a seccomp profile, only volume types that cannot
//! reach the host). Several replace a weaker baseline check; texts are kube's.

use std::collections::BTreeSet;

use serde_json::Value;

use super::baseline::{proc_mount, valid_seccomp, CAPABILITIES_BASELINE, HOST_PATH_VOLUMES, PROC_MOUNT, SECCOMP_BASELINE};
use super::*;

pub(super) static CHECKS: &[Check] = &[
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        revisions: &[rev(8, allow_privilege_escalation), rev(25, allow_privilege_escalation_1_25)],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        revisions: &[rev_over(22, capabilities, &[CAPABILITIES_BASELINE]), rev_over(25, capabilities_1_25, &[CAPABILITIES_BASELINE])],
    },
    Check { id: "procMount_restricted", level: Level::Restricted, revisions: &[rev_over(35, proc_mount, &[PROC_MOUNT])] },
    Check { id: "restrictedVolumes", level: Level::Restricted, revisions: &[rev_over(0, restricted_volumes, &[HOST_PATH_VOLUMES])] },
    Check { id: "runAsNonRoot", level: Level::Restricted, revisions: &[rev(0, run_as_non_root), rev(35, run_as_non_root_1_35)] },
    Check { id: "runAsUser", level: Level::Restricted, revisions: &[rev(23, run_as_user), rev(35, run_as_user_1_35)] },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        revisions: &[rev_over(19, seccomp, &[SECCOMP_BASELINE]), rev_over(25, seccomp_1_25, &[SECCOMP_BASELINE])],
    },
];

// kube's 1.25 revisions pass Windows pods, which cannot set these Linux fields; its 1.35
// revisions pass pods in a user namespace, where root is not root on the host.

fn allow_privilege_escalation_1_25(metadata: &Value, spec: &Value) -> Option<Violation> {
    (!is_windows(spec)).then(|| allow_privilege_escalation(metadata, spec)).flatten()
}

fn capabilities_1_25(metadata: &Value, spec: &Value) -> Option<Violation> {
    (!is_windows(spec)).then(|| capabilities(metadata, spec)).flatten()
}

fn seccomp_1_25(metadata: &Value, spec: &Value) -> Option<Violation> {
    (!is_windows(spec)).then(|| seccomp(metadata, spec)).flatten()
}

fn run_as_non_root_1_35(metadata: &Value, spec: &Value) -> Option<Violation> {
    (!in_user_namespace(spec)).then(|| run_as_non_root(metadata, spec)).flatten()
}

fn run_as_user_1_35(metadata: &Value, spec: &Value) -> Option<Violation> {
    (!in_user_namespace(spec)).then(|| run_as_user(metadata, spec)).flatten()
}

fn allow_privilege_escalation(_: &Value, spec: &Value) -> Option<Violation> {
    let bad: Vec<String> = containers(spec)
        .filter(|c| security_context(c).and_then(|sc| bool_of(sc, "allowPrivilegeEscalation")) != Some(false))
        .map(name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "allowPrivilegeEscalation != false",
        format!("{} must set securityContext.allowPrivilegeEscalation=false", containers_named(&bad)),
    )
}

fn capabilities(_: &Value, spec: &Value) -> Option<Violation> {
    let (mut missing_drop, mut adding, mut forbidden) = (Vec::new(), Vec::new(), BTreeSet::new());
    for c in containers(spec) {
        let Some(caps) = security_context(c).and_then(|sc| field(sc, "capabilities")) else {
            missing_drop.push(name(c));
            continue;
        };
        if !strings(caps, "drop").any(|d| d == "ALL") {
            missing_drop.push(name(c));
        }
        let mut added_forbidden = false;
        for cap in strings(caps, "add").filter(|cap| *cap != "NET_BIND_SERVICE") {
            added_forbidden = true;
            forbidden.insert(cap);
        }
        if added_forbidden {
            adding.push(name(c));
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(r#"{} must set securityContext.capabilities.drop=["ALL"]"#, containers_named(&missing_drop)));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&adding),
            join_quote(forbidden)
        ));
    }
    if details.is_empty() {
        return None;
    }
    Violation::new("unrestricted capabilities", details.join("; "))
}

/// Inline volume sources that cannot reach the host or the network on their own.
const ALLOWED_VOLUMES: &[&str] =
    &["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret"];

/// The sources kube names, in the order it looks for them.
const NAMED_VOLUMES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(_: &Value, spec: &Value) -> Option<Violation> {
    let (mut bad, mut types) = (Vec::new(), BTreeSet::new());
    for volume in items(spec, "volumes") {
        if ALLOWED_VOLUMES.iter().any(|k| field(volume, k).is_some()) {
            continue;
        }
        bad.push(name(volume));
        types.insert(NAMED_VOLUMES.iter().copied().find(|k| field(volume, k).is_some()).unwrap_or("unknown"));
    }
    if bad.is_empty() {
        return None;
    }
    Violation::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            plural("volume", "volumes", bad.len()),
            join_quote(&bad),
            plural("uses", "use", bad.len()),
            plural("restricted volume type", "restricted volume types", types.len()),
            join_quote(types)
        ),
    )
}

fn run_as_non_root(_: &Value, spec: &Value) -> Option<Violation> {
    let mut setters = Vec::new();
    let mut pod_non_root = false;
    match pod_security_context(spec).and_then(|sc| bool_of(sc, "runAsNonRoot")) {
        Some(false) => setters.push("pod".to_owned()),
        Some(true) => pod_non_root = true,
        None => {}
    }
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(spec) {
        match security_context(c).and_then(|sc| bool_of(sc, "runAsNonRoot")) {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if !pod_non_root => implicit.push(name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_named(&explicit));
    }
    if !setters.is_empty() {
        return Violation::new(
            "runAsNonRoot != true",
            format!("{} must not set securityContext.runAsNonRoot=false", setters.join(" and ")),
        );
    }
    if !implicit.is_empty() {
        return Violation::new(
            "runAsNonRoot != true",
            format!("pod or {} must set securityContext.runAsNonRoot=true", containers_named(&implicit)),
        );
    }
    None
}

fn run_as_user(_: &Value, spec: &Value) -> Option<Violation> {
    let root = |v: &Value| security_context(v).and_then(|sc| sc.get("runAsUser")).and_then(Value::as_i64) == Some(0);
    let mut setters = Vec::new();
    if root(spec) {
        setters.push("pod".to_owned());
    }
    let bad: Vec<String> = containers(spec).filter(|c| root(c)).map(name).collect();
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    Violation::new("runAsUser=0", format!("{} must not set runAsUser=0", setters.join(" and ")))
}

fn seccomp(_: &Value, spec: &Value) -> Option<Violation> {
    let profile_type = |v: &Value| security_context(v).and_then(|sc| field(sc, "seccompProfile")).map(|p| str_of(p, "type").to_owned());
    let (mut setters, mut values, mut pod_set) = (Vec::new(), BTreeSet::new(), false);
    match profile_type(spec) {
        Some(t) if !valid_seccomp(&t) => {
            setters.push("pod".to_owned());
            values.insert(t);
        }
        Some(_) => pod_set = true,
        None => {}
    }
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(spec) {
        match profile_type(c) {
            Some(t) if !valid_seccomp(&t) => {
                explicit.push(name(c));
                values.insert(t);
            }
            Some(_) => {}
            None if !pod_set => implicit.push(name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_named(&explicit));
    }
    if !setters.is_empty() {
        return Violation::new(
            "seccompProfile",
            format!("{} must not set securityContext.seccompProfile.type to {}", setters.join(" and "), join_quote(values)),
        );
    }
    if !implicit.is_empty() {
        return Violation::new(
            "seccompProfile",
            format!(
                r#"pod or {} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                containers_named(&implicit)
            ),
        );
    }
    None
}
