//! The allocation repair pass (kube-apiserver's `RepairIPAddress` and node port `Repair`
//! controllers), run at start and then periodically on every replica: a Service whose address
//! or port has no claim gets it recorded again, and a claim whose Service is gone (a crash
//! between the claim and the Service write, or before a release) is given back. Young claims
//! are left alone, since their Service may still be on its way into the store, and an orphan
//! is confirmed by a live read before it goes.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::Duration;

use kapi_apimachinery::{time as ktime, ApiError};
use serde_json::Value;

use super::ips::{held_by, ip_address_object, ip_addresses, ALLOCATOR, MANAGED_BY};
use super::ports::now_unix;
use super::service::{cluster_ips, held_node_ports, is_headless, service_ref, service_type};
use super::ServiceAllocator;
use crate::catalog;
use crate::rest::{DeleteOptions, WriteHooks};
use crate::strategy::CatalogStrategy;

/// How old a claim must be before the pass takes it for an orphan.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(30);
/// kube's repair interval.
pub const INTERVAL: Duration = Duration::from_secs(180);

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RepairReport {
    /// Addresses and ports of Services that had no claim and got one.
    pub restored: usize,
    /// Claims without a Service, given back.
    pub released: usize,
    /// Addresses or ports two Services hold, or outside the ranges: reported, left alone.
    pub conflicts: usize,
}

/// Runs the pass now and then every [`INTERVAL`] until the process ends.
pub fn start(allocator: ServiceAllocator) {
    tokio::spawn(async move {
        loop {
            match run_once(&allocator, ORPHAN_GRACE).await {
                Ok(report) if report != RepairReport::default() => tracing::info!(?report, "service allocations repaired"),
                Ok(_) => {}
                Err(e) => tracing::warn!("service allocation repair failed: {e}"),
            }
            tokio::time::sleep(INTERVAL).await;
        }
    });
}

/// One pass over every Service and every claim; claims younger than `grace` are kept.
pub async fn run_once(allocator: &ServiceAllocator, grace: Duration) -> Result<RepairReport, ApiError> {
    let rest = &allocator.inner.ips.rest;
    let services_spec = catalog::find("", "v1", "services").ok_or_else(|| ApiError::internal("services missing from the catalog"))?;
    let addr_spec = ip_addresses()?;
    let cached = |prefix: String| rest.caches().cache(&prefix).map(|c| c.list(&prefix).0).unwrap_or_default();
    let services = cached(services_spec.key_prefix());
    let addresses: HashMap<IpAddr, Value> = cached(addr_spec.key_prefix())
        .into_iter()
        .filter_map(|o| Some((o.object.pointer("/metadata/name")?.as_str()?.parse().ok()?, (*o.object).clone())))
        .collect();
    let port_claims: HashMap<u16, _> = allocator.inner.ports.claims().await?.into_iter().map(|(p, c, rev)| (p, (c, rev))).collect();
    let network = &allocator.inner.network;
    let mut report = RepairReport::default();
    let mut wanted_ips: HashSet<(IpAddr, String, String)> = HashSet::new();
    let mut wanted_ports: HashSet<(u16, String, String)> = HashSet::new();

    for svc in &services {
        let svc = &*svc.object;
        let (namespace, name) = service_ref(svc);
        if service_type(svc) != "ExternalName" && !is_headless(svc) {
            for ip in cluster_ips(svc).iter().filter_map(|ip| ip.parse::<IpAddr>().ok()) {
                wanted_ips.insert((ip, namespace.clone(), name.clone()));
                match addresses.get(&ip) {
                    Some(addr) if held_by(addr, &namespace, &name) => {}
                    Some(_) => {
                        tracing::warn!(%ip, namespace, name, "ClusterIPAlreadyAllocated: the cluster IP is held by another Service");
                        report.conflicts += 1;
                    }
                    None if allocator.in_service_cidrs(ip) => {
                        let obj = ip_address_object(ip, &namespace, &name);
                        match rest.create(&CatalogStrategy(addr_spec), None, obj, false, WriteHooks::default()).await {
                            Ok(_) => report.restored += 1,
                            Err(e) if e.code == 409 => {}
                            Err(e) => return Err(e),
                        }
                    }
                    None => {
                        tracing::warn!(%ip, namespace, name, "ClusterIPOutOfRange: the cluster IP is not in any ServiceCIDR");
                        report.conflicts += 1;
                    }
                }
            }
        }
        for port in held_node_ports(svc) {
            wanted_ports.insert((port, namespace.clone(), name.clone()));
            match port_claims.get(&port) {
                Some((claim, _)) if claim.namespace == namespace && claim.name == name => {}
                Some(_) => {
                    tracing::warn!(port, namespace, name, "PortAlreadyAllocated: the node port is held by another Service");
                    report.conflicts += 1;
                }
                None if network.node_ports.contains(&port) => {
                    if allocator.inner.ports.restore(port, &namespace, &name).await? {
                        report.restored += 1;
                    }
                }
                None => {
                    tracing::warn!(port, namespace, name, "PortOutOfRange: the node port is not in --service-node-port-range");
                    report.conflicts += 1;
                }
            }
        }
    }

    let now = now_unix();
    let old_enough = |since: i64| now - since >= grace.as_secs() as i64;
    let services_strategy = CatalogStrategy(services_spec);
    // An orphan by the cache is confirmed against the store before it goes.
    let still_held = |svc: Option<Value>, check: &dyn Fn(&Value) -> bool| svc.is_some_and(|s| check(&s));
    for (ip, addr) in &addresses {
        if addr.pointer(&format!("/metadata/labels/{}", MANAGED_BY.replace('/', "~1"))).and_then(Value::as_str) != Some(ALLOCATOR) {
            continue;
        }
        let parent = |f: &str| addr.pointer(&format!("/spec/parentRef/{f}")).and_then(Value::as_str).unwrap_or("").to_owned();
        let (namespace, name) = (parent("namespace"), parent("name"));
        if wanted_ips.contains(&(*ip, namespace.clone(), name.clone())) {
            continue;
        }
        let created = addr
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(ktime::parse_rfc3339)
            .map(|t| t.unix_timestamp())
            .unwrap_or(now);
        if !old_enough(created) {
            continue;
        }
        let live = rest.get(&services_strategy, Some(&namespace), &name).await.ok();
        if still_held(live, &|s| cluster_ips(s).iter().any(|i| i.parse::<IpAddr>().ok() == Some(*ip))) {
            continue;
        }
        let uid = addr.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned);
        let opts = DeleteOptions { precondition_uid: uid, ..DeleteOptions::default() };
        match rest.delete(&CatalogStrategy(addr_spec), None, &ip.to_string(), &opts).await {
            Ok(_) => report.released += 1,
            Err(e) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    for (port, (claim, revision)) in &port_claims {
        if wanted_ports.contains(&(*port, claim.namespace.clone(), claim.name.clone())) || !old_enough(claim.since) {
            continue;
        }
        let live = rest.get(&services_strategy, Some(&claim.namespace), &claim.name).await.ok();
        if still_held(live, &|s| held_node_ports(s).contains(port)) {
            continue;
        }
        if allocator.inner.ports.drop_claim(*port, *revision).await? {
            report.released += 1;
        }
    }
    Ok(report)
}
