//! Printers for the network kinds: endpoints, endpoint slices, ingresses, service CIDRs and IP
//! addresses (kube's `printers.go`).

use std::collections::BTreeSet;

use serde_json::{json, Value};
use time::OffsetDateTime;

use super::{age, array_at, col, first_of, list_with_more, name, str_at, ColumnDef, AGE, NAME};

pub(super) const ENDPOINTS: &[ColumnDef] = &[NAME, col("Endpoints", "string", "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service."), AGE];

/// kube describes these columns with the discovery/v1beta1 fields' documentation.
pub(super) const ENDPOINT_SLICE: &[ColumnDef] = &[
    NAME,
    col("AddressType", "string", "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name."),
    col("Ports", "string", "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports."),
    col("Endpoints", "string", "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints."),
    AGE,
];

pub(super) const INGRESS: &[ColumnDef] = &[
    NAME,
    col("Class", "string", "The name of the IngressClass resource that should be used for additional configuration"),
    col("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
    col("Address", "string", "Address is a list containing ingress points for the load-balancer"),
    col("Ports", "string", "Ports of TLS configurations that open"),
    AGE,
];

pub(super) const SERVICE_CIDR: &[ColumnDef] = &[NAME, col("CIDRs", "string", "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable."), AGE];

/// kube declares no Age column for IP addresses although its rows carry the age as a third
/// cell; clients print the declared columns only.
pub(super) const IP_ADDRESS: &[ColumnDef] = &[NAME, col("ParentRef", "string", "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object.")];

/// How many addresses the endpoint columns list before "+ N more...".
const SHOWN: usize = 3;

/// `formatEndpoints`: `ip:port` for every port of every subset (the bare IP for a subset
/// without ports), the first three listed, `<none>` without subsets.
pub(super) fn endpoints(ep: &Value, now: OffsetDateTime) -> Vec<Value> {
    let subsets = array_at(ep, "/subsets");
    let cell = if subsets.is_empty() {
        "<none>".to_string()
    } else {
        let mut all = Vec::new();
        for ss in subsets {
            let ips: Vec<&str> = array_at(ss, "/addresses").iter().map(|a| str_at(a, "/ip")).collect();
            let ports = array_at(ss, "/ports");
            if ports.is_empty() {
                all.extend(ips.iter().map(|ip| ip.to_string()));
            }
            for port in ports {
                let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
                all.extend(ips.iter().map(|ip| join_host_port(ip, number)));
            }
        }
        first_of(all, SHOWN)
    };
    vec![name(ep), json!(cell), age(ep, now)]
}

/// Go's `net.JoinHostPort`: IPv6 addresses in brackets.
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `printEndpointSlice`: ports (number, else name, else `*`) and endpoint addresses, three of
/// each, `<unset>` for none.
pub(super) fn endpoint_slice(es: &Value, now: OffsetDateTime) -> Vec<Value> {
    let ports: Vec<String> = array_at(es, "/ports")
        .iter()
        .map(|p| match (p.get("port").and_then(Value::as_i64), p.get("name").and_then(Value::as_str)) {
            (Some(n), _) => n.to_string(),
            (None, Some(n)) => n.to_string(),
            (None, None) => "*".to_string(),
        })
        .collect();
    let addresses: Vec<String> = array_at(es, "/endpoints")
        .iter()
        .flat_map(|e| array_at(e, "/addresses").iter().map(|a| a.as_str().unwrap_or("").to_string()))
        .collect();
    vec![
        name(es),
        json!(str_at(es, "/addressType")),
        json!(list_with_more(ports, SHOWN)),
        json!(list_with_more(addresses, SHOWN)),
        age(es, now),
    ]
}

/// `printIngress`: class (`<none>`), the first three rule hosts (`*` for none; kube counts
/// the rest by rules, not hosts), the load
/// balancer's addresses (sorted, unique; the server prints them unclipped), and the ports the
/// ingress opens.
pub(super) fn ingress(ing: &Value, now: OffsetDateTime) -> Vec<Value> {
    let class = ing.pointer("/spec/ingressClassName").and_then(Value::as_str).unwrap_or("<none>");
    let rules = array_at(ing, "/spec/rules");
    let (mut hosts, mut more) = (Vec::new(), false);
    for rule in rules {
        more |= hosts.len() == SHOWN;
        if !more && !str_at(rule, "/host").is_empty() {
            hosts.push(str_at(rule, "/host"));
        }
    }
    let hosts = match (hosts.is_empty(), more) {
        (true, _) => "*".to_string(),
        (false, true) => format!("{} + {} more...", hosts.join(","), rules.len() - SHOWN),
        (false, false) => hosts.join(","),
    };
    let address: BTreeSet<&str> = array_at(ing, "/status/loadBalancer/ingress")
        .iter()
        .filter_map(|i| [str_at(i, "/ip"), str_at(i, "/hostname")].into_iter().find(|s| !s.is_empty()))
        .collect();
    let ports = if array_at(ing, "/spec/tls").is_empty() { "80" } else { "80, 443" };
    vec![
        name(ing),
        json!(class),
        json!(hosts),
        json!(address.into_iter().collect::<Vec<_>>().join(",")),
        json!(ports),
        age(ing, now),
    ]
}

pub(super) fn service_cidr(sc: &Value, now: OffsetDateTime) -> Vec<Value> {
    let cidrs: Vec<&str> = array_at(sc, "/spec/cidrs").iter().filter_map(Value::as_str).collect();
    vec![name(sc), json!(cidrs.join(",")), age(sc, now)]
}

/// `printIPAddress`: the parent as `resource[.group][/namespace]/name`, lower-cased group
/// resource; `<none>` without one.
pub(super) fn ip_address(ip: &Value, now: OffsetDateTime) -> Vec<Value> {
    let parent = match ip.pointer("/spec/parentRef").filter(|p| p.is_object()) {
        None => "<none>".to_string(),
        Some(p) => {
            let mut s = match str_at(p, "/group") {
                "" => str_at(p, "/resource").to_lowercase(),
                group => format!("{}.{group}", str_at(p, "/resource")).to_lowercase(),
            };
            if let Some(ns) = p.get("namespace").and_then(Value::as_str).filter(|ns| !ns.is_empty()) {
                s = format!("{s}/{ns}");
            }
            format!("{s}/{}", str_at(p, "/name"))
        }
    };
    vec![name(ip), json!(parent), age(ip, now)]
}
