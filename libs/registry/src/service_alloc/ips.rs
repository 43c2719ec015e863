//! Cluster IPs held as `networking.k8s.io/v1` IPAddress objects, as kube's allocator keeps them
//! since v1.33: an address is taken by creating the IPAddress named after it, so the store's
//! create-if-absent makes it unique across every replica, and what is allocated is visible
//! (`kubectl get ipaddresses`) and repairable.

use std::collections::HashSet;
use std::net::IpAddr;

use kapi_apimachinery::ApiError;
use rand::Rng;
use serde_json::{json, Value};

use super::network::{Cidr, Family};
use super::AllocError;
use crate::catalog::{self, ResourceSpec};
use crate::rest::{object_key, DeleteOptions, RestStore, WriteHooks};
use crate::strategy::CatalogStrategy;

/// The label kube's allocator marks its IPAddresses with.
pub(super) const MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
/// Its value for Service cluster IPs.
pub(super) const ALLOCATOR: &str = "ipallocator.k8s.io";
/// Random picks before falling back to a scan of what is free.
const RANDOM_TRIES: usize = 32;

/// The IPAddress resource.
pub(super) fn ip_addresses() -> Result<&'static ResourceSpec, ApiError> {
    catalog::find("networking.k8s.io", "v1", "ipaddresses").ok_or_else(|| ApiError::internal("ipaddresses missing from the catalog"))
}

/// The IPAddress that records `ip` as held by the Service `namespace/name`.
pub(super) fn ip_address_object(ip: IpAddr, namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {
            "name": ip.to_string(),
            "labels": {"ipaddress.kubernetes.io/ip-family": Family::of(ip).as_str(), MANAGED_BY: ALLOCATOR},
        },
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": namespace, "name": name}},
    })
}

/// Whether an IPAddress names the Service `namespace/name` as its holder.
pub(super) fn held_by(addr: &Value, namespace: &str, name: &str) -> bool {
    let parent = |f: &str| addr.pointer(&format!("/spec/parentRef/{f}")).and_then(Value::as_str).unwrap_or("");
    parent("resource") == "services" && parent("group").is_empty() && parent("namespace") == namespace && parent("name") == name
}

/// Takes and gives back cluster IPs.
#[derive(Clone)]
pub(super) struct IpAllocator {
    /// A store without allocation effects of its own (IPAddresses allocate nothing).
    pub(super) rest: RestStore,
}

impl IpAllocator {
    /// Takes `ip` for the Service; Ok(false) when another holds it.
    async fn claim(&self, ip: IpAddr, namespace: &str, name: &str, dry_run: bool) -> Result<bool, ApiError> {
        let spec = ip_addresses()?;
        if dry_run {
            return Ok(self.rest.caches().cache(&spec.key_prefix()).is_none_or(|c| c.get(&object_key(spec, None, &ip.to_string())).is_none()));
        }
        match self.rest.create(&CatalogStrategy(spec), None, ip_address_object(ip, namespace, name), false, WriteHooks::default()).await {
            Ok(_) => Ok(true),
            Err(e) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Takes the address a user asked for, which must lie in one of `ranges` (those of the
    /// Ready ServiceCIDRs of its family), as kube's `MetaAllocator` finds no allocator for it
    /// otherwise.
    pub(super) async fn allocate(&self, ranges: &[Cidr], ip: IpAddr, namespace: &str, name: &str, dry_run: bool) -> Result<(), AllocError> {
        if !ranges.iter().any(|r| r.index_of(ip).is_some()) {
            return Err(AllocError::MismatchedNetwork);
        }
        match self.claim(ip, namespace, name, dry_run).await? {
            true => Ok(()),
            false => Err(AllocError::Allocated),
        }
    }

    /// Takes any free address of `ranges`, trying each range's dynamic band (above kube's
    /// static band) before its static band.
    pub(super) async fn allocate_next(&self, ranges: &[Cidr], namespace: &str, name: &str, dry_run: bool) -> Result<IpAddr, AllocError> {
        for range in ranges {
            let (size, band) = (range.size(), range.static_band());
            let picks: Vec<u128> = {
                let mut rng = rand::thread_rng();
                (0..RANDOM_TRIES).map(|_| if band < size { rng.gen_range(band..size) } else { rng.gen_range(0..size) }).collect()
            };
            let mut tried = HashSet::new();
            for index in picks {
                if tried.insert(index) && self.claim(range.nth(index), namespace, name, dry_run).await? {
                    return Ok(range.nth(index));
                }
            }
            // Crowded: scan what the cache says is free, from a random start, dynamic band first.
            let used = self.used(range)?;
            if (used.len() as u128) >= size {
                continue;
            }
            let start = rand::thread_rng().gen_range(0..size);
            let dynamic = (0..size - band).map(|i| band + (start + i) % (size - band).max(1));
            let stat = 0..band;
            for index in dynamic.chain(stat) {
                let ip = range.nth(index);
                if !used.contains(&ip) && self.claim(ip, namespace, name, dry_run).await? {
                    return Ok(ip);
                }
            }
        }
        Err(AllocError::Full)
    }

    /// The addresses of `range` that IPAddress objects hold, as the watch cache has them.
    fn used(&self, range: &Cidr) -> Result<HashSet<IpAddr>, ApiError> {
        let spec = ip_addresses()?;
        let Some(cache) = self.rest.caches().cache(&spec.key_prefix()) else { return Ok(HashSet::new()) };
        Ok(cache
            .list(&spec.key_prefix())
            .0
            .iter()
            .filter_map(|o| o.object.pointer("/metadata/name").and_then(Value::as_str)?.parse::<IpAddr>().ok())
            .filter(|ip| range.index_of(*ip).is_some())
            .collect())
    }

    /// Gives `ip` back if the Service `namespace/name` holds it; a missing or foreign
    /// IPAddress is left as it is (the repair pass reports those).
    pub(super) async fn release(&self, ip: IpAddr, namespace: &str, name: &str) -> Result<(), ApiError> {
        let spec = ip_addresses()?;
        let strategy = CatalogStrategy(spec);
        let addr = match self.rest.get(&strategy, None, &ip.to_string()).await {
            Ok(addr) => addr,
            Err(e) if e.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        };
        if !held_by(&addr, namespace, name) {
            return Ok(());
        }
        let uid = addr.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned);
        let opts = DeleteOptions { precondition_uid: uid, ..DeleteOptions::default() };
        match self.rest.delete(&strategy, None, &ip.to_string(), &opts).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 || e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }
}
