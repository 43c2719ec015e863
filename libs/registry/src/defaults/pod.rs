//! Pod spec defaults (`SetDefaults_PodSpec`, `SetDefaults_Pod`, `SetDefaults_Container`, the
//! volume and probe defaults) and the pod's create-time status (`PodStatus{Pending, qosClass}`).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{for_each_item, get_mut, is_unset, object_at_mut, set_default};

/// Defaults of a Pod object: the spec defaults every template gets plus the Pod-only ones
/// (kube keeps those out of templates so that workloads do not roll on upgrade).
pub(super) fn default_pod(obj: &mut Value) {
    let Some(spec) = get_mut(obj, &["spec"]) else {
        return;
    };
    default_pod_spec(spec);
    for list in ["containers", "initContainers"] {
        for_each_item(spec, &[list], requests_from_limits);
    }
    set_default(spec, &["enableServiceLinks"], json!(true));
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        for list in ["containers", "initContainers"] {
            for_each_item(spec, &[list], host_network_ports);
        }
    }
}

/// Defaults of the pod template at `path` (`spec.template` of workloads, `template` of PodTemplate).
pub(crate) fn default_template_at(obj: &mut Value, path: &[&str]) {
    let mut spec_path: Vec<&str> = path.to_vec();
    spec_path.push("spec");
    if let Some(spec) = get_mut(obj, &spec_path) {
        default_pod_spec(spec);
    }
}

fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, &["dnsPolicy"], json!("ClusterFirst"));
    set_default(spec, &["restartPolicy"], json!("Always"));
    set_default(spec, &["securityContext"], json!({}));
    set_default(spec, &["terminationGracePeriodSeconds"], json!(30));
    set_default(spec, &["schedulerName"], json!("default-scheduler"));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for_each_item(spec, &[list], default_container);
    }
    for_each_item(spec, &["volumes"], default_volume);
}

fn default_container(c: &mut Value) {
    if is_unset(c.get("imagePullPolicy")) {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        c["imagePullPolicy"] = json!(image_pull_policy(image));
    }
    set_default(c, &["terminationMessagePath"], json!("/dev/termination-log"));
    set_default(c, &["terminationMessagePolicy"], json!("File"));
    if let Some(map) = c.as_object_mut() {
        if map.get("resources").is_none_or(Value::is_null) {
            map.insert("resources".into(), json!({}));
        }
    }
    for_each_item(c, &["ports"], |p| set_default(p, &["protocol"], json!("TCP")));
    for_each_item(c, &["env"], |e| {
        if let Some(from) = get_mut(e, &["valueFrom"]) {
            default_value_from(from);
        }
    });
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = get_mut(c, &[probe]).filter(|p| p.is_object()) {
            set_default(p, &["timeoutSeconds"], json!(1));
            set_default(p, &["periodSeconds"], json!(10));
            set_default(p, &["successThreshold"], json!(1));
            set_default(p, &["failureThreshold"], json!(3));
            default_http_get(p);
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(h) = get_mut(c, &["lifecycle", hook]).filter(|h| h.is_object()) {
            default_http_get(h);
        }
    }
}

fn default_http_get(handler: &mut Value) {
    if let Some(get) = get_mut(handler, &["httpGet"]).filter(|g| g.is_object()) {
        set_default(get, &["path"], json!("/"));
        set_default(get, &["scheme"], json!("HTTP"));
    }
}

fn default_value_from(from: &mut Value) {
    if let Some(f) = get_mut(from, &["fieldRef"]).filter(|f| f.is_object()) {
        set_default(f, &["apiVersion"], json!("v1"));
    }
    if let Some(r) = get_mut(from, &["resourceFieldRef"]).filter(|r| r.is_object()) {
        set_default(r, &["divisor"], json!("0"));
    }
}

/// kube's rule: `Always` when the image's tag is `latest` (or there is no tag and no digest,
/// which means `latest`), `IfNotPresent` otherwise, including unparseable references.
pub(crate) fn image_pull_policy(image: &str) -> &'static str {
    if image_tag(image).as_deref() == Some("latest") {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// The tag the reference resolves to (`latest` when neither tag nor digest), `None` when the
/// reference would not parse or pins only a digest.
fn image_tag(image: &str) -> Option<String> {
    if image.is_empty() || image.chars().any(|c| c.is_whitespace()) {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    // The path (everything after an optional registry host) must be lowercase.
    let path = match repo.split_once('/') {
        Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => rest,
        _ => repo,
    };
    if path.is_empty() || path.chars().any(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c))) {
        return None;
    }
    match (tag, digest) {
        (Some(t), _) if !t.is_empty() => Some(t.to_string()),
        (Some(_), _) => None,
        (None, Some(_)) => None,
        (None, None) => Some("latest".to_string()),
    }
}

fn default_volume(v: &mut Value) {
    let Some(map) = v.as_object_mut() else {
        return;
    };
    if map.iter().all(|(k, val)| k == "name" || val.is_null()) {
        map.insert("emptyDir".into(), json!({}));
        return;
    }
    for source in ["configMap", "secret", "downwardAPI", "projected"] {
        if let Some(s) = get_mut(v, &[source]).filter(|s| s.is_object()) {
            set_default(s, &["defaultMode"], json!(420));
        }
    }
    if let Some(items) = get_mut(v, &["downwardAPI"]) {
        for_each_item(items, &["items"], |item| {
            if let Some(f) = get_mut(item, &["fieldRef"]) {
                set_default(f, &["apiVersion"], json!("v1"));
            }
        });
    }
    if let Some(projected) = get_mut(v, &["projected"]) {
        for_each_item(projected, &["sources"], |src| {
            if let Some(t) = get_mut(src, &["serviceAccountToken"]).filter(|t| t.is_object()) {
                set_default(t, &["expirationSeconds"], json!(3600));
            }
            if let Some(d) = get_mut(src, &["downwardAPI"]) {
                for_each_item(d, &["items"], |item| {
                    if let Some(f) = get_mut(item, &["fieldRef"]) {
                        set_default(f, &["apiVersion"], json!("v1"));
                    }
                });
            }
        });
    }
    if let Some(h) = get_mut(v, &["hostPath"]).filter(|h| h.is_object()) {
        set_default(h, &["type"], json!(""));
    }
    if let Some(i) = get_mut(v, &["iscsi"]).filter(|i| i.is_object()) {
        set_default(i, &["iscsiInterface"], json!("default"));
    }
    if let Some(r) = get_mut(v, &["rbd"]).filter(|r| r.is_object()) {
        set_default(r, &["pool"], json!("rbd"));
        set_default(r, &["user"], json!("admin"));
        set_default(r, &["keyring"], json!("/etc/ceph/keyring"));
    }
    if let Some(a) = get_mut(v, &["azureDisk"]).filter(|a| a.is_object()) {
        set_default(a, &["cachingMode"], json!("ReadWrite"));
        set_default(a, &["fsType"], json!("ext4"));
        set_default(a, &["readOnly"], json!(false));
        set_default(a, &["kind"], json!("Shared"));
    }
    if get_mut(v, &["ephemeral", "volumeClaimTemplate", "spec"]).is_some() {
        default_pvc_spec_at(v, &["ephemeral", "volumeClaimTemplate", "spec"]);
    }
}

/// `SetDefaults_PersistentVolumeClaimSpec`.
pub(crate) fn default_pvc_spec_at(obj: &mut Value, path: &[&str]) {
    if get_mut(obj, path).is_some_and(|s| s.is_object()) {
        let mut p = path.to_vec();
        p.push("volumeMode");
        set_default(obj, &p, json!("Filesystem"));
    }
}

fn requests_from_limits(c: &mut Value) {
    let Some(limits) = c.pointer("/resources/limits").and_then(Value::as_object).cloned() else {
        return;
    };
    let Some(requests) = object_at_mut(c, &["resources", "requests"]) else {
        return;
    };
    for (name, q) in limits {
        requests.entry(name).or_insert(q);
    }
}

fn host_network_ports(c: &mut Value) {
    for_each_item(c, &["ports"], |p| {
        let host_unset = p.get("hostPort").is_none_or(|h| h.is_null() || h.as_i64() == Some(0));
        if host_unset {
            if let Some(cp) = p.get("containerPort").cloned() {
                p["hostPort"] = cp;
            }
        }
    });
}

/// The status kube's pod strategy writes on create.
pub(super) fn initial_pod_status(pod: &Value) -> Value {
    let mut status = json!({"phase": "Pending", "qosClass": pod_qos_class(pod)});
    let gated = pod.pointer("/spec/schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty());
    if gated {
        status["conditions"] = json!([{
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": null,
            "lastTransitionTime": null,
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates"
        }]);
    }
    status
}

/// kube's `GetPodQOS`: Guaranteed when every container limits cpu and memory and requests
/// equal limits, BestEffort when nothing is requested or limited, Burstable otherwise.
/// Pod-level resources, when set, decide alone.
pub fn pod_qos_class(pod: &Value) -> &'static str {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let mut requests: BTreeMap<&str, f64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, f64> = BTreeMap::new();
    let mut guaranteed = true;
    let pod_level = spec.get("resources").filter(|r| {
        ["requests", "limits"].iter().any(|k| r.get(*k).and_then(Value::as_object).is_some_and(|m| !m.is_empty()))
    });
    let resource_sets: Vec<&Value> = match pod_level {
        Some(r) => vec![r],
        None => ["containers", "initContainers"]
            .iter()
            .filter_map(|k| spec.get(*k).and_then(Value::as_array))
            .flatten()
            .map(|c| c.get("resources").unwrap_or(&Value::Null))
            .collect(),
    };
    for res in resource_sets {
        let mut has_cpu_limit = false;
        let mut has_mem_limit = false;
        for (kind, sums) in [("requests", &mut requests), ("limits", &mut limits)] {
            let Some(list) = res.get(kind).and_then(Value::as_object) else {
                continue;
            };
            for name in ["cpu", "memory"] {
                let q = list.get(name).and_then(quantity_value).unwrap_or(0.0);
                if q != 0.0 {
                    *sums.entry(name).or_insert(0.0) += q;
                    if kind == "limits" {
                        has_cpu_limit |= name == "cpu";
                        has_mem_limit |= name == "memory";
                    }
                }
            }
        }
        if !(has_cpu_limit && has_mem_limit) {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed {
        for (name, req) in &requests {
            if limits.get(name).is_none_or(|l| (l - req).abs() > f64::EPSILON * l.abs().max(1.0)) {
                guaranteed = false;
            }
        }
    }
    if guaranteed && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// A resource quantity (`500m`, `1Gi`, `2`, `1e3`) as a number; `None` when malformed.
pub(crate) fn quantity_value(v: &Value) -> Option<f64> {
    let s = match v {
        Value::String(s) => s.trim(),
        Value::Number(n) => return n.as_f64(),
        _ => return None,
    };
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let base: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => 10f64.powi(exp[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    Some(base * mult)
}
