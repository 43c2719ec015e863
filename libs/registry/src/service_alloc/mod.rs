//! Service cluster IPs and node ports, allocated as kube-apiserver's Service storage does
//! (`pkg/registry/core/service/storage/alloc.go`): IP families defaulted from the cluster's
//! ranges, addresses taken before the Service is stored and given back when the write fails,
//! when an update no longer needs them, and when the Service is deleted. Every claim is a
//! create-if-absent in the shared store, so allocations are unique across replicas; [`repair`]
//! makes claims and Services agree again after a crash between the two writes.

pub mod cidrs;
mod families;
mod ips;
mod network;
mod ports;
pub mod repair;
mod service;

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use kapi_apimachinery::{ApiError, Cause, Result};
use kapi_storage::DynStore;
use serde_json::{json, Value};

pub use network::{Cidr, Family, ServiceNetwork};

use crate::rest::{PendingEffects, RestStore, WriteEffects};
use families::{go_strings, init_ip_family_fields};
use ips::IpAllocator;
use ports::PortAllocator;
use service::*;

/// Why an address or port could not be taken, in kube's allocator words.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AllocError {
    #[error("provided IP is already allocated")]
    Allocated,
    #[error("the provided network does not match the current range")]
    MismatchedNetwork,
    #[error("provided port is not in the valid range. The range of valid ports is {0}")]
    PortNotInRange(String),
    #[error("range is full")]
    Full,
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl AllocError {
    fn port_message(&self) -> String {
        match self {
            AllocError::Allocated => "provided port is already allocated".into(),
            other => other.to_string(),
        }
    }
}

/// What a claim holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Claim {
    Ip(IpAddr),
    Port(u16),
}

/// The allocator behind the `services` resource.
#[derive(Clone)]
pub struct ServiceAllocator {
    inner: Arc<Inner>,
}

struct Inner {
    network: ServiceNetwork,
    ips: IpAllocator,
    ports: PortAllocator,
}

impl ServiceAllocator {
    /// An allocator over `rest` (a store without effects of its own: it writes IPAddresses)
    /// and `store` (where node port claims live; the same store underneath).
    pub fn new(network: ServiceNetwork, rest: RestStore, store: DynStore) -> Self {
        let ports = PortAllocator { store, range: network.node_ports.clone() };
        ServiceAllocator { inner: Arc::new(Inner { network, ips: IpAllocator { rest }, ports }) }
    }

    /// The ranges `family` addresses come from now: the Ready ServiceCIDRs' in the watch
    /// cache, the default one first.
    fn ranges(&self, family: Family) -> Vec<Cidr> {
        cidrs::allocation_ranges(cidrs::cached_service_cidrs(&self.inner.ips.rest), &self.inner.network, family)
    }

    /// Whether `ip` lies in any ServiceCIDR (the repair pass's range).
    pub(crate) fn in_service_cidrs(&self, ip: IpAddr) -> bool {
        cidrs::in_any(cidrs::cached_service_cidrs(&self.inner.ips.rest), &self.inner.network, ip)
    }

    async fn release(&self, claims: &[Claim], namespace: &str, name: &str) {
        for claim in claims {
            let result = match *claim {
                Claim::Ip(ip) => self.inner.ips.release(ip, namespace, name).await,
                Claim::Port(port) => self.inner.ports.release(port, namespace, name).await,
            };
            if let Err(e) = result {
                // The repair pass gives it back later.
                tracing::warn!(namespace, name, ?claim, "releasing a service allocation failed: {e}");
            }
        }
    }

    /// Takes the cluster IPs `svc` asks for or needs that `old_ips` does not already hold.
    async fn take_ips(&self, svc: &mut Value, old_ips: &HashSet<IpAddr>, dry_run: bool, taken: &mut Vec<Claim>) -> Result<()> {
        if service_type(svc) == "ExternalName" || is_headless(svc) {
            return Ok(());
        }
        let (namespace, name) = service_ref(svc);
        let mut ips = cluster_ips(svc);
        let fams = families(svc);
        for (i, fam) in fams.iter().enumerate() {
            let Some(family) = Family::parse(fam) else { continue };
            if self.inner.network.range(family).is_none() {
                continue;
            }
            let ranges = self.ranges(family);
            match ips.get(i).map(String::as_str).filter(|ip| !ip.is_empty()) {
                Some(text) => {
                    let Ok(ip) = text.parse::<IpAddr>() else { continue };
                    if old_ips.contains(&ip) {
                        continue;
                    }
                    if let Err(e) = self.inner.ips.allocate(&ranges, ip, &namespace, &name, dry_run).await {
                        let cause = Cause {
                            reason: "FieldValueInvalid".into(),
                            message: format!("spec.clusterIPs: Invalid value: {}: failed to allocate IP {text}: {e}", go_strings(&ips)),
                            field: "spec.clusterIPs".into(),
                        };
                        return Err(match e {
                            AllocError::Api(api) => api,
                            _ => ApiError::invalid("", "Service", &name, vec![cause]),
                        });
                    }
                    taken.push(Claim::Ip(ip));
                }
                None => {
                    let ip = self.inner.ips.allocate_next(&ranges, &namespace, &name, dry_run).await.map_err(|e| match e {
                        AllocError::Api(api) => api,
                        e => ApiError::internal(format!("failed to allocate a serviceIP: {e}")),
                    })?;
                    taken.push(Claim::Ip(ip));
                    if i < ips.len() {
                        ips[i] = ip.to_string();
                    } else {
                        ips.push(ip.to_string());
                    }
                }
            }
        }
        set_cluster_ips(svc, &ips);
        Ok(())
    }

    /// Takes the node ports `svc` asks for or needs that `old_ports` does not already hold
    /// (kube's `initNodePorts`/`updateNodePorts` and health check node port).
    async fn take_ports(&self, svc: &mut Value, old_ports: &HashSet<u16>, dry_run: bool, taken: &mut Vec<Claim>) -> Result<()> {
        let (namespace, name) = service_ref(svc);
        let mut this_request: HashSet<u16> = HashSet::new();
        if has_node_ports(svc) {
            let allocate_new = should_allocate_node_ports(svc);
            let count = svc.pointer("/spec/ports").and_then(Value::as_array).map_or(0, Vec::len);
            for i in 0..count {
                let port = &svc["spec"]["ports"][i];
                let number = port.get("port").cloned().unwrap_or(Value::Null);
                let mut node_port = port.get("nodePort").and_then(Value::as_u64).unwrap_or(0) as u16;
                if node_port == 0 {
                    // The same service port under another protocol shares its node port.
                    let ports = svc["spec"]["ports"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                    node_port = ports
                        .iter()
                        .filter(|p| p.get("port") == Some(&number))
                        .find_map(|p| p.get("nodePort").and_then(Value::as_u64).filter(|n| *n != 0))
                        .unwrap_or(0) as u16;
                }
                if node_port == 0 {
                    if !allocate_new {
                        continue;
                    }
                    let port = self.inner.ports.allocate_next(&namespace, &name, dry_run, &this_request).await.map_err(|e| match e {
                        AllocError::Api(api) => api,
                        e => ApiError::internal(format!("failed to allocate a nodePort: {e}")),
                    })?;
                    taken.push(Claim::Port(port));
                    this_request.insert(port);
                    svc["spec"]["ports"][i]["nodePort"] = json!(port);
                    continue;
                }
                svc["spec"]["ports"][i]["nodePort"] = json!(node_port);
                if old_ports.contains(&node_port) || !this_request.insert(node_port) {
                    continue;
                }
                if let Err(e) = self.inner.ports.allocate(node_port, &namespace, &name, dry_run).await {
                    return Err(match e {
                        AllocError::Api(api) => api,
                        e => ApiError::invalid(
                            "",
                            "Service",
                            &name,
                            vec![Cause::invalid(&format!("spec.ports[{i}].nodePort"), &json!(node_port), &e.port_message())],
                        ),
                    });
                }
                taken.push(Claim::Port(node_port));
            }
        }
        if !needs_health_check(svc) {
            if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("healthCheckNodePort");
            }
            return Ok(());
        }
        let requested = svc.pointer("/spec/healthCheckNodePort").and_then(Value::as_u64).unwrap_or(0) as u16;
        if requested == 0 {
            let port = self.inner.ports.allocate_next(&namespace, &name, dry_run, &this_request).await.map_err(|e| match e {
                AllocError::Api(api) => api,
                e => ApiError::internal(format!("failed to allocate a HealthCheck NodePort 0: {e}")),
            })?;
            taken.push(Claim::Port(port));
            svc["spec"]["healthCheckNodePort"] = json!(port);
        } else if !old_ports.contains(&requested) && !this_request.contains(&requested) {
            self.inner.ports.allocate(requested, &namespace, &name, dry_run).await.map_err(|e| match e {
                AllocError::Api(api) => api,
                e => ApiError::internal(format!("failed to allocate requested HealthCheck NodePort {requested}: {}", e.port_message())),
            })?;
            taken.push(Claim::Port(requested));
        }
        Ok(())
    }

    /// Reserves for `svc` (created, or updated from `old`), returning what to settle.
    async fn begin(&self, old: Option<&Value>, svc: &mut Value, dry_run: bool) -> Result<Reservation> {
        let (namespace, name) = service_ref(svc);
        let ips = cluster_ips(svc);
        if !ips.is_empty() && svc.pointer("/spec/clusterIPs").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            svc["spec"]["clusterIPs"] = json!(ips);
        }
        if let Some(old) = old {
            patch_allocated_values(svc, old);
        }
        init_ip_family_fields(&self.inner.network, svc, old).map_err(|causes| ApiError::invalid("", "Service", &name, causes))?;
        let held = |o: Option<&Value>| -> (HashSet<IpAddr>, HashSet<u16>) {
            let Some(o) = o else { return Default::default() };
            let ips = if service_type(o) == "ExternalName" || is_headless(o) {
                HashSet::new()
            } else {
                cluster_ips(o).iter().filter_map(|ip| ip.parse().ok()).collect()
            };
            (ips, held_node_ports(o).into_iter().collect())
        };
        let (old_ips, old_ports) = held(old);
        let mut reservation = Reservation { allocator: self.clone(), namespace, name, taken: Vec::new(), release: Vec::new(), dry_run };
        let mut taken = Vec::new();
        let result = match self.take_ips(svc, &old_ips, dry_run, &mut taken).await {
            Ok(()) => self.take_ports(svc, &old_ports, dry_run, &mut taken).await,
            Err(e) => Err(e),
        };
        reservation.taken = taken;
        if let Err(e) = result {
            Box::new(reservation).finish(false).await;
            return Err(e);
        }
        let (new_ips, new_ports) = held(Some(svc));
        reservation.release =
            old_ips.difference(&new_ips).map(|ip| Claim::Ip(*ip)).chain(old_ports.difference(&new_ports).map(|p| Claim::Port(*p))).collect();
        Ok(reservation)
    }
}

/// kube's `patchAllocatedValues`: an update that leaves out what the Service was given (a
/// manifest applied again without `clusterIP` or `nodePort`) keeps it.
fn patch_allocated_values(svc: &mut Value, old: &Value) {
    let needs_ip = |s: &Value| service_type(s) != "ExternalName";
    if needs_ip(old) && needs_ip(svc) {
        if svc.pointer("/spec/clusterIP").and_then(Value::as_str).is_none_or(str::is_empty) {
            if let Some(ip) = old.pointer("/spec/clusterIP").filter(|v| v.is_string()) {
                svc["spec"]["clusterIP"] = ip.clone();
            }
        }
        if svc.pointer("/spec/clusterIPs").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            if let Some(ips) = old.pointer("/spec/clusterIPs").filter(|v| v.as_array().is_some_and(|a| !a.is_empty())) {
                svc["spec"]["clusterIPs"] = ips.clone();
            }
        }
    }
    if has_node_ports(old) && has_node_ports(svc) {
        let used: HashSet<u64> = held_node_ports(svc).into_iter().map(u64::from).collect();
        let by_name: Vec<(String, u64)> = old
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map(|ports| {
                ports
                    .iter()
                    .map(|p| (p.get("name").and_then(Value::as_str).unwrap_or("").to_owned(), p.get("nodePort").and_then(Value::as_u64).unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in ports {
                if p.get("nodePort").and_then(Value::as_u64).unwrap_or(0) != 0 {
                    continue;
                }
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                if let Some((_, old_port)) = by_name.iter().find(|(n, _)| n == name) {
                    if *old_port != 0 && !used.contains(old_port) {
                        p["nodePort"] = json!(old_port);
                    }
                }
            }
        }
    }
    if needs_health_check(old) && needs_health_check(svc) && svc.pointer("/spec/healthCheckNodePort").and_then(Value::as_u64).unwrap_or(0) == 0 {
        if let Some(hc) = old.pointer("/spec/healthCheckNodePort") {
            svc["spec"]["healthCheckNodePort"] = hc.clone();
        }
    }
}

/// One write's claims: `taken` go back if the write fails, `release` (the old object's, no
/// longer needed) go back once it succeeds.
struct Reservation {
    allocator: ServiceAllocator,
    namespace: String,
    name: String,
    taken: Vec<Claim>,
    release: Vec<Claim>,
    dry_run: bool,
}

#[async_trait::async_trait]
impl PendingEffects for Reservation {
    async fn finish(self: Box<Self>, stored: bool) {
        if self.dry_run {
            return;
        }
        let claims = if stored { &self.release } else { &self.taken };
        self.allocator.release(claims, &self.namespace, &self.name).await;
    }
}

#[async_trait::async_trait]
impl WriteEffects for ServiceAllocator {
    async fn begin_create(&self, obj: &mut Value, dry_run: bool) -> Result<Box<dyn PendingEffects>> {
        Ok(Box::new(self.begin(None, obj, dry_run).await?))
    }

    async fn begin_update(&self, old: &Value, new: &mut Value, dry_run: bool) -> Result<Box<dyn PendingEffects>> {
        Ok(Box::new(self.begin(Some(old), new, dry_run).await?))
    }

    async fn after_delete(&self, obj: &Value) {
        let (namespace, name) = service_ref(obj);
        let mut claims: Vec<Claim> = held_node_ports(obj).into_iter().map(Claim::Port).collect();
        if service_type(obj) != "ExternalName" && !is_headless(obj) {
            claims.extend(cluster_ips(obj).iter().filter_map(|ip| ip.parse().ok()).map(Claim::Ip));
        }
        self.release(&claims, &namespace, &name).await;
    }
}
