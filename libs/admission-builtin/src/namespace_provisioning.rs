//! NamespaceExists and NamespaceAutoProvision (kube's deprecated
//! `plugin/pkg/admission/namespace/exists` and `autoprovision`): a write into a namespace that
//! does not exist is refused 404, or the namespace is created for it. NamespaceLifecycle does
//! the first in kube's default set; these remain for clusters that enable them by name.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::CatalogStrategy;
use serde_json::json;

use crate::lookup;

/// A namespaced write (not of a namespace itself).
fn namespaced(attrs: &Attributes) -> bool {
    let is_namespace = attrs.resource.group.is_empty() && attrs.resource.name == "namespaces";
    !attrs.namespace.is_empty() && !is_namespace
}

/// Whether the namespace exists: the cache first, then a live read (kube's lister, then client).
async fn exists(rest: &RestStore, name: &str) -> Result<bool, ApiError> {
    let spec = lookup::spec("", "v1", "namespaces")?;
    if lookup::get(rest, spec, None, name).is_some() {
        return Ok(true);
    }
    match rest.get(&CatalogStrategy(spec), None, name).await {
        Ok(_) => Ok(true),
        Err(e) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Refuses writes into a missing namespace.
pub struct NamespaceExists {
    rest: RestStore,
}

impl NamespaceExists {
    /// The plugin over `rest`'s namespaces.
    pub fn new(rest: RestStore) -> Self {
        NamespaceExists { rest }
    }
}

#[async_trait]
impl AdmissionPlugin for NamespaceExists {
    fn name(&self) -> &'static str {
        "NamespaceExists"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update | Operation::Delete)
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !namespaced(attrs) || exists(&self.rest, &attrs.namespace).await? {
            return Ok(());
        }
        Err(ApiError::not_found(&GroupResource::new("", "namespaces"), &attrs.namespace))
    }
}

/// Creates the namespace a create is made in, when it is missing.
pub struct NamespaceAutoProvision {
    rest: RestStore,
}

impl NamespaceAutoProvision {
    /// The plugin over `rest`'s namespaces.
    pub fn new(rest: RestStore) -> Self {
        NamespaceAutoProvision { rest }
    }
}

#[async_trait]
impl AdmissionPlugin for NamespaceAutoProvision {
    fn name(&self) -> &'static str {
        "NamespaceAutoProvision"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        // A dry run must not create anything.
        if !namespaced(attrs) || attrs.dry_run || exists(&self.rest, &attrs.namespace).await? {
            return Ok(());
        }
        let spec = lookup::spec("", "v1", "namespaces")?;
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": attrs.namespace}});
        match self.rest.create(&CatalogStrategy(spec), None, ns, false, WriteHooks::default()).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(attrs.forbidden(&e.message)),
        }
    }
}
