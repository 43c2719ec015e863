//! Pod and pod template validation (`ValidatePodSpec` and friends): what a user hits first.

use std::collections::HashSet;

use kapi_apimachinery::validation::validate_labels;
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::{dns_label, non_negative, not_found, port_name_errors, port_number, str_at};
use crate::defaults::pod_quantity;

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const TERMINATION_MESSAGE_POLICIES: &[&str] = &["File", "FallbackToLogsOnError"];

pub(super) fn validate_pod(obj: &Value) -> Vec<Cause> {
    validate_pod_spec(obj.get("spec").unwrap_or(&Value::Null), "spec")
}

/// A pod template at `path`: labels, the pod spec, and (for controllers) which restart policies
/// the controller supports.
pub(super) fn validate_template(template: Option<&Value>, path: &str, restart: Option<&[&str]>) -> Vec<Cause> {
    let Some(template) = template.filter(|t| t.is_object()) else {
        return vec![Cause::required(path, "")];
    };
    let mut causes = validate_labels(
        template.pointer("/metadata/labels").and_then(Value::as_object),
        &format!("{path}.metadata.labels"),
    );
    let spec = template.get("spec").unwrap_or(&Value::Null);
    causes.extend(validate_pod_spec(spec, &format!("{path}.spec")));
    if let Some(supported) = restart {
        let policy = spec.get("restartPolicy").cloned().unwrap_or(Value::from(""));
        let ok = policy.as_str().is_some_and(|p| supported.contains(&p));
        // An empty policy already got "Required value" from the pod spec check.
        if !ok && policy.as_str() != Some("") {
            causes.push(Cause::not_supported(&format!("{path}.spec.restartPolicy"), &policy, supported));
        }
    }
    causes
}

pub(super) fn validate_pod_spec(spec: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let volumes = validate_volumes(spec, path, &mut causes);

    let containers = spec.get("containers").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    if containers.is_empty() {
        causes.push(Cause::required(&format!("{path}.containers"), ""));
    }
    let mut names = HashSet::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec.get(list).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
            validate_container(c, &format!("{path}.{list}[{i}]"), &volumes, &mut names, &mut causes);
        }
    }

    enum_field(spec, "restartPolicy", path, RESTART_POLICIES, &mut causes);
    enum_field(spec, "dnsPolicy", path, DNS_POLICIES, &mut causes);
    causes.extend(non_negative(
        spec,
        "/terminationGracePeriodSeconds",
        &format!("{path}.terminationGracePeriodSeconds"),
    ));
    if let Some(v) = spec.get("activeDeadlineSeconds").filter(|v| !v.is_null()) {
        if v.as_i64().is_none_or(|n| n <= 0) {
            causes.push(Cause::invalid(
                &format!("{path}.activeDeadlineSeconds"),
                v,
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    causes
        .extend(validate_labels(spec.get("nodeSelector").and_then(Value::as_object), &format!("{path}.nodeSelector")));
    for key in ["serviceAccountName", "nodeName"] {
        let v = str_at(spec, &format!("/{key}"));
        if !v.is_empty() {
            causes.extend(super::dns_subdomain(&format!("{path}.{key}"), v));
        }
    }
    causes
}

/// A required enumerated field: `Required value` when empty, `Unsupported value` when unknown.
fn enum_field(obj: &Value, key: &str, path: &str, supported: &[&str], causes: &mut Vec<Cause>) {
    let field = format!("{path}.{key}");
    match obj.get(key) {
        None | Some(Value::Null) => causes.push(Cause::required(&field, "")),
        Some(Value::String(s)) if s.is_empty() => causes.push(Cause::required(&field, "")),
        Some(v) if v.as_str().is_some_and(|s| supported.contains(&s)) => {}
        Some(v) => causes.push(Cause::not_supported(&field, v, supported)),
    }
}

fn validate_volumes(spec: &Value, path: &str, causes: &mut Vec<Cause>) -> HashSet<String> {
    let mut names = HashSet::new();
    for (i, v) in spec.get("volumes").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
        let field = format!("{path}.volumes[{i}].name");
        let name = str_at(v, "/name");
        if name.is_empty() {
            causes.push(Cause::required(&field, ""));
        } else {
            causes.extend(dns_label(&field, name));
            if !names.insert(name.to_string()) {
                causes.push(Cause::duplicate(&field, &Value::from(name)));
            }
        }
    }
    names
}

fn validate_container(
    c: &Value,
    path: &str,
    volumes: &HashSet<String>,
    names: &mut HashSet<String>,
    causes: &mut Vec<Cause>,
) {
    let name_field = format!("{path}.name");
    let name = str_at(c, "/name");
    if name.is_empty() {
        causes.push(Cause::required(&name_field, ""));
    } else {
        causes.extend(dns_label(&name_field, name));
        if !names.insert(name.to_string()) {
            causes.push(Cause::duplicate(&name_field, &Value::from(name)));
        }
    }
    let image = str_at(c, "/image");
    if image.trim().is_empty() {
        causes.push(Cause::required(&format!("{path}.image"), ""));
    } else if image.trim() != image {
        causes.push(Cause::invalid(
            &format!("{path}.image"),
            &Value::from(image),
            "must not have leading or trailing whitespace",
        ));
    }
    enum_field(c, "imagePullPolicy", path, PULL_POLICIES, causes);
    if c.get("terminationMessagePolicy").is_some() {
        enum_field(c, "terminationMessagePolicy", path, TERMINATION_MESSAGE_POLICIES, causes);
    }
    validate_ports(c, path, causes);
    for (i, e) in c.get("env").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
        let field = format!("{path}.env[{i}].name");
        let env_name = str_at(e, "/name");
        if env_name.is_empty() {
            causes.push(Cause::required(&field, ""));
        } else if env_name.contains('=') || !env_name.chars().all(|ch| (' '..='~').contains(&ch)) {
            causes.push(Cause::invalid(
                &field,
                &Value::from(env_name),
                "a valid environment variable name must consist only of printable ASCII characters other than '='",
            ));
        }
    }
    for (i, m) in c.get("volumeMounts").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
        let mount_name = str_at(m, "/name");
        if mount_name.is_empty() {
            causes.push(Cause::required(&format!("{path}.volumeMounts[{i}].name"), ""));
        } else if !volumes.contains(mount_name) {
            causes.push(not_found(&format!("{path}.volumeMounts[{i}].name"), &Value::from(mount_name)));
        }
        if str_at(m, "/mountPath").is_empty() {
            causes.push(Cause::required(&format!("{path}.volumeMounts[{i}].mountPath"), ""));
        }
    }
    validate_resources(c, path, causes);
}

fn validate_ports(c: &Value, path: &str, causes: &mut Vec<Cause>) {
    let mut names = HashSet::new();
    for (i, p) in c.get("ports").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate() {
        let pp = format!("{path}.ports[{i}]");
        let name = str_at(p, "/name");
        if !name.is_empty() {
            for msg in port_name_errors(name) {
                causes.push(Cause::invalid(&format!("{pp}.name"), &Value::from(name), msg));
            }
            if !names.insert(name.to_string()) {
                causes.push(Cause::duplicate(&format!("{pp}.name"), &Value::from(name)));
            }
        }
        match p.get("containerPort") {
            None | Some(Value::Null) => causes.push(Cause::required(&format!("{pp}.containerPort"), "")),
            Some(v) if v.as_i64() == Some(0) => causes.push(Cause::required(&format!("{pp}.containerPort"), "")),
            Some(v) => causes.extend(port_number(&format!("{pp}.containerPort"), v)),
        }
        if let Some(h) = p.get("hostPort").filter(|h| !h.is_null() && h.as_i64() != Some(0)) {
            causes.extend(port_number(&format!("{pp}.hostPort"), h));
        }
        enum_field(p, "protocol", &pp, PROTOCOLS, causes);
    }
}

fn validate_resources(c: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(requests) = c.pointer("/resources/requests").and_then(Value::as_object) else {
        return;
    };
    let limits = c.pointer("/resources/limits").and_then(Value::as_object);
    for (name, req) in requests {
        let Some(lim) = limits.and_then(|l| l.get(name)) else {
            continue;
        };
        if let (Some(r), Some(l)) = (pod_quantity(req), pod_quantity(lim)) {
            if r > l {
                let shown = lim.as_str().map(str::to_string).unwrap_or_else(|| lim.to_string());
                causes.push(Cause::invalid(
                    &format!("{path}.resources.requests"),
                    req,
                    &format!("must be less than or equal to {name} limit of {shown}"),
                ));
            }
        }
    }
}

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// kube lets a pod's spec change only in images, the deadline, added tolerations and removed
/// scheduling gates.
pub(super) fn validate_pod_update(new: &Value, old: &Value) -> Vec<Cause> {
    let normalize = |pod: &Value| {
        let mut spec = pod.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(map) = spec.as_object_mut() {
            for list in ["containers", "initContainers"] {
                if let Some(Value::Array(cs)) = map.get_mut(list) {
                    for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                        c.remove("image");
                    }
                }
            }
            map.remove("activeDeadlineSeconds");
            map.remove("tolerations");
            map.remove("schedulingGates");
            map.remove("ephemeralContainers");
        }
        spec
    };
    let mut causes = Vec::new();
    if normalize(new) != normalize(old) {
        causes.push(Cause::forbidden("spec", POD_UPDATE_FORBIDDEN));
    }
    let old_tolerations = old.pointer("/spec/tolerations").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let new_tolerations = new.pointer("/spec/tolerations").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    if old_tolerations.iter().any(|t| !new_tolerations.contains(t)) {
        causes.push(Cause::forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
    let old_gates = old.pointer("/spec/schedulingGates").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let new_gates = new.pointer("/spec/schedulingGates").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    if new_gates.iter().any(|g| !old_gates.contains(g)) {
        causes
            .push(Cause::forbidden("spec.schedulingGates", "only deletion is allowed, but found new scheduling gate"));
    }
    causes
}
