//! Post-start bootstrap, as kube-apiserver's post-start hooks do it: the system namespaces
//! (`start-system-namespaces-controller`) and the `default` namespace with the `kubernetes`
//! Service (`bootstrap-controller`) exist before the server reports ready.

use kapi_apimachinery::ApiError;
use kapi_registry::catalog;
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::service_alloc::ServiceNetwork;
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
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
    default_service_cidr(rest, network).await?;
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

/// kube's field manager of the default ServiceCIDR's writes.
const DEFAULT_SERVICE_CIDR_MANAGER: &str = "kubernetes-service-cidr-controller";
/// kube's message of the default ServiceCIDR's Ready condition.
const DEFAULT_SERVICE_CIDR_READY: &str = "Kubernetes default Service CIDR is ready";
/// kube reports a default ServiceCIDR that differs from the flags once per process.
static REPORTED_MISMATCH: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The default ServiceCIDR as kube-apiserver's default-servicecidr controller keeps it: created
/// from the flags when missing (again if deleted), upgraded from single- to dual-stack when the
/// flags add the other family to the same primary range, and marked Ready when it has no Ready
/// condition yet and matches the flags. One being deleted is left to the servicecidrs
/// controller; one that differs from the flags is reported, not changed.
pub async fn default_service_cidr(rest: &RestStore, network: &ServiceNetwork) -> Result<(), ApiError> {
    let spec = catalog::find("networking.k8s.io", "v1", "servicecidrs").ok_or_else(|| ApiError::internal("servicecidrs missing from catalog"))?;
    let strategy = CatalogStrategy(spec);
    let flags: Vec<String> = network.cluster_ips.iter().map(ToString::to_string).collect();
    let name = kapi_registry::service_alloc::cidrs::DEFAULT_SERVICE_CIDR;
    let track = |sub: &str| crate::field_manager::tracker(spec, crate::field_manager::writer(spec, DEFAULT_SERVICE_CIDR_MANAGER.into(), sub));
    let current = match rest.get(&strategy, None, name).await {
        Ok(current) => current,
        Err(e) if e.code == 404 => {
            tracing::info!(cidrs = ?flags, "creating the default ServiceCIDR");
            let obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": name}, "spec": {"cidrs": flags}});
            let tracker = track("");
            match rest.create(&strategy, None, obj, false, WriteHooks::tracking(tracker.as_deref())).await {
                Ok(created) => created,
                Err(e) if e.code == 409 => rest.get(&strategy, None, name).await?,
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    let cidrs: Vec<String> = current
        .pointer("/spec/cidrs")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|c| c.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    if flags.len() == 2 && cidrs.len() == 1 && cidrs[0] == flags[0] {
        tracing::info!(from = ?cidrs, to = ?flags, "updating the default ServiceCIDR from single-stack to dual-stack");
        let tracker = track("");
        let hooks = WriteHooks::tracking(tracker.as_deref());
        let result = rest
            .update_with(&strategy, None, name, WriteTarget::Main, false, hooks, |stored| {
                let mut obj = stored.clone();
                obj["spec"]["cidrs"] = json!(flags);
                Ok(obj)
            })
            .await;
        if let Err(e) = result {
            tracing::warn!("the default ServiceCIDR can not be upgraded from {} to dual stack {flags:?}: {e}", flags[0]);
        }
        return Ok(());
    }
    if current.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
        return Ok(());
    }
    if cidrs != flags {
        if !REPORTED_MISMATCH.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
                "Inconsistent ServiceCIDR status for {name}, controller configuration: {flags:?}, ServiceCIDR configuration: {cidrs:?}. Configure the flags to match current ServiceCIDR or manually delete it."
            );
        }
        return Ok(());
    }
    let ready = current
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str().map(str::to_owned));
    match ready.as_deref() {
        Some("True") => Ok(()),
        Some("False") => {
            tracing::warn!("the default ServiceCIDR's Ready condition is False, but it matches the flags: check the cluster's network configuration");
            Ok(())
        }
        _ => {
            let tracker = track("status");
            let hooks = WriteHooks::tracking(tracker.as_deref());
            rest.update_with(&strategy, None, name, WriteTarget::Status, false, hooks, |stored| {
                let mut obj = stored.clone();
                crate::controllers::service_cidr::set_ready_condition(&mut obj, "True", "", DEFAULT_SERVICE_CIDR_READY);
                Ok(obj)
            })
            .await
            .map(|_| ())
        }
    }
}

/// What `kube-system/extension-apiserver-authentication` publishes: the CAs and header names
/// extension API servers (metrics-server and any server built on k8s.io/apiserver) read at
/// start to trust client certificates and the aggregator's identity headers.
#[derive(Debug, Clone)]
pub struct ClusterAuthentication {
    /// The client CA (`--client-ca-file`, or the generated CA).
    pub client_ca: std::path::PathBuf,
    /// `--requestheader-client-ca-file` and the other `--requestheader-*` flags, when set.
    pub requestheader: Option<(std::path::PathBuf, kapi_auth::RequestHeaderConfig)>,
}

/// kube's `start-cluster-authentication-info-controller`: writes the ConfigMap (created, or
/// updated when its data differs); safe from several replicas at once.
pub async fn cluster_authentication_info(rest: &RestStore, info: &ClusterAuthentication) -> Result<(), ApiError> {
    let read = |path: &std::path::Path| {
        let path = path.to_owned();
        async move { tokio::fs::read_to_string(&path).await.map_err(|e| ApiError::internal(format!("reading {}: {e}", path.display()))) }
    };
    let mut data = serde_json::Map::new();
    data.insert("client-ca-file".into(), read(&info.client_ca).await?.into());
    if let Some((ca, config)) = &info.requestheader {
        let list = |v: &[String]| serde_json::Value::String(serde_json::to_string(v).unwrap_or_default());
        data.insert("requestheader-client-ca-file".into(), read(ca).await?.into());
        data.insert("requestheader-allowed-names".into(), list(&config.allowed_names));
        data.insert("requestheader-username-headers".into(), list(&config.username_headers));
        data.insert("requestheader-uid-headers".into(), list(&config.uid_headers));
        data.insert("requestheader-group-headers".into(), list(&config.group_headers));
        data.insert("requestheader-extra-headers-prefix".into(), list(&config.extra_header_prefixes));
    }
    let data = serde_json::Value::Object(data);
    let spec = catalog::find("", "v1", "configmaps").ok_or_else(|| ApiError::internal("configmaps missing from catalog"))?;
    let strategy = CatalogStrategy(spec);
    let (ns, name) = ("kube-system", "extension-apiserver-authentication");
    match rest.get(&strategy, Some(ns), name).await {
        Ok(current) if current.get("data") == Some(&data) => Ok(()),
        Ok(_) => {
            let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, "kube-apiserver".into(), ""));
            rest.update_with(&strategy, Some(ns), name, kapi_registry::strategy::WriteTarget::Main, false, WriteHooks::tracking(track.as_deref()), |current| {
                let mut next = current.clone();
                next["data"] = data.clone();
                Ok(next)
            })
            .await
            .map(|_| ())
        }
        Err(e) if e.code == 404 => {
            let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data});
            ensure(rest, "", "configmaps", Some(ns), obj).await
        }
        Err(e) => Err(e),
    }
}
