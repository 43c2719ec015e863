//! Post-start bootstrap, as kube-apiserver's post-start hooks do it: the system namespaces
//! (`start-system-namespaces-controller`) and the `default` namespace with the `kubernetes`
//! Service (`bootstrap-controller`) exist before the server reports ready.

use kapi_apimachinery::ApiError;
use kapi_registry::catalog;
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::service_alloc::ServiceNetwork;
use kapi_registry::strategy::CatalogStrategy;
use serde_json::json;

/// How often the `kubernetes` Service is checked and recreated if deleted (kube's
/// `EndpointInterval`).
pub const KUBERNETES_SERVICE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// The namespaces kube-apiserver's system-namespaces controller keeps.
pub const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

async fn ensure(rest: &RestStore, group: &str, resource: &str, ns: Option<&str>, obj: serde_json::Value) -> Result<(), ApiError> {
    let spec = catalog::find(group, "v1", resource).ok_or_else(|| ApiError::internal(format!("{resource} missing from catalog")))?;
    // kube-apiserver records its own writes under its name.
    let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, "kube-apiserver".into(), ""));
    match rest.create(&CatalogStrategy(spec), ns, obj, false, WriteHooks::tracking(track.as_deref())).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

fn namespace(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// kube's system PriorityClasses (`system-node-critical`, `system-cluster-critical`), as its
/// `scheduling/bootstrap-system-priority-classes` hook creates them; safe to run on every start
/// and from several replicas at once.
pub async fn system_priority_classes(rest: &RestStore) -> Result<(), ApiError> {
    for class in kapi_admission_builtin::priority::system_class_objects() {
        ensure(rest, "scheduling.k8s.io", "priorityclasses", None, class).await?;
    }
    Ok(())
}

/// The system namespaces; safe to run on every start and from several replicas at once.
pub async fn system_namespaces(rest: &RestStore) -> Result<(), ApiError> {
    for ns in SYSTEM_NAMESPACES {
        ensure(rest, "", "namespaces", None, namespace(ns)).await?;
    }
    Ok(())
}

/// The `default` namespace, the default ServiceCIDR (`kubernetes`, the
/// `--service-cluster-ip-range` ranges) and the `kubernetes` Service at the first address of
/// the primary range, pointing at `secure_port`; safe to run on every start and from several
/// replicas at once.
pub async fn kubernetes_service(rest: &RestStore, secure_port: u16, network: &ServiceNetwork) -> Result<(), ApiError> {
    ensure(rest, "", "namespaces", None, namespace("default")).await?;
    let cidrs: Vec<String> = network.cluster_ips.iter().map(ToString::to_string).collect();
    let service_cidr = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "ServiceCIDR",
        "metadata": {"name": "kubernetes"},
        "spec": {"cidrs": cidrs},
        "status": {"conditions": [{
            "type": "Ready",
            "status": "True",
            "lastTransitionTime": kapi_apimachinery::time::now_rfc3339(),
            "reason": "",
            "message": "Kubernetes default Service CIDR is ready",
        }]},
    });
    ensure(rest, "networking.k8s.io", "servicecidrs", None, service_cidr).await?;
    let ip = network.kubernetes_service_ip().to_string();
    let svc = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": ip,
            "clusterIPs": [ip],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": secure_port}],
            "sessionAffinity": "None",
        },
    });
    let spec = catalog::find("", "v1", "services").ok_or_else(|| ApiError::internal("services missing from catalog"))?;
    // Another replica may be creating it at the same moment: its address is then taken (422)
    // before the Service exists; look again.
    for _ in 0..3 {
        match rest.get(&CatalogStrategy(spec), Some("default"), "kubernetes").await {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
        match ensure(rest, "", "services", Some("default"), svc.clone()).await {
            Err(e) if e.code == 422 => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
            other => return other,
        }
    }
    Err(ApiError::internal(format!("the kubernetes Service's address {ip} is held by another Service")))
}
