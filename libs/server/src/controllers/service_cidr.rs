//! kube-controller-manager's servicecidrs controller (`service-cidr-controller`): every
//! ServiceCIDR carries the `networking.k8s.io/service-cidr-finalizer` finalizer and a `Ready`
//! condition. A ServiceCIDR being deleted keeps its finalizer (Ready False, reason
//! `Terminating`) while an IPAddress of the apiserver's allocator lies in it and in no other
//! ServiceCIDR (no other ServiceCIDR contains its ranges); once none remains, and the deletion
//! is old enough for every allocator to have stopped using it, the finalizer goes and the
//! store removes the object.
//!
//! An IPAddress belongs to a ServiceCIDR only by containment (its `parentRef` names the
//! Service): IPAddress events queue the ServiceCIDRs containing the address, ServiceCIDR events
//! the object itself and, when it is new, the ServiceCIDRs it overlaps.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use kapi_apimachinery::{time as ktime, ApiError};
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{object_key, RestStore, WriteHooks};
use kapi_registry::service_alloc::cidrs::{cached_service_cidrs, service_cidrs_spec, ServiceCidr};
use kapi_registry::service_alloc::Family;
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use kapi_watch::EventType;
use serde_json::{json, Value};

use super::{follow, Queue};

/// The controller's name, as kube-controller-manager names it (and its field manager).
pub const NAME: &str = "service-cidr-controller";
/// kube's `ServiceCIDRProtectionFinalizer`.
pub const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";
/// kube's `deletionGracePeriod`: how long after its deletion a ServiceCIDR keeps its
/// finalizer, so that every apiserver has stopped allocating from it.
pub const DELETION_GRACE: Duration = Duration::from_secs(10);
/// kube's message while IPAddresses hold a ServiceCIDR being deleted.
pub const TERMINATING_MESSAGE: &str = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR";
/// kube's message of a Ready ServiceCIDR.
pub const READY_MESSAGE: &str = "Kubernetes Service CIDR is ready";

const MANAGED_BY: &str = "ipaddress.kubernetes.io/managed-by";
const IP_FAMILY: &str = "ipaddress.kubernetes.io/ip-family";
/// The apiserver's allocator, the only IPAddresses this controller counts.
const ALLOCATOR: &str = "ipallocator.k8s.io";

struct Controller {
    rest: RestStore,
    queue: Arc<Queue>,
    cidrs: &'static ResourceSpec,
    addresses: &'static ResourceSpec,
}

/// Starts the controller.
pub fn start(ctx: &super::ControllerContext) {
    let (Some(cidrs), Some(addresses)) = (service_cidrs_spec(), catalog::find("networking.k8s.io", "v1", "ipaddresses")) else {
        tracing::error!("servicecidrs or ipaddresses are not served; no {NAME}");
        return;
    };
    let queue = ctx.queue();
    let (on_cidr, rest) = (queue.clone(), ctx.rest.clone());
    tokio::spawn(follow(ctx.caches.clone(), cidrs, move |ty, obj| {
        let cidr = ServiceCidr::from_object(obj);
        if ty == EventType::Added {
            for other in cached_service_cidrs(&rest) {
                if other.cidrs.iter().any(|o| cidr.cidrs.iter().any(|c| c.overlaps(o))) {
                    on_cidr.add(other.name);
                }
            }
        }
        on_cidr.add(cidr.name);
    }));
    let (on_address, rest) = (queue.clone(), ctx.rest.clone());
    tokio::spawn(follow(ctx.caches.clone(), addresses, move |ty, obj| {
        if ty == EventType::Modified {
            return;
        }
        let Some(ip) = managed_address(obj) else { return };
        for cidr in cached_service_cidrs(&rest).into_iter().filter(|c| c.contains_ip(ip)) {
            on_address.add(cidr.name);
        }
    }));
    let controller = Controller { rest: ctx.rest.clone(), queue: queue.clone(), cidrs, addresses };
    tokio::spawn(async move {
        loop {
            let name = queue.next().await;
            if let Err(e) = controller.sync(&name).await {
                tracing::warn!(servicecidr = %name, "{NAME}: {e}; retrying");
                queue.retry(name);
            }
        }
    });
}

/// The address of an IPAddress the apiserver's allocator manages.
fn managed_address(obj: &Value) -> Option<IpAddr> {
    let labels = obj.pointer("/metadata/labels")?;
    if labels.get(MANAGED_BY).and_then(Value::as_str) != Some(ALLOCATOR) {
        return None;
    }
    obj.pointer("/metadata/name")?.as_str()?.parse().ok()
}

/// kube's `canDeleteCIDR` over the cached ServiceCIDRs (`all`, `cidr` among them) and the
/// allocator's IPAddresses (`addresses`: address and family label).
fn can_delete(cidr: &ServiceCidr, all: &[ServiceCidr], addresses: &[(IpAddr, String)]) -> bool {
    // Every range held by another ServiceCIDR as well (the same or a larger one): its
    // addresses stay covered.
    let has_parent = cidr.cidrs.iter().all(|c| all.iter().any(|o| o.name != cidr.name && o.cidrs.iter().any(|p| p.contains_cidr(c))));
    if has_parent {
        return true;
    }
    for family in cidr.cidrs.iter().map(|c| c.family()) {
        for (ip, _) in addresses.iter().filter(|(_, f)| Family::parse(f) == Some(family)) {
            let mut holders = all.iter().filter(|o| o.contains_ip(*ip));
            if matches!((holders.next(), holders.next()), (Some(only), None) if only.name == cidr.name) {
                return false;
            }
        }
    }
    true
}

/// Whether the `Ready` condition already says this.
fn has_condition(obj: &Value, status: &str, reason: &str, message: &str) -> bool {
    obj.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|conds| {
        conds.iter().any(|c| {
            let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
            field("type") == "Ready" && field("status") == status && field("reason") == reason && field("message") == message
        })
    })
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

impl Controller {
    fn cached(&self, name: &str) -> Option<Arc<Value>> {
        self.rest.caches().cache(&self.cidrs.key_prefix())?.get(&object_key(self.cidrs, None, name)).map(|o| o.object)
    }

    /// The allocator's IPAddresses as the watch cache has them.
    fn managed_addresses(&self) -> Vec<(IpAddr, String)> {
        let prefix = self.addresses.key_prefix();
        let Some(cache) = self.rest.caches().cache(&prefix) else { return Vec::new() };
        cache
            .list(&prefix)
            .0
            .iter()
            .filter_map(|o| {
                let ip = managed_address(&o.object)?;
                let family = o.object.pointer("/metadata/labels").and_then(|l| l.get(IP_FAMILY)).and_then(Value::as_str).unwrap_or_default();
                Some((ip, family.to_owned()))
            })
            .collect()
    }

    async fn sync(&self, name: &str) -> Result<(), ApiError> {
        let Some(obj) = self.cached(name) else { return Ok(()) };
        let cidr = ServiceCidr::from_object(&obj);
        if let Some(deleted) = obj.pointer("/metadata/deletionTimestamp").and_then(Value::as_str) {
            if !can_delete(&cidr, &cached_service_cidrs(&self.rest), &self.managed_addresses()) {
                return self.set_ready(&obj, "False", "Terminating", TERMINATING_MESSAGE).await;
            }
            let since = ktime::parse_rfc3339(deleted).map(|t| (time::OffsetDateTime::now_utc() - t).whole_milliseconds()).unwrap_or(i128::MAX);
            let left = DELETION_GRACE.as_millis() as i128 - since;
            if left > 0 {
                let (queue, name) = (self.queue.clone(), name.to_owned());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(left as u64)).await;
                    queue.add(name);
                });
                return Ok(());
            }
            return self.set_finalizer(&obj, false).await;
        }
        self.set_finalizer(&obj, true).await?;
        self.set_ready(&obj, "True", "", READY_MESSAGE).await
    }

    /// Adds (`present`) or removes the finalizer, unless it already is as wanted.
    async fn set_finalizer(&self, cached: &Value, present: bool) -> Result<(), ApiError> {
        if finalizers(cached).iter().any(|f| f == FINALIZER) == present {
            return Ok(());
        }
        let name = cached.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let track = crate::field_manager::tracker(self.cidrs, crate::field_manager::writer(self.cidrs, NAME.into(), ""));
        let hooks = WriteHooks::tracking(track.as_deref());
        let result = self
            .rest
            .update_from_cached(&CatalogStrategy(self.cidrs), None, name, WriteTarget::Main, hooks, cached, |stored| {
                let mut obj = stored.clone();
                let mut list = finalizers(stored);
                list.retain(|f| f != FINALIZER);
                if present {
                    list.push(FINALIZER.to_owned());
                }
                obj["metadata"]["finalizers"] = json!(list);
                Ok(obj)
            })
            .await;
        super::gone_is_done(result)
    }

    /// Sets the `Ready` condition, unless it already says this.
    async fn set_ready(&self, cached: &Value, status: &str, reason: &str, message: &str) -> Result<(), ApiError> {
        if has_condition(cached, status, reason, message) {
            return Ok(());
        }
        let name = cached.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let track = crate::field_manager::tracker(self.cidrs, crate::field_manager::writer(self.cidrs, NAME.into(), "status"));
        let hooks = WriteHooks::tracking(track.as_deref());
        let result = self
            .rest
            .update_from_cached(&CatalogStrategy(self.cidrs), None, name, WriteTarget::Status, hooks, cached, |stored| {
                let mut obj = stored.clone();
                set_ready_condition(&mut obj, status, reason, message);
                Ok(obj)
            })
            .await;
        super::gone_is_done(result)
    }
}

/// Writes the `Ready` condition into `obj`, its transition time moving when its status does.
pub(crate) fn set_ready_condition(obj: &mut Value, status: &str, reason: &str, message: &str) {
    let now = ktime::now_rfc3339();
    let mut conditions = obj.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut condition = json!({"type": "Ready", "status": status, "lastTransitionTime": now, "reason": reason, "message": message});
    match conditions.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready")) {
        Some(c) => {
            if c.get("status").and_then(Value::as_str) == Some(status) {
                if let Some(t) = c.get("lastTransitionTime") {
                    condition["lastTransitionTime"] = t.clone();
                }
            }
            *c = condition;
        }
        None => conditions.push(condition),
    }
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    obj["status"]["conditions"] = json!(conditions);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sc(name: &str, cidrs: &[&str]) -> ServiceCidr {
        ServiceCidr::from_object(&json!({"metadata": {"name": name}, "spec": {"cidrs": cidrs}}))
    }

    #[test]
    fn deletion_waits_for_uncovered_addresses() {
        let default = sc("kubernetes", &["10.0.0.0/29"]);
        let extra = sc("extra", &["10.1.0.0/24"]);
        let all = vec![default.clone(), extra.clone()];
        let held = vec![("10.1.0.7".parse().unwrap(), "IPv4".to_owned())];
        assert!(!can_delete(&extra, &all, &held));
        assert!(can_delete(&extra, &all, &[("10.0.0.3".parse().unwrap(), "IPv4".to_owned())]));
        assert!(can_delete(&extra, &all, &[]));
        // A larger ServiceCIDR holding the range covers its addresses.
        let parent = sc("parent", &["10.1.0.0/16"]);
        assert!(can_delete(&extra, &[default.clone(), extra.clone(), parent.clone()], &held));
        // Another ServiceCIDR holding only the address, not the whole range, covers it too.
        let overlapping = sc("overlapping", &["10.1.0.0/28"]);
        assert!(can_delete(&extra, &[default, extra.clone(), overlapping], &held));
        // The parent itself is not covered by the smaller one.
        assert!(!can_delete(&parent, &[extra, parent.clone()], &[("10.1.5.1".parse().unwrap(), "IPv4".to_owned())]));
    }

    #[test]
    fn ready_condition_keeps_its_transition_time() {
        let mut obj = json!({"metadata": {"name": "x"}});
        set_ready_condition(&mut obj, "True", "", READY_MESSAGE);
        assert!(has_condition(&obj, "True", "", READY_MESSAGE));
        obj["status"]["conditions"][0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
        set_ready_condition(&mut obj, "True", "", "other");
        assert_eq!(obj["status"]["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        set_ready_condition(&mut obj, "False", "Terminating", TERMINATING_MESSAGE);
        assert_ne!(obj["status"]["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert!(has_condition(&obj, "False", "Terminating", TERMINATING_MESSAGE));
        assert_eq!(obj["status"]["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn only_the_allocators_addresses_count() {
        let managed = json!({"metadata": {"name": "10.1.0.7", "labels": {MANAGED_BY: ALLOCATOR}}});
        assert_eq!(managed_address(&managed), Some("10.1.0.7".parse().unwrap()));
        let other = json!({"metadata": {"name": "10.1.0.8", "labels": {MANAGED_BY: "someone-else"}}});
        assert_eq!(managed_address(&other), None);
    }
}
