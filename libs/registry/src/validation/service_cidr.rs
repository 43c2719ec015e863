//! ServiceCIDR validation (`networking.k8s.io`, kube's `ValidateServiceCIDR` and
//! `ValidateServiceCIDRUpdate`): one or two CIDRs, one of each family, each a valid CIDR in
//! canonical form; immutable, except that a single-stack ServiceCIDR may gain the other
//! family's CIDR (how a cluster, or its default ServiceCIDR, becomes dual-stack).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use kapi_apimachinery::Cause;
use serde_json::{json, Value};

const FIELD: &str = "spec.cidrs";
/// apimachinery's `FieldImmutableErrorMsg`.
const IMMUTABLE: &str = "field is immutable";

fn cidrs(obj: &Value) -> Vec<String> {
    obj.pointer("/spec/cidrs")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default()
}

/// Go's `%#v` of a `[]string`.
fn go_strings(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// `field: Invalid value: <Go value>: detail`, for values kube renders with `%#v`.
fn invalid_go(field: &str, shown: &str, detail: &str) -> Cause {
    Cause { reason: "FieldValueInvalid".into(), message: format!("{field}: Invalid value: {shown}: {detail}"), field: field.into() }
}

/// What Go's `netutils.ParseCIDRSloppy` accepts: the address (IPv4 octets may carry leading
/// zeros), the prefix length (digits, leading zeros allowed), and whether either had leading
/// zeros (which `netip.ParsePrefix` refuses).
fn parse_sloppy(value: &str) -> Option<(IpAddr, u8, bool)> {
    let (ip, prefix) = value.split_once('/')?;
    if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut zeros = prefix.len() > 1 && prefix.starts_with('0');
    let prefix: u8 = prefix.parse().ok()?;
    let addr = match ip.parse::<IpAddr>() {
        Ok(addr) => addr,
        Err(_) => {
            let octets: Vec<&str> = ip.split('.').collect();
            if octets.len() != 4 || octets.iter().any(|o| o.is_empty() || o.len() > 3 || !o.bytes().all(|b| b.is_ascii_digit())) {
                return None;
            }
            let mut bytes = [0u8; 4];
            for (b, o) in bytes.iter_mut().zip(&octets) {
                *b = o.parse().ok()?;
            }
            zeros = true;
            IpAddr::V4(Ipv4Addr::from(bytes))
        }
    };
    let bits = if addr.is_ipv4() { 32 } else { 128 };
    (prefix <= bits).then_some((addr, prefix, zeros))
}

fn masked(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix)) };
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
        }
        IpAddr::V6(v6) => {
            let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix)) };
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}

/// apimachinery's strict `IsValidCIDR`: a subnet in canonical form.
fn validate_cidr(field: &str, value: &str) -> Vec<Cause> {
    let shown = json!(value);
    let Some((addr, prefix, zeros)) = parse_sloppy(value) else {
        return vec![Cause::invalid(field, &shown, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")];
    };
    let mapped = matches!(addr, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some());
    if zeros {
        return vec![Cause::invalid(field, &shown, "must not have leading 0s in IP or prefix length")];
    }
    if mapped {
        return vec![Cause::invalid(field, &shown, "must not have an IPv4-mapped IPv6 address")];
    }
    let network = masked(addr, prefix);
    if network != addr {
        return vec![Cause::invalid(field, &shown, "must not have bits set beyond the prefix length")];
    }
    let canonical = format!("{network}/{prefix}");
    if canonical != value {
        return vec![Cause::invalid(field, &shown, &format!("must be in canonical form ({canonical:?})"))];
    }
    Vec::new()
}

/// The spec checks of create (and of a single- to dual-stack update).
fn validate_spec(list: &[String]) -> Vec<Cause> {
    let spec = || format!("networking.ServiceCIDRSpec{{CIDRs:{}}}", go_strings(list));
    if list.is_empty() {
        return vec![Cause::required(FIELD, "at least one CIDR required")];
    }
    if list.len() > 2 {
        return vec![invalid_go(FIELD, &spec(), "may only hold up to 2 values")];
    }
    if list.len() == 2 {
        let family = |c: &String| parse_sloppy(c).map(|(addr, ..)| addr.is_ipv4());
        match (family(&list[0]), family(&list[1])) {
            (Some(a), Some(b)) if a != b => {}
            _ => return vec![invalid_go(FIELD, &spec(), "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64")],
        }
    }
    list.iter().enumerate().flat_map(|(i, c)| validate_cidr(&format!("{FIELD}[{i}]"), c)).collect()
}

/// `ValidateServiceCIDR` (metadata is checked by the generic strategy).
pub(super) fn validate_service_cidr(obj: &Value) -> Vec<Cause> {
    validate_spec(&cidrs(obj))
}

/// `ValidateServiceCIDRUpdate`: the CIDRs stay as they are, except that a single-stack
/// ServiceCIDR may add the other family's.
pub(super) fn validate_service_cidr_update(new: &Value, old: &Value) -> Vec<Cause> {
    let (new, old) = (cidrs(new), cidrs(old));
    if new.len() == old.len() {
        return old
            .iter()
            .zip(&new)
            .enumerate()
            .filter(|(_, (o, n))| o != n)
            .map(|(i, (_, n))| Cause::invalid(&format!("{FIELD}[{i}]"), &json!(n), IMMUTABLE))
            .collect();
    }
    if old.len() == 1 && new.len() == 2 {
        let mut causes = Vec::new();
        if new[0] != old[0] {
            causes.push(Cause::invalid(&format!("{FIELD}[0]"), &json!(new[0]), IMMUTABLE));
        }
        causes.extend(validate_spec(&new));
        return causes;
    }
    vec![invalid_go(FIELD, &go_strings(&new), IMMUTABLE)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(list: &[&str]) -> Value {
        json!({"metadata": {"name": "x"}, "spec": {"cidrs": list}})
    }

    fn messages(causes: Vec<Cause>) -> Vec<String> {
        causes.into_iter().map(|c| c.message).collect()
    }

    #[test]
    fn create_rules() {
        assert!(validate_service_cidr(&cidr(&["10.0.0.0/24"])).is_empty());
        assert!(validate_service_cidr(&cidr(&["10.0.0.0/24", "fd00:10:96::/112"])).is_empty());
        assert_eq!(messages(validate_service_cidr(&json!({"spec": {}}))), ["spec.cidrs: Required value: at least one CIDR required"]);
        assert_eq!(
            messages(validate_service_cidr(&cidr(&["10.0.0.0/24", "10.1.0.0/24", "fd00::/64"]))),
            ["spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"10.0.0.0/24\", \"10.1.0.0/24\", \"fd00::/64\"}}: may only hold up to 2 values"]
        );
        assert_eq!(
            messages(validate_service_cidr(&cidr(&["10.0.0.0/24", "10.1.0.0/24"]))),
            ["spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"10.0.0.0/24\", \"10.1.0.0/24\"}}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"]
        );
        assert_eq!(
            messages(validate_service_cidr(&cidr(&["nope"]))),
            ["spec.cidrs[0]: Invalid value: \"nope\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"]
        );
        assert_eq!(
            messages(validate_service_cidr(&cidr(&["10.0.0.1/24"]))),
            ["spec.cidrs[0]: Invalid value: \"10.0.0.1/24\": must not have bits set beyond the prefix length"]
        );
        assert_eq!(
            messages(validate_service_cidr(&cidr(&["010.0.0.0/24"]))),
            ["spec.cidrs[0]: Invalid value: \"010.0.0.0/24\": must not have leading 0s in IP or prefix length"]
        );
        assert_eq!(
            messages(validate_service_cidr(&cidr(&["FD00::/64"]))),
            ["spec.cidrs[0]: Invalid value: \"FD00::/64\": must be in canonical form (\"fd00::/64\")"]
        );
        assert_eq!(
            messages(validate_service_cidr(&cidr(&["::ffff:10.0.0.0/120"]))),
            ["spec.cidrs[0]: Invalid value: \"::ffff:10.0.0.0/120\": must not have an IPv4-mapped IPv6 address"]
        );
    }

    #[test]
    fn update_rules() {
        let single = cidr(&["10.0.0.0/24"]);
        assert!(validate_service_cidr_update(&single, &single).is_empty());
        assert!(validate_service_cidr_update(&cidr(&["10.0.0.0/24", "fd00::/64"]), &single).is_empty());
        assert_eq!(
            messages(validate_service_cidr_update(&cidr(&["10.1.0.0/24"]), &single)),
            ["spec.cidrs[0]: Invalid value: \"10.1.0.0/24\": field is immutable"]
        );
        assert_eq!(
            messages(validate_service_cidr_update(&cidr(&["10.0.0.0/24", "10.1.0.0/24"]), &single)),
            ["spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"10.0.0.0/24\", \"10.1.0.0/24\"}}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"]
        );
        assert_eq!(
            messages(validate_service_cidr_update(&single, &cidr(&["10.0.0.0/24", "fd00::/64"]))),
            ["spec.cidrs: Invalid value: []string{\"10.0.0.0/24\"}: field is immutable"]
        );
    }
}
