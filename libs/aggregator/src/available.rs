//! The `Available` condition of APIServices, as kube-aggregator's availability controllers set
//! it: local APIServices are always available; a remote one needs its Service (with the
//! port), EndpointSlices with a ready endpoint on that port, and an answer from its discovery
//! document, each failure with kube's reason and message. The discovery answer also feeds the
//! merged aggregated discovery.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use kapi_apimachinery::{time as ktime, ApiError};
use kapi_auth::UserInfo;
use kapi_registry::catalog;
use kapi_registry::rest::WriteHooks;
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use kapi_server::field_manager;
use serde_json::{json, Value};

use crate::apiservice::{ApiService, ServiceRef};
use crate::controllers::MANAGER;
use crate::discovery::resources_from_list;
use crate::tier::Shared;

/// kube's bound on one discovery probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a discovery document read.
const MAX_DISCOVERY_BYTES: usize = 16 << 20;

/// One check's verdict: (status, reason, message).
type Verdict = (&'static str, &'static str, String);

/// Checks one APIService and writes its condition when it changed.
pub(crate) async fn check(shared: &Shared, name: &str) -> Result<(), ApiError> {
    let state = shared.state();
    let Some((service, cached)) = state.services.get(name) else {
        kapi_server::metrics::global::forget_apiservice(name);
        return Ok(());
    };
    let verdict = match &service.service {
        None => ("True", "Local", "Local APIServices are always available".to_owned()),
        Some(target) => remote(shared, service, target).await,
    };
    let available = verdict.0 == "True";
    let became_unavailable = (service.available && !available).then_some(verdict.1);
    write_condition(shared, name, cached, &verdict).await?;
    kapi_server::metrics::global::apiservice_availability(name, available, became_unavailable);
    Ok(())
}

async fn remote(shared: &Shared, service: &ApiService, target: &ServiceRef) -> Verdict {
    let (ns, name) = (&target.namespace, &target.name);
    let caches = shared.rest.caches();
    let lookup = |group: &str, resource: &str| catalog::find(group, "v1", resource).and_then(|spec| caches.cache(&spec.key_prefix()).map(|c| (spec, c)));
    let Some((spec, services)) = lookup("", "services") else {
        return ("Unknown", "ServiceAccessError", format!("service/{name} in {ns:?} cannot be checked due to: services are not cached"));
    };
    let Some(svc) = services.get(&format!("{}{ns}/{name}", spec.key_prefix())) else {
        return ("False", "ServiceNotFound", format!("service/{name} in {ns:?} is not present"));
    };
    let svc_type = svc.object.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP");
    if svc_type == "ClusterIP" {
        let ports = svc.object.pointer("/spec/ports").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let Some(port) = ports.iter().find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(target.port))) else {
            return ("False", "ServicePortError", format!("service/{name} in {ns:?} is not listening on port {}", target.port));
        };
        let port_name = port.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some((spec, slices)) = lookup("discovery.k8s.io", "endpointslices") else {
            return ("Unknown", "EndpointsAccessError", format!("service/{name} in {ns:?} cannot be checked due to: endpointslices are not cached"));
        };
        let slices: Vec<Value> = slices
            .list(&format!("{}{ns}/", spec.key_prefix()))
            .0
            .into_iter()
            .map(|s| (*s.object).clone())
            .filter(|s| s.pointer("/metadata/labels/kubernetes.io~1service-name").and_then(Value::as_str) == Some(name))
            .collect();
        if slices.is_empty() {
            return ("False", "EndpointsNotFound", format!("cannot find endpointslices for service/{name} in {ns:?}"));
        }
        if !slices.iter().any(|s| has_available_endpoint(s, port_name)) {
            return ("False", "MissingEndpoints", format!("endpointslices for service/{name} in {ns:?} have no addresses with port name {port_name:?}"));
        }
    }
    match probe(shared, service, target).await {
        Ok(resources) => {
            shared.discovered(&service.group, &service.version, Some(resources));
            ("True", "Passed", "all checks passed".to_owned())
        }
        Err(message) => {
            shared.discovered(&service.group, &service.version, None);
            ("False", "FailedDiscoveryCheck", message)
        }
    }
}

/// kube's `hasAvailableEndpoint`: a ready (or unknown) endpoint and a port of that name.
fn has_available_endpoint(slice: &Value, port_name: &str) -> bool {
    let endpoints = slice.get("endpoints").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let ports = slice.get("ports").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    endpoints.iter().any(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false))
        && ports.iter().any(|p| p.get("name").and_then(Value::as_str).unwrap_or_default() == port_name && p.get("port").is_some_and(|p| !p.is_null()))
}

/// GETs the group version's discovery document as `system:kube-aggregator` in
/// `system:masters` (kube's probe identity), within kube's 5 s; the error is kube's message.
async fn probe(shared: &Shared, service: &ApiService, target: &ServiceRef) -> Result<Vec<Value>, String> {
    let (host, port) = shared.resolver.resolve(&target.namespace, &target.name, target.port)?;
    let authority = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let path = if service.name == "v1." { format!("/api/{}", service.version) } else { format!("/apis/{}/{}", service.group, service.version) };
    let url = format!("https://{authority}{path}");
    let transport = shared.transport(service)?;
    let mut request = http::Request::get(&url);
    if let Some(headers) = request.headers_mut() {
        crate::proxy::set_identity(headers, &UserInfo::new("system:kube-aggregator", ["system:masters"]));
        headers.insert(http::header::ACCEPT, http::HeaderValue::from_static("application/json"));
    }
    let request = request.body(Full::new(Bytes::new())).map_err(|e| e.to_string())?;
    let exchange = async {
        let answer = transport.send(request).await.map_err(|e| format!("failing or missing response from {url}: Get {url:?}: {e}"))?;
        let status = answer.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(format!("bad status from {url}: {status}"));
        }
        let body = Limited::new(answer.into_body(), MAX_DISCOVERY_BYTES)
            .collect()
            .await
            .map_err(|e| format!("failing or missing response from {url}: {e}"))?
            .to_bytes();
        let list: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(resources_from_list(&service.group, &service.version, &list))
    };
    match tokio::time::timeout(PROBE_TIMEOUT, exchange).await {
        Ok(result) => result,
        Err(_) => Err(format!("timed out waiting for {url}")),
    }
}

/// Writes the condition unless the stored one says the same (kube updates status only on a
/// change; the transition time moves only when the status does).
async fn write_condition(shared: &Shared, name: &str, cached: &Value, verdict: &Verdict) -> Result<(), ApiError> {
    let (status, reason, message) = verdict;
    let same = current(cached).is_some_and(|c| {
        let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
        field("status") == *status && field("reason") == *reason && field("message") == message
    });
    if same {
        return Ok(());
    }
    let track = field_manager::tracker(shared.spec, field_manager::writer(shared.spec, MANAGER.into(), "status"));
    let result = shared
        .rest
        .update_from_cached(&CatalogStrategy(shared.spec), None, name, WriteTarget::Status, WriteHooks::tracking(track.as_deref()), cached, |stored| {
            let mut obj = stored.clone();
            set_available(&mut obj, status, reason, message);
            Ok(obj)
        })
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

fn current(obj: &Value) -> Option<&Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Available"))
}

/// kube's `SetAPIServiceCondition` for `Available`.
fn set_available(obj: &mut Value, status: &str, reason: &str, message: &str) {
    let transition = match current(obj) {
        Some(c) if c.get("status").and_then(Value::as_str) == Some(status) => c.get("lastTransitionTime").cloned().unwrap_or_else(|| json!(ktime::now_rfc3339())),
        _ => json!(ktime::now_rfc3339()),
    };
    let condition = json!({"type": "Available", "status": status, "lastTransitionTime": transition, "reason": reason, "message": message});
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let mut conditions = obj.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    match conditions.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("Available")) {
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
    obj["status"]["conditions"] = json!(conditions);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_counts_when_ready_or_unknown_and_its_slice_has_the_port() {
        let slice = |ready: Value, port: Value| json!({"endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": ready}}], "ports": [port]});
        assert!(has_available_endpoint(&slice(json!(true), json!({"name": "https", "port": 443})), "https"));
        assert!(has_available_endpoint(&slice(Value::Null, json!({"name": "", "port": 443})), ""));
        assert!(!has_available_endpoint(&slice(json!(false), json!({"name": "https", "port": 443})), "https"));
        assert!(!has_available_endpoint(&slice(json!(true), json!({"name": "other", "port": 443})), "https"));
        assert!(!has_available_endpoint(&slice(json!(true), json!({"name": "https"})), "https"));
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut obj = json!({"status": {"conditions": [{"type": "Available", "status": "False", "lastTransitionTime": "2020-01-01T00:00:00Z", "reason": "A", "message": "a"}]}});
        set_available(&mut obj, "False", "MissingEndpoints", "m");
        assert_eq!(obj["status"]["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(obj["status"]["conditions"][0]["reason"], "MissingEndpoints");
        set_available(&mut obj, "True", "Passed", "all checks passed");
        assert_ne!(obj["status"]["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert_eq!(obj["status"]["conditions"].as_array().unwrap().len(), 1);
    }
}
