//! Admission in the server: the chain built from `--enable-admission-plugins`,
//! `--disable-admission-plugins` and `--admission-control-config-file`, and the per-request
//! glue that hands it to the store ([`RequestAdmission`]).

pub mod cel_authorizer;
pub mod equivalents;
pub mod params;
pub mod escalation;
pub mod request;
pub mod requester;
pub mod type_checking;

use std::sync::Arc;

use kapi_admission::{AdmissionConfig, AdmissionPlugin, Chain, PluginNames};
use kapi_admission_webhook::{MutatingWebhooks, ValidatingWebhooks};
use kapi_auth::rbac::RbacAuthorizer;
use kapi_auth::Authorizer;
use serde_json::{json, Map, Value};

pub use request::{Request, RequestAdmission, View};

use crate::query::Query;

/// How admission is configured.
#[derive(Debug, Clone)]
pub struct AdmissionOptions {
    /// The enabled plugins in run order (kube's default set when no flag says otherwise).
    pub plugins: PluginNames,
    /// `--admission-control-config-file`, read.
    pub config: AdmissionConfig,
    /// The plugins `--enable-admission-plugins` named: one kapi does not implement stops
    /// start-up rather than silently not running.
    pub explicit: Vec<String>,
    /// `--default-not-ready-toleration-seconds` and `--default-unreachable-toleration-seconds`.
    pub default_toleration_seconds: (i64, i64),
}

impl Default for AdmissionOptions {
    fn default() -> Self {
        AdmissionOptions {
            plugins: kapi_admission::enabled_plugins(&[], &[]).unwrap_or_default(),
            config: AdmissionConfig::default(),
            explicit: Vec::new(),
            default_toleration_seconds: (300, 300),
        }
    }
}

impl AdmissionOptions {
    /// The options from kube-apiserver's flags, with kube's checks (unknown plugins, a plugin
    /// both enabled and disabled, an unreadable or malformed configuration file).
    pub fn from_flags(enable: &[String], disable: &[String], config_file: Option<&std::path::Path>) -> Result<Self, String> {
        let plugins = kapi_admission::enabled_plugins(enable, disable)?;
        let config = match config_file {
            Some(path) => AdmissionConfig::load(path).map_err(|e| e.to_string())?,
            None => AdmissionConfig::default(),
        };
        Ok(AdmissionOptions { plugins, config, explicit: enable.to_vec(), ..AdmissionOptions::default() })
    }
}

/// What the plugins are built from.
pub struct PluginContext {
    /// The store (webhook configurations, namespaces and policies are read from its caches).
    pub rest: kapi_registry::rest::RestStore,
    /// The tiers (which resources are equivalent, and conversion between them).
    pub tiers: crate::tier::Chain,
    /// The server's authorizer.
    pub authorizer: Arc<dyn Authorizer>,
    /// RBAC, when it is an authorization mode (escalation checks need its rules).
    pub rbac: Option<RbacAuthorizer>,
}

/// The chain: RBAC escalation prevention first (kube runs it in the RBAC registries, ahead of
/// validating admission), then the enabled plugins kapi implements, in kube's order. Default-on
/// plugins kapi does not implement yet are named in the log once; one `--enable-admission-plugins`
/// names stops start-up (a security plugin asked for must not silently not run). A plugin
/// configuration kube refuses stops start-up, as kube's `couldn't init admission plugin`.
pub fn build_chain(options: &AdmissionOptions, context: PluginContext) -> Result<Chain, String> {
    let mut plugins: Vec<Box<dyn AdmissionPlugin>> = Vec::new();
    if let Some(rbac) = context.rbac {
        plugins.push(Box::new(escalation::RbacEscalation { authorizer: context.authorizer.clone(), rbac }));
    }
    // One client for every webhook, so that connections to a webhook are reused.
    let client = kapi_webhook::Client::new(Arc::new(kapi_webhook::EndpointSliceResolver::new(context.rest.clone())));
    let cel_authorizer: Arc<dyn kapi_apiextensions::cel::CelAuthorizer> = Arc::new(cel_authorizer::ServerCelAuthorizer(context.authorizer.clone()));
    let equivalents: Arc<dyn kapi_admission::EquivalentResources> = Arc::new(equivalents::TierEquivalents(context.tiers.clone()));
    let observer: Arc<dyn kapi_admission::AdmissionObserver> = Arc::new(crate::metrics::AdmissionMetrics);
    let mut missing = Vec::new();
    for name in &options.plugins {
        let plugin: Box<dyn AdmissionPlugin> = match *name {
            "NamespaceLifecycle" => Box::new(kapi_admission_builtin::NamespaceLifecycle::new(context.rest.clone())),
            "NodeRestriction" => Box::new(kapi_admission_builtin::NodeRestriction::new(context.rest.clone())),
            "LimitRanger" => Box::new(kapi_admission_builtin::LimitRanger::new(context.rest.clone())),
            "ServiceAccount" => Box::new(kapi_admission_builtin::ServiceAccount::new(context.rest.clone())),
            "Priority" => Box::new(kapi_admission_builtin::Priority::new(context.rest.clone())),
            "DefaultTolerationSeconds" => {
                let (not_ready, unreachable) = options.default_toleration_seconds;
                Box::new(kapi_admission_builtin::DefaultTolerationSeconds::with_seconds(not_ready, unreachable))
            }
            "AlwaysAdmit" => Box::new(kapi_admission_builtin::AlwaysAdmit),
            "AlwaysDeny" => Box::new(kapi_admission_builtin::AlwaysDeny),
            "AlwaysPullImages" => Box::new(kapi_admission_builtin::AlwaysPullImages::new()),
            "DenyServiceExternalIPs" => Box::new(kapi_admission_builtin::DenyServiceExternalIPs::new()),
            "ExtendedResourceToleration" => Box::new(kapi_admission_builtin::ExtendedResourceToleration::new()),
            "LimitPodHardAntiAffinityTopology" => Box::new(kapi_admission_builtin::LimitPodHardAntiAffinityTopology::new()),
            "NamespaceAutoProvision" => Box::new(kapi_admission_builtin::NamespaceAutoProvision::new(context.rest.clone())),
            "NamespaceExists" => Box::new(kapi_admission_builtin::NamespaceExists::new(context.rest.clone())),
            "DefaultStorageClass" => Box::new(kapi_admission_builtin::DefaultStorageClass::new(context.rest.clone())),
            "DefaultIngressClass" => Box::new(kapi_admission_builtin::DefaultIngressClass::new(context.rest.clone())),
            "RuntimeClass" => Box::new(kapi_admission_builtin::RuntimeClass::new(context.rest.clone())),
            "StorageObjectInUseProtection" => Box::new(kapi_admission_builtin::StorageObjectInUseProtection::new()),
            "TaintNodesByCondition" => Box::new(kapi_admission_builtin::TaintNodesByCondition::new()),
            "PersistentVolumeClaimResize" => Box::new(kapi_admission_builtin::PersistentVolumeClaimResize::new(context.rest.clone())),
            "CertificateApproval" => Box::new(kapi_admission_builtin::CertificateApproval::new(context.authorizer.clone())),
            "CertificateSigning" => Box::new(kapi_admission_builtin::CertificateSigning::new(context.authorizer.clone())),
            "CertificateSubjectRestriction" => Box::new(kapi_admission_builtin::CertificateSubjectRestriction::new()),
            // A configuration kube refuses stops start-up, as kube's `couldn't init admission plugin`.
            "PodSecurity" => {
                let config = options.config.config_for("PodSecurity").map_err(|e| e.to_string());
                let plugin = config.and_then(|c| kapi_admission_builtin::PodSecurity::new(context.rest.clone(), c.as_ref()));
                Box::new(plugin.map_err(|e| format!("couldn't init admission plugin \"PodSecurity\": {e}"))?)
            }
            "MutatingAdmissionWebhook" => Box::new(
                MutatingWebhooks::new(context.rest.clone(), client.clone(), Some(cel_authorizer.clone()), Some(equivalents.clone()))
                    .with_observer(observer.clone()),
            ),
            "MutatingAdmissionPolicy" => Box::new(kapi_admission_policy::MutatingAdmissionPolicy::new(
                context.rest.clone(),
                Arc::new(params::TierParams(context.tiers.clone())),
                Some(cel_authorizer.clone()),
            )),
            "ValidatingAdmissionPolicy" => Box::new(kapi_admission_policy::ValidatingAdmissionPolicy::new(
                context.rest.clone(),
                Arc::new(params::TierParams(context.tiers.clone())),
                Some(cel_authorizer.clone()),
            )),
            "ValidatingAdmissionWebhook" => Box::new(
                ValidatingWebhooks::new(context.rest.clone(), client.clone(), Some(cel_authorizer.clone()), Some(equivalents.clone()))
                    .with_observer(observer.clone()),
            ),
            "ResourceQuota" => Box::new(kapi_admission_builtin::ResourceQuota::new(context.rest.clone())),
            other => {
                missing.push(other);
                continue;
            }
        };
        plugins.push(plugin);
    }
    let refused: Vec<&str> = missing.iter().copied().filter(|m| options.explicit.iter().any(|e| e == m)).collect();
    if !refused.is_empty() {
        return Err(format!("admission plugins {} are not implemented by kapi; remove them from --enable-admission-plugins", refused.join(",")));
    }
    if !missing.is_empty() {
        tracing::warn!(plugins = %missing.join(","), "admission plugins enabled but not implemented by kapi yet; they do not run");
    }
    let chain = Chain::new(plugins).with_observer(observer);
    tracing::info!(plugins = %chain.names().join(","), "admission chain");
    Ok(chain)
}

/// kube's options object of a write (`CreateOptions`, `UpdateOptions`, `PatchOptions`), as
/// admission and webhooks see it: the request's `dryRun`, `fieldManager` and
/// `fieldValidation`.
pub fn options_object(kind: &str, query: &Query) -> Value {
    let mut options = Map::new();
    options.insert("kind".into(), Value::String(kind.to_owned()));
    options.insert("apiVersion".into(), Value::String("meta.k8s.io/v1".into()));
    let dry_run = query.all("dryRun");
    if !dry_run.is_empty() {
        options.insert("dryRun".into(), json!(dry_run));
    }
    for field in ["fieldManager", "fieldValidation"] {
        if let Some(value) = query.get(field).filter(|v| !v.is_empty()) {
            options.insert(field.into(), Value::String(value.to_owned()));
        }
    }
    if kind == "PatchOptions" {
        if let Some(force) = query.get("force") {
            options.insert("force".into(), Value::Bool(force == "true"));
        }
    }
    Value::Object(options)
}
