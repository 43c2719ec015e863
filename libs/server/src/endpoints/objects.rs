//! The `default/kubernetes` Endpoints and EndpointSlices for a set of replica addresses, and
//! writing them so that replicas reconciling at once converge (a lost race re-reads and tries
//! again).
//!
//! Replicas may listen on different ports (several on one host). An Endpoints object groups
//! addresses by port set, one subset each (kube's repacking). An EndpointSlice has a single
//! port list, so there is one slice per port: the first (lowest port) is `kubernetes`, the
//! name kube gives its only slice, the others `kubernetes-<port>`; all carry
//! `kubernetes.io/service-name: kubernetes`. With one port everywhere (the production shape)
//! this is exactly kube's single `kubernetes` slice.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::ApiError;
use kapi_registry::rest::{DeleteOptions, ListParams, RestStore};
use kapi_registry::strategy::WriteTarget;
use serde_json::{json, Value};

use super::Resource;

/// The Service whose endpoints these are.
pub const SERVICE: &str = "kubernetes";
/// Its namespace.
pub const NAMESPACE: &str = "default";
/// EndpointSlice label naming the Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// kube marks the `kubernetes` Endpoints so the mirroring controller leaves them alone.
const SKIP_MIRROR_LABEL: &str = "endpointslice.kubernetes.io/skip-mirror";
/// How often one write is retried after losing a race to another replica.
const ATTEMPTS: usize = 5;

/// Addresses grouped by port, both sorted, so every replica computes the same objects.
pub fn by_port(addresses: &[SocketAddr]) -> BTreeMap<u16, Vec<IpAddr>> {
    let mut groups: BTreeMap<u16, Vec<IpAddr>> = BTreeMap::new();
    for a in addresses {
        let ips = groups.entry(a.port()).or_default();
        if !ips.contains(&a.ip()) {
            ips.push(a.ip());
        }
    }
    for ips in groups.values_mut() {
        ips.sort();
    }
    groups
}

fn port(port: u16) -> Value {
    json!({"name": "https", "port": port, "protocol": "TCP"})
}

/// The desired `subsets`.
pub fn subsets(groups: &BTreeMap<u16, Vec<IpAddr>>) -> Value {
    Value::Array(
        groups
            .iter()
            .map(|(p, ips)| json!({"addresses": ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect::<Vec<_>>(), "ports": [port(*p)]}))
            .collect(),
    )
}

/// The desired slices by name; `kubernetes` always exists (empty when no replica is ready).
pub fn slices(groups: &BTreeMap<u16, Vec<IpAddr>>) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (i, (p, ips)) in groups.iter().enumerate() {
        let name = if i == 0 { SERVICE.to_owned() } else { format!("{SERVICE}-{p}") };
        let address_type = if ips.iter().all(IpAddr::is_ipv6) { "IPv6" } else { "IPv4" };
        let endpoints: Vec<Value> = ips.iter().map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}})).collect();
        out.insert(name.clone(), slice(&name, address_type, Value::Array(endpoints), json!([port(*p)])));
    }
    out.entry(SERVICE.to_owned()).or_insert_with(|| slice(SERVICE, "IPv4", json!([]), json!([])));
    out
}

fn slice(name: &str, address_type: &str, endpoints: Value, ports: Value) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {SERVICE_NAME_LABEL: SERVICE}},
        "addressType": address_type,
        "endpoints": endpoints,
        "ports": ports,
    })
}

fn array<'a>(obj: &'a Value, field: &str) -> &'a [Value] {
    obj.get(field).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str)
}

/// Brings one object to `desired`'s fields (`fields`, plus the given label), creating it when
/// missing. `same` decides whether the stored one already matches.
async fn converge(rest: &RestStore, res: &Resource, desired: &Value, fields: &[&str], label_key: &str) -> Result<(), ApiError> {
    let name = desired.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let label_value = label(desired, label_key).unwrap_or_default().to_owned();
    let same = |stored: &Value| label(stored, label_key) == Some(label_value.as_str()) && fields.iter().all(|f| array(stored, f) == array(desired, f) && stored.get(f).filter(|v| !v.is_array()) == desired.get(f).filter(|v| !v.is_array()));
    for _ in 0..ATTEMPTS {
        let current = match rest.get(&res.strategy(), Some(NAMESPACE), &name).await {
            Ok(current) => current,
            Err(e) if e.code == 404 => match rest.create(&res.strategy(), Some(NAMESPACE), desired.clone(), false, res.hooks()).await {
                Ok(_) => return Ok(()),
                // Another replica created it first: converge theirs.
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        };
        if same(&current) {
            return Ok(());
        }
        let written = rest
            .update_with(&res.strategy(), Some(NAMESPACE), &name, WriteTarget::Main, false, res.hooks(), |stored| {
                let mut next = stored.clone();
                // Not pinned to the revision read: a concurrent write makes the store retry on
                // the fresh object, and the result is the same desired state.
                if let Some(m) = next["metadata"].as_object_mut() {
                    m.remove("resourceVersion");
                }
                if !next["metadata"].get("labels").is_some_and(Value::is_object) {
                    next["metadata"]["labels"] = json!({});
                }
                next["metadata"]["labels"][label_key] = json!(label_value);
                for f in fields {
                    match desired.get(*f) {
                        Some(v) => next[*f] = v.clone(),
                        None => {
                            if let Some(o) = next.as_object_mut() {
                                o.remove(*f);
                            }
                        }
                    }
                }
                Ok(next)
            })
            .await;
        match written {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 404 || e.code == 409 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::conflict(&kapi_apimachinery::GroupResource::new(res.spec.group, res.spec.resource), &name, "kept changing while it was reconciled"))
}

/// Writes the Endpoints and EndpointSlices for `addresses`.
pub async fn reconcile(rest: &RestStore, addresses: &[SocketAddr]) -> Result<(), ApiError> {
    let groups = by_port(addresses);
    let endpoints = json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {SKIP_MIRROR_LABEL: "true"}},
        "subsets": subsets(&groups),
    });
    converge(rest, &Resource::new("", "endpoints")?, &endpoints, &["subsets"], SKIP_MIRROR_LABEL).await?;

    let res = Resource::new("discovery.k8s.io", "endpointslices")?;
    let desired = slices(&groups);
    for slice in desired.values() {
        let current_type = match rest.get(&res.strategy(), Some(NAMESPACE), slice["metadata"]["name"].as_str().unwrap_or_default()).await {
            Ok(current) => current.get("addressType").cloned(),
            Err(_) => None,
        };
        if current_type.is_some_and(|t| t != slice["addressType"]) {
            // addressType is immutable: kube deletes and recreates the slice.
            delete(rest, &res, slice["metadata"]["name"].as_str().unwrap_or_default()).await?;
        }
        converge(rest, &res, slice, &["addressType", "endpoints", "ports"], SERVICE_NAME_LABEL).await?;
    }
    // Slices of port sets no replica uses any more.
    let selector = LabelSelector::parse(&format!("{SERVICE_NAME_LABEL}={SERVICE}"))?;
    let page = rest.list(&res.strategy(), Some(NAMESPACE), &ListParams { labels: Some(selector), ..ListParams::default() }).await?;
    for stale in &page.items {
        let name = stale.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if !desired.contains_key(name) {
            delete(rest, &res, name).await?;
        }
    }
    Ok(())
}

async fn delete(rest: &RestStore, res: &Resource, name: &str) -> Result<(), ApiError> {
    match rest.delete(&res.strategy(), Some(NAMESPACE), name, &DeleteOptions::default()).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn one_port_is_kubes_single_subset_and_slice() {
        let groups = by_port(&addrs(&["10.0.0.2:6443", "10.0.0.1:6443"]));
        assert_eq!(
            subsets(&groups),
            json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}])
        );
        let slices = slices(&groups);
        assert_eq!(slices.keys().collect::<Vec<_>>(), ["kubernetes"]);
        assert_eq!(slices["kubernetes"]["endpoints"][1], json!({"addresses": ["10.0.0.2"], "conditions": {"ready": true}}));
        assert_eq!(slices["kubernetes"]["metadata"]["labels"]["kubernetes.io/service-name"], "kubernetes");
    }

    #[test]
    fn replicas_on_one_host_get_a_subset_and_a_slice_per_port() {
        let groups = by_port(&addrs(&["127.0.0.1:7002", "127.0.0.1:7001"]));
        let subsets = subsets(&groups);
        assert_eq!(subsets.as_array().unwrap().len(), 2);
        assert_eq!(subsets[0]["ports"][0]["port"], 7001);
        let named = slices(&groups);
        assert_eq!(named.keys().collect::<Vec<_>>(), ["kubernetes", "kubernetes-7002"]);
        assert!(slices(&by_port(&[]))["kubernetes"]["endpoints"].as_array().unwrap().is_empty(), "the kubernetes slice stays, empty");
    }
}
