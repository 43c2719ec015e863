//! Where a `service` clientConfig is served. kube-apiserver dials the Service's ClusterIP, or an
//! endpoint with `--enable-aggregator-routing`; kapi has no service network, so it always does
//! the latter, with kube's endpoint resolver's choices and texts (k8s.io/apiserver
//! `pkg/util/proxy.ResolveEndpoint`), reading the Service and its EndpointSlices from the watch
//! caches so that a call costs no storage read.

use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::RestStore;
use serde_json::Value;

/// Where a Service's port is served: kube resolves `service` clientConfigs; kapi has no cluster DNS.
pub trait ServiceResolver: Send + Sync {
    /// (address, port) of the first ready endpoint of the Service port `port`.
    fn resolve(&self, namespace: &str, name: &str, port: u16) -> Result<(String, u16), String>;
}

/// The EndpointSlice resolver over a RestStore's watch caches (the code now in conversion.rs).
pub struct EndpointSliceResolver {
    rest: RestStore,
}

impl EndpointSliceResolver {
    /// Resolves through `rest`'s caches of Services and EndpointSlices.
    pub fn new(rest: RestStore) -> Self {
        EndpointSliceResolver { rest }
    }
}

/// The storage key prefix of a built-in resource.
fn prefix(group: &str, resource: &str) -> Result<String, String> {
    let spec: &ResourceSpec = catalog::find(group, "v1", resource).ok_or_else(|| format!("{resource} are not served"))?;
    Ok(spec.key_prefix())
}

impl ServiceResolver for EndpointSliceResolver {
    fn resolve(&self, namespace: &str, name: &str, port: u16) -> Result<(String, u16), String> {
        let caches = self.rest.caches();
        let services = prefix("", "services")?;
        let service = caches
            .cache(&services)
            .ok_or("services are not cached")?
            .get(&format!("{services}{namespace}/{name}"))
            .ok_or_else(|| format!("service {name:?} not found"))?;
        let slices = prefix("discovery.k8s.io", "endpointslices")?;
        let slices = caches.cache(&slices).ok_or("endpointslices are not cached")?.list(&format!("{slices}{namespace}/")).0;
        choose(&service.object, slices.iter().map(|s| s.object.as_ref()), port)
    }
}

/// kube's choice of an endpoint for `port` of `service` among its namespace's `slices`, in
/// order except that slices of the Service's primary IP family come first (kube also shuffles,
/// to spread calls; here the first ready endpoint always wins, which keeps connections reused).
fn choose<'a>(service: &Value, slices: impl Iterator<Item = &'a Value>, port: u16) -> Result<(String, u16), String> {
    let name = service.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    match service.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP") {
        "ClusterIP" | "LoadBalancer" | "NodePort" => {}
        other => return Err(format!("unsupported service type {other:?}")),
    }
    let ports = service.pointer("/spec/ports").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let service_port = ports
        .iter()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        .ok_or_else(|| format!("no service port {port} found for service {name:?}"))?;
    let port_name = service_port.get("name").and_then(Value::as_str).unwrap_or_default();
    let family = service.pointer("/spec/ipFamilies/0").and_then(Value::as_str).unwrap_or_default();
    let mut slices: Vec<&Value> = slices
        .filter(|s| s.pointer("/metadata/labels/kubernetes.io~1service-name").and_then(Value::as_str) == Some(name))
        .collect();
    slices.sort_by_key(|s| s.get("addressType").and_then(Value::as_str) != Some(family));
    for slice in slices {
        let endpoints = slice.get("endpoints").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let slice_ports = slice.get("ports").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for slice_port in slice_ports.iter().filter(|p| p.get("name").and_then(Value::as_str).unwrap_or_default() == port_name) {
            let Some(target) = slice_port.get("port").and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok()) else { continue };
            let ready = endpoints
                .iter()
                .filter(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false))
                .find_map(|e| e.pointer("/addresses/0").and_then(Value::as_str));
            if let Some(address) = ready {
                return Ok((address.to_owned(), target));
            }
        }
    }
    Err(format!("no endpoints available for service {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(ports: Value) -> Value {
        json!({"metadata": {"name": "hook", "namespace": "ns"}, "spec": {"ports": ports, "ipFamilies": ["IPv6"]}})
    }

    fn slice(service: &str, family: &str, ports: Value, endpoints: Value) -> Value {
        json!({"metadata": {"labels": {"kubernetes.io/service-name": service}}, "addressType": family, "ports": ports, "endpoints": endpoints})
    }

    #[test]
    fn the_first_ready_endpoint_of_the_named_port_wins_preferred_family_first() {
        let svc = service(json!([{"name": "metrics", "port": 9090}, {"name": "https", "port": 443}]));
        let slices = [
            slice("other", "IPv4", json!([{"name": "https", "port": 1}]), json!([{"addresses": ["10.0.0.9"]}])),
            slice("hook", "IPv4", json!([{"name": "metrics", "port": 9091}, {"name": "https", "port": 8443}]),
                  json!([{"addresses": ["10.0.0.1"], "conditions": {"ready": false}}, {"addresses": ["10.0.0.2"]}])),
            slice("hook", "IPv6", json!([{"name": "https", "port": 8444}]), json!([{"addresses": ["fd00::1"], "conditions": {"ready": true}}])),
        ];
        assert_eq!(choose(&svc, slices.iter(), 443), Ok(("fd00::1".into(), 8444)));
        assert_eq!(choose(&svc, slices[..2].iter(), 443), Ok(("10.0.0.2".into(), 8443)));
        assert_eq!(choose(&svc, slices.iter(), 9090), Ok(("10.0.0.2".into(), 9091)));
    }

    #[test]
    fn failures_are_worded_as_kube_words_them() {
        let svc = service(json!([{"port": 443}]));
        assert_eq!(choose(&svc, [].iter(), 444), Err(r#"no service port 444 found for service "hook""#.into()));
        let not_ready = [slice("hook", "IPv6", json!([{"name": "", "port": 8443}]), json!([{"addresses": ["fd00::1"], "conditions": {"ready": false}}]))];
        assert_eq!(choose(&svc, not_ready.iter(), 443), Err(r#"no endpoints available for service "hook""#.into()));
        let unnamed = [slice("hook", "IPv6", json!([{"port": 8443}]), json!([{"addresses": ["fd00::1"]}]))];
        assert_eq!(choose(&svc, unnamed.iter(), 443), Ok(("fd00::1".into(), 8443)));
        let external = json!({"metadata": {"name": "hook"}, "spec": {"type": "ExternalName", "externalName": "x.example"}});
        assert_eq!(choose(&external, [].iter(), 443), Err(r#"unsupported service type "ExternalName""#.into()));
    }
}
