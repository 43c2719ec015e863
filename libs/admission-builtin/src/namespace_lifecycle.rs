//! NamespaceLifecycle (kube's `pkg/admission/plugin/namespace/lifecycle`): nothing is created
//! in a namespace that does not exist or is being terminated, and the namespaces the cluster
//! needs cannot be deleted.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::status::Cause;
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use kapi_registry::strategy::CatalogStrategy;
use serde_json::Value;

use crate::lookup;

/// The namespaces kube registers the plugin with as immortal.
pub const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

/// How long a namespace just deleted is read from the store rather than the cache: the cache
/// may not show it Terminating yet, and a create slipping in then would outlive the
/// namespace's cleanup (kube's `forceLiveLookupTTL`).
const FORCE_LIVE_LOOKUP: Duration = Duration::from_secs(30);

/// The plugin.
pub struct NamespaceLifecycle {
    rest: RestStore,
    /// Namespaces whose deletion this replica admitted, and when.
    deleted: Mutex<HashMap<String, Instant>>,
}

impl NamespaceLifecycle {
    /// The plugin over `rest`'s namespace cache.
    pub fn new(rest: RestStore) -> Self {
        NamespaceLifecycle { rest, deleted: Mutex::new(HashMap::new()) }
    }

    fn recently_deleted(&self, name: &str) -> bool {
        let mut deleted = self.deleted.lock().unwrap_or_else(|e| e.into_inner());
        deleted.retain(|_, at| at.elapsed() < FORCE_LIVE_LOOKUP);
        deleted.contains_key(name)
    }

    fn remember_deletion(&self, name: &str) {
        let mut deleted = self.deleted.lock().unwrap_or_else(|e| e.into_inner());
        // kube's LRU keeps 100 entries; expired ones go first, then the map is simply bounded.
        deleted.retain(|_, at| at.elapsed() < FORCE_LIVE_LOOKUP);
        if deleted.len() >= 100 {
            deleted.clear();
        }
        deleted.insert(name.to_owned(), Instant::now());
    }

    /// The request's namespace: from the cache, or from the store when the cache does not have
    /// it (yet) or may still show a namespace this replica just deleted as Active.
    async fn namespace(&self, name: &str) -> Result<Value, ApiError> {
        let spec = lookup::spec("", "v1", "namespaces")?;
        let cached = lookup::get(&self.rest, spec, None, name);
        let stale = cached.as_ref().is_some_and(|ns| lookup::str_at(ns, "/status/phase") != "Terminating") && self.recently_deleted(name);
        match cached {
            Some(ns) if !stale => Ok((*ns).clone()),
            // The live read answers kube's `namespaces "x" not found` itself.
            _ => self.rest.get(&CatalogStrategy(spec), None, name).await,
        }
    }
}

fn is_namespace(attrs: &Attributes) -> bool {
    attrs.kind.group.is_empty() && attrs.kind.name == "Namespace"
}

/// Access reviews must be answerable in any namespace: refusing them for a missing one would
/// tell the caller which namespaces exist.
fn is_access_review(attrs: &Attributes) -> bool {
    attrs.resource.group == "authorization.k8s.io" && attrs.resource.name == "localsubjectaccessreviews"
}

#[async_trait]
impl AdmissionPlugin for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update | Operation::Delete)
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if attrs.operation == Operation::Delete && is_namespace(attrs) && IMMORTAL.contains(&attrs.name.as_str()) {
            return Err(ApiError::forbidden_for(&attrs.group_resource(), &attrs.name, "this namespace may not be deleted"));
        }
        if attrs.namespace.is_empty() && !is_namespace(attrs) {
            return Ok(());
        }
        if is_namespace(attrs) {
            if attrs.operation == Operation::Delete {
                self.remember_deletion(&attrs.name);
            }
            return Ok(());
        }
        if attrs.operation != Operation::Create || is_access_review(attrs) {
            return Ok(());
        }
        let namespace = self.namespace(&attrs.namespace).await?;
        if lookup::str_at(&namespace, "/status/phase") != "Terminating" {
            return Ok(());
        }
        let ns = &attrs.namespace;
        let mut err = attrs.forbidden(&format!("unable to create new content in namespace {ns} because it is being terminated"));
        if let Some(details) = err.details.as_mut() {
            details.causes.push(Cause {
                reason: "NamespaceTerminating".into(),
                message: format!("namespace {ns} is being terminated"),
                field: "metadata.namespace".into(),
            });
        }
        Err(err)
    }
}
