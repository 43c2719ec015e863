//! ServiceCIDRs (`networking.k8s.io/v1`) as kube's `MetaAllocator` and the servicecidrs
//! controller read them from their informers: the ranges Service cluster IPs come from. They
//! are read from the watch cache, never with a store round trip per allocation.
//!
//! Until the cache holds the default ServiceCIDR (`kubernetes`, which the bootstrap creates from
//! `--service-cluster-ip-range` before the `kubernetes` Service), the flags' ranges stand in
//! for it, so the first allocations of a fresh cluster do not wait for the cache.

use std::net::IpAddr;

use serde_json::Value;

use super::network::{Cidr, Family, ServiceNetwork};
use crate::catalog::{self, ResourceSpec};
use crate::rest::RestStore;

/// The default ServiceCIDR's name (kube's `DefaultServiceCIDRName`).
pub const DEFAULT_SERVICE_CIDR: &str = "kubernetes";

/// One ServiceCIDR as the allocators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceCidr {
    /// `metadata.name`.
    pub name: String,
    /// `spec.cidrs` that parse.
    pub cidrs: Vec<Cidr>,
    /// kube's `isReady`: the `Ready` condition is True, or there is none yet (a cluster
    /// without the controller manager still allocates).
    pub ready: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl ServiceCidr {
    /// Reads a ServiceCIDR object.
    pub fn from_object(obj: &Value) -> Self {
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let cidrs = obj
            .pointer("/spec/cidrs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).filter_map(|c| Cidr::parse(c).ok()).collect())
            .unwrap_or_default();
        let ready = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|conds| conds.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready")))
            .is_none_or(|c| c.get("status").and_then(Value::as_str) == Some("True"));
        let deleting = obj.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        ServiceCidr { name, cidrs, ready, deleting }
    }

    /// Whether addresses may be allocated from it: Ready and not being deleted.
    pub fn allocatable(&self) -> bool {
        self.ready && !self.deleting
    }

    /// Whether `ip` is one of its allocatable addresses (kube's `PrefixContainsIP`: the
    /// network address, and IPv4's broadcast address, are not).
    pub fn contains_ip(&self, ip: IpAddr) -> bool {
        self.cidrs.iter().any(|c| c.index_of(ip).is_some())
    }
}

/// The ServiceCIDR resource.
pub fn service_cidrs_spec() -> Option<&'static ResourceSpec> {
    catalog::find("networking.k8s.io", "v1", "servicecidrs")
}

/// Every ServiceCIDR the watch cache holds, the default one first, then by name.
pub fn cached_service_cidrs(rest: &RestStore) -> Vec<ServiceCidr> {
    let Some(spec) = service_cidrs_spec() else { return Vec::new() };
    let prefix = spec.key_prefix();
    let Some(cache) = rest.caches().cache(&prefix) else { return Vec::new() };
    let mut all: Vec<ServiceCidr> = cache.list(&prefix).0.iter().map(|o| ServiceCidr::from_object(&o.object)).collect();
    sort_default_first(&mut all);
    all
}

/// The default ServiceCIDR first, then by name.
pub fn sort_default_first(all: &mut [ServiceCidr]) {
    all.sort_by(|a, b| (a.name != DEFAULT_SERVICE_CIDR, &a.name).cmp(&(b.name != DEFAULT_SERVICE_CIDR, &b.name)));
}

/// What the flags give while the default ServiceCIDR is not in the cache yet.
fn with_flags_default(mut all: Vec<ServiceCidr>, network: &ServiceNetwork) -> Vec<ServiceCidr> {
    if !all.iter().any(|s| s.name == DEFAULT_SERVICE_CIDR) {
        let default = ServiceCidr { name: DEFAULT_SERVICE_CIDR.into(), cidrs: network.cluster_ips.clone(), ready: true, deleting: false };
        all.insert(0, default);
    }
    all
}

/// The ranges of `family` addresses are allocated from, in kube's order (the default
/// ServiceCIDR's first): those of Ready ServiceCIDRs not being deleted, each range once.
pub(super) fn allocation_ranges(all: Vec<ServiceCidr>, network: &ServiceNetwork, family: Family) -> Vec<Cidr> {
    let mut ranges: Vec<Cidr> = Vec::new();
    for s in with_flags_default(all, network).iter().filter(|s| s.allocatable()) {
        for c in s.cidrs.iter().filter(|c| c.family() == family) {
            if !ranges.contains(c) {
                ranges.push(*c);
            }
        }
    }
    ranges
}

/// Whether `ip` lies in any ServiceCIDR, whatever its state (the repair pass's range check).
pub(super) fn in_any(all: Vec<ServiceCidr>, network: &ServiceNetwork, ip: IpAddr) -> bool {
    with_flags_default(all, network).iter().any(|s| s.contains_ip(ip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, cidrs: &[&str], ready: Option<&str>, deleting: bool) -> Value {
        let mut o = json!({"metadata": {"name": name}, "spec": {"cidrs": cidrs}});
        if let Some(status) = ready {
            o["status"] = json!({"conditions": [{"type": "Ready", "status": status}]});
        }
        if deleting {
            o["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        }
        o
    }

    #[test]
    fn readiness_follows_kube() {
        assert!(ServiceCidr::from_object(&obj("a", &["10.0.0.0/24"], None, false)).allocatable());
        assert!(ServiceCidr::from_object(&obj("a", &["10.0.0.0/24"], Some("True"), false)).allocatable());
        assert!(!ServiceCidr::from_object(&obj("a", &["10.0.0.0/24"], Some("False"), false)).allocatable());
        assert!(!ServiceCidr::from_object(&obj("a", &["10.0.0.0/24"], Some("True"), true)).allocatable());
        let s = ServiceCidr::from_object(&obj("a", &["10.0.0.0/24", "fd00::/120"], None, false));
        assert!(s.contains_ip("10.0.0.9".parse().unwrap()) && s.contains_ip("fd00::9".parse().unwrap()));
        assert!(!s.contains_ip("10.0.0.0".parse().unwrap()) && !s.contains_ip("10.0.0.255".parse().unwrap()));
    }

    #[test]
    fn ranges_default_first_ready_only() {
        let network = ServiceNetwork::parse("10.0.0.0/29", "30000-32767").unwrap();
        let mut all: Vec<ServiceCidr> = [
            obj("b-extra", &["10.2.0.0/24"], Some("True"), false),
            obj("a-extra", &["10.1.0.0/24", "fd00::/120"], None, false),
            obj("kubernetes", &["10.0.0.0/29"], Some("True"), false),
            obj("going", &["10.3.0.0/24"], Some("True"), true),
            obj("notready", &["10.4.0.0/24"], Some("False"), false),
            obj("same", &["10.2.0.0/24"], Some("True"), false),
        ]
        .iter()
        .map(ServiceCidr::from_object)
        .collect();
        sort_default_first(&mut all);
        assert_eq!(all[0].name, "kubernetes");
        let v4: Vec<String> = allocation_ranges(all.clone(), &network, Family::V4).iter().map(ToString::to_string).collect();
        assert_eq!(v4, ["10.0.0.0/29", "10.1.0.0/24", "10.2.0.0/24"]);
        let v6: Vec<String> = allocation_ranges(all.clone(), &network, Family::V6).iter().map(ToString::to_string).collect();
        assert_eq!(v6, ["fd00::/120"]);
        // The repair pass counts every ServiceCIDR, being deleted or not.
        assert!(in_any(all.clone(), &network, "10.3.0.5".parse().unwrap()));
        assert!(!in_any(all, &network, "10.9.0.5".parse().unwrap()));
    }

    #[test]
    fn flags_stand_in_for_a_default_not_cached_yet() {
        let network = ServiceNetwork::parse("10.0.0.0/29", "30000-32767").unwrap();
        let ranges = allocation_ranges(Vec::new(), &network, Family::V4);
        assert_eq!(ranges, network.cluster_ips);
        let extra = vec![ServiceCidr::from_object(&obj("extra", &["10.1.0.0/24"], None, false))];
        let ranges: Vec<String> = allocation_ranges(extra, &network, Family::V4).iter().map(ToString::to_string).collect();
        assert_eq!(ranges, ["10.0.0.0/29", "10.1.0.0/24"]);
        // A default being deleted is not replaced by the flags.
        let going = vec![ServiceCidr::from_object(&obj("kubernetes", &["10.0.0.0/29"], None, true))];
        assert!(allocation_ranges(going, &network, Family::V4).is_empty());
    }
}
