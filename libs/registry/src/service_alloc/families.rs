//! kube's `initIPFamilyFields`: `spec.ipFamilyPolicy` and `spec.ipFamilies` of a Service,
//! defaulted from the cluster's ranges and checked against them before any address is
//! allocated (kube does this in the Service REST storage, not in defaulting, because the answer
//! depends on the cluster's configuration).

use std::net::IpAddr;

use kapi_apimachinery::Cause;
use serde_json::{json, Value};

use super::network::{Family, ServiceNetwork};
use super::service::{cluster_ips, families, is_headless_selectorless, service_type};

const SINGLE: &str = "SingleStack";
const REQUIRE_DUAL: &str = "RequireDualStack";

/// Defaults and checks the family fields of `svc` (`old`: the stored Service of an update).
pub(super) fn init_ip_family_fields(network: &ServiceNetwork, svc: &mut Value, old: Option<&Value>) -> Result<(), Vec<Cause>> {
    if service_type(svc) == "ExternalName" {
        return Ok(());
    }
    if svc.pointer("/spec/ipFamilyPolicy").is_none_or(Value::is_null) {
        let policy = match old.and_then(|o| o.pointer("/spec/ipFamilyPolicy")).filter(|p| p.is_string()) {
            Some(p) => p.clone(),
            None if is_headless_selectorless(svc) => json!(REQUIRE_DUAL),
            None => json!(SINGLE),
        };
        svc["spec"]["ipFamilyPolicy"] = policy;
    }
    if is_matching_prefer_dual_stack(svc, old) {
        return Ok(());
    }
    let policy = svc.pointer("/spec/ipFamilyPolicy").and_then(Value::as_str).unwrap_or(SINGLE).to_owned();
    let policy_value = Value::String(policy.clone());
    let mut causes = Vec::new();

    if let Some(old) = old {
        let (ips, old_ips) = (cluster_ips(svc), cluster_ips(old));
        let (fams, old_fams) = (families(svc), families(old));
        if policy == SINGLE {
            // Same addresses and families as before plus SingleStack: the secondary goes.
            if ips == old_ips && ips.len() > 1 {
                svc["spec"]["clusterIPs"] = json!([ips[0]]);
            }
            if fams == old_fams && fams.len() > 1 {
                svc["spec"]["ipFamilies"] = json!([fams[0]]);
            }
        } else {
            if !ips.is_empty() && ips.len() < old_ips.len() {
                causes.push(Cause::invalid("spec.ipFamilyPolicy", &policy_value, "must be 'SingleStack' to release the secondary cluster IP"));
            }
            if !fams.is_empty() && fams.len() < old_fams.len() {
                causes.push(Cause::invalid("spec.ipFamilyPolicy", &policy_value, "must be 'SingleStack' to release the secondary IP family"));
            }
        }
    }

    let ips = cluster_ips(svc);
    let mut fams = families(svc);
    if policy == SINGLE {
        if ips.len() == 2 {
            causes.push(Cause::invalid(
                "spec.ipFamilyPolicy",
                &policy_value,
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            ));
        }
        if fams.len() == 2 {
            causes.push(Cause::invalid(
                "spec.ipFamilyPolicy",
                &policy_value,
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            ));
        }
    }
    // Families follow the addresses asked for.
    for (i, ip) in ips.iter().enumerate() {
        let Ok(ip) = ip.parse::<IpAddr>() else { break };
        if i >= fams.len() {
            let fam = Family::of(ip);
            if network.range(fam).is_none() {
                causes.push(Cause {
                    reason: "FieldValueInvalid".into(),
                    message: format!("spec.clusterIPs[{i}]: Invalid value: {}: {} is not configured on this cluster", go_strings(&ips), fam.as_str()),
                    field: format!("spec.clusterIPs[{i}]"),
                });
            } else {
                fams.push(fam.as_str().to_owned());
            }
        }
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    set_families(svc, &fams);

    if is_headless_selectorless(svc) {
        if fams.is_empty() {
            fams.push(network.primary().as_str().to_owned());
        }
        if fams.len() < 2 && policy != SINGLE {
            let other = Family::parse(&fams[0]).unwrap_or(network.primary()).other();
            fams.push(other.as_str().to_owned());
        }
        set_families(svc, &fams);
        return Ok(());
    }

    if policy == REQUIRE_DUAL && network.cluster_ips.len() < 2 {
        causes.push(Cause::invalid("spec.ipFamilyPolicy", &policy_value, "this cluster is not configured for dual-stack services"));
    }
    for (i, fam) in fams.iter().enumerate() {
        if Family::parse(fam).and_then(|f| network.range(f)).is_none() {
            causes.push(Cause::invalid(&format!("spec.ipFamilies[{i}]"), &Value::String(fam.clone()), "not configured on this cluster"));
        }
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    if fams.is_empty() {
        fams.push(network.primary().as_str().to_owned());
    }
    if policy != SINGLE && fams.len() == 1 && network.cluster_ips.len() == 2 {
        let other = Family::parse(&fams[0]).unwrap_or(network.primary()).other();
        fams.push(other.as_str().to_owned());
    }
    set_families(svc, &fams);
    Ok(())
}

/// kube's `isMatchingPreferDualStackClusterIPFields`: a PreferDualStack Service is not
/// upgraded or downgraded because the cluster's stackness changed, only on an explicit change.
fn is_matching_prefer_dual_stack(svc: &Value, old: Option<&Value>) -> bool {
    let Some(old) = old else { return false };
    let policy = |v: &Value| v.pointer("/spec/ipFamilyPolicy").and_then(Value::as_str).map(str::to_owned);
    let prefer = Some("PreferDualStack".to_owned());
    policy(old) == prefer && policy(svc) == prefer && cluster_ips(svc) == cluster_ips(old) && families(svc) == families(old)
}

fn set_families(svc: &mut Value, fams: &[String]) {
    if !fams.is_empty() {
        svc["spec"]["ipFamilies"] = json!(fams);
    }
}

/// Go's `%#v` of a `[]string`.
pub(super) fn go_strings(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn single_stack_cluster_defaults() {
        let net = ServiceNetwork::default();
        let mut s = svc(json!({"selector": {"a": "b"}, "ports": [{"port": 80}]}));
        init_ip_family_fields(&net, &mut s, None).unwrap();
        assert_eq!(s["spec"]["ipFamilyPolicy"], "SingleStack");
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4"]));
        // Headless without a selector asks for both families and gets what the cluster has.
        let mut h = svc(json!({"clusterIP": "None"}));
        init_ip_family_fields(&net, &mut h, None).unwrap();
        assert_eq!(h["spec"]["ipFamilyPolicy"], "RequireDualStack");
        assert_eq!(h["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
        let mut dual = svc(json!({"ipFamilyPolicy": "RequireDualStack", "selector": {"a": "b"}}));
        let err = init_ip_family_fields(&net, &mut dual, None).unwrap_err();
        assert_eq!(
            err[0].message,
            "spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services"
        );
        let mut v6 = svc(json!({"clusterIP": "fd00::5", "clusterIPs": ["fd00::5"], "selector": {"a": "b"}}));
        let err = init_ip_family_fields(&net, &mut v6, None).unwrap_err();
        assert_eq!(err[0].message, "spec.clusterIPs[0]: Invalid value: []string{\"fd00::5\"}: IPv6 is not configured on this cluster");
    }

    #[test]
    fn dual_stack_cluster() {
        let net = ServiceNetwork::parse("10.0.0.0/16,fd00::/108", "30000-32767").unwrap();
        let mut s = svc(json!({"ipFamilyPolicy": "PreferDualStack", "selector": {"a": "b"}}));
        init_ip_family_fields(&net, &mut s, None).unwrap();
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
        let mut v6first = svc(json!({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv6"], "selector": {"a": "b"}}));
        init_ip_family_fields(&net, &mut v6first, None).unwrap();
        assert_eq!(v6first["spec"]["ipFamilies"], json!(["IPv6", "IPv4"]));
        let mut two = svc(json!({"clusterIPs": ["10.0.0.9", "fd00::9"], "selector": {"a": "b"}}));
        let err = init_ip_family_fields(&net, &mut two, None).unwrap_err();
        assert!(err[0].message.ends_with("must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"));
        // Downgrade: SingleStack with the old addresses drops the secondary.
        let old = svc(json!({"ipFamilyPolicy": "PreferDualStack", "clusterIPs": ["10.0.0.9", "fd00::9"], "ipFamilies": ["IPv4", "IPv6"]}));
        let mut new = svc(json!({"ipFamilyPolicy": "SingleStack", "clusterIPs": ["10.0.0.9", "fd00::9"], "ipFamilies": ["IPv4", "IPv6"]}));
        init_ip_family_fields(&net, &mut new, Some(&old)).unwrap();
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.0.0.9"]));
        assert_eq!(new["spec"]["ipFamilies"], json!(["IPv4"]));
    }
}
