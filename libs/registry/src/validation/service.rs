//! Service validation (`ValidateService`, `ValidateServiceUpdate`).

use std::collections::HashSet;
use std::net::IpAddr;

use kapi_apimachinery::validation::validate_labels;
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::{dns_label, dns_subdomain, port_name_errors, port_number, str_at};

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

pub(super) fn validate_service(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let svc_type = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP");
    let cluster_ip = str_at(spec, "/clusterIP");
    let headless = cluster_ip == "None";
    let ports = spec.get("ports").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);

    if svc_type == "ExternalName" {
        let name = str_at(spec, "/externalName");
        if name.is_empty() {
            causes.push(Cause::required("spec.externalName", ""));
        } else {
            let trimmed = name.strip_suffix('.').unwrap_or(name);
            causes.extend(dns_subdomain("spec.externalName", trimmed).into_iter().map(|mut c| {
                c.message = c.message.replacen(&format!("{trimmed:?}"), &format!("{name:?}"), 1);
                c
            }));
        }
    } else if ports.is_empty() && !headless {
        causes.push(Cause::required("spec.ports", ""));
    }

    let require_name = ports.len() > 1;
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = format!("spec.ports[{i}]");
        let name = str_at(p, "/name");
        if name.is_empty() {
            if require_name {
                causes.push(Cause::required(&format!("{pp}.name"), ""));
            }
        } else {
            causes.extend(dns_label(&format!("{pp}.name"), name));
            if !names.insert(name.to_string()) {
                causes.push(Cause::duplicate(&format!("{pp}.name"), &Value::from(name)));
            }
        }
        match p.get("protocol") {
            None | Some(Value::Null) => causes.push(Cause::required(&format!("{pp}.protocol"), "")),
            Some(v) if v.as_str().is_some_and(|s| PROTOCOLS.contains(&s)) => {}
            Some(v) => causes.push(Cause::not_supported(&format!("{pp}.protocol"), v, PROTOCOLS)),
        }
        causes.extend(port_number(&format!("{pp}.port"), p.get("port").unwrap_or(&Value::Null)));
        match p.get("targetPort") {
            Some(Value::String(s)) => {
                for msg in port_name_errors(s) {
                    causes.push(Cause::invalid(&format!("{pp}.targetPort"), &Value::from(s.as_str()), msg));
                }
            }
            Some(v) if !v.is_null() => causes.extend(port_number(&format!("{pp}.targetPort"), v)),
            _ => {}
        }
        let node_port = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if node_port != 0 {
            if svc_type == "ClusterIP" {
                causes.push(Cause::forbidden(&format!("{pp}.nodePort"), "may not be used when `type` is 'ClusterIP'"));
            } else if let Some(v) = p.get("nodePort") {
                causes.extend(port_number(&format!("{pp}.nodePort"), v));
            }
        }
    }

    causes.extend(validate_labels(spec.get("selector").and_then(Value::as_object), "spec.selector"));
    if !cluster_ip.is_empty() && !headless && cluster_ip.parse::<IpAddr>().is_err() {
        causes.push(Cause::invalid(
            "spec.clusterIPs[0]",
            &Value::from(cluster_ip),
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    }
    for (i, ip) in
        spec.get("externalIPs").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]).iter().enumerate()
    {
        if ip.as_str().is_none_or(|s| s.parse::<IpAddr>().is_err()) {
            causes.push(Cause::invalid(
                &format!("spec.externalIPs[{i}]"),
                ip,
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    if let Some(policy) = spec.get("externalTrafficPolicy").filter(|p| !p.is_null() && p.as_str() != Some("")) {
        if !matches!(svc_type, "NodePort" | "LoadBalancer") {
            causes.push(Cause::invalid(
                "spec.externalTrafficPolicy",
                policy,
                "may only be set when `type` is 'NodePort' or 'LoadBalancer'",
            ));
        } else if !matches!(policy.as_str(), Some("Cluster" | "Local")) {
            causes.push(Cause::not_supported("spec.externalTrafficPolicy", policy, &["Cluster", "Local"]));
        }
    }
    if let Some(t) = spec.pointer("/sessionAffinityConfig/clientIP/timeoutSeconds") {
        if t.as_i64().is_none_or(|n| !(1..=86400).contains(&n)) {
            causes.push(Cause::invalid(
                "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                t,
                "must be greater than 0 and less than 86400",
            ));
        }
    }
    causes
}

/// A cluster IP, once allocated, stays (unless the Service moves to or from ExternalName).
pub(super) fn validate_service_update(new: &Value, old: &Value) -> Vec<Cause> {
    let external = |v: &Value| str_at(v, "/spec/type") == "ExternalName";
    if external(new) || external(old) {
        return Vec::new();
    }
    let mut causes = Vec::new();
    let (new_ip, old_ip) = (str_at(new, "/spec/clusterIP"), str_at(old, "/spec/clusterIP"));
    if !new_ip.is_empty() && !old_ip.is_empty() && new_ip != old_ip {
        let shown = new.pointer("/spec/clusterIPs").cloned().unwrap_or_else(|| Value::from(vec![new_ip]));
        causes.push(Cause::invalid("spec.clusterIPs[0]", &shown, "may not change once set"));
    }
    let first_family = |v: &Value| v.pointer("/spec/ipFamilies/0").cloned();
    if let (Some(n), Some(o)) = (first_family(new), first_family(old)) {
        if n != o {
            causes.push(Cause::invalid("spec.ipFamilies[0]", &n, "may not change once set"));
        }
    }
    causes
}
