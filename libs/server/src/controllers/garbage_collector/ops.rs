//! The collector's reads and writes, through the generic REST store as any client's would go
//! (kube's GC uses the metadata client). Every write is safe with other replicas doing the
//! same: deletes carry uid and resourceVersion preconditions, metadata edits are
//! read-modify-write loops on the stored revision that give up when the name now holds
//! another object (another uid), and a 404 means someone got there first.

use std::sync::Arc;

use kapi_apimachinery::ApiError;
use kapi_registry::catalog::{ResourceSpec, Serving};
use kapi_registry::rest::{DeleteOptions, RestStore, WriteHooks};
use kapi_registry::strategy::WriteTarget;
use serde_json::Value;

use super::graph::{being_deleted, has_finalizer, owner_refs, str_at, Identity, OwnerRef, FOREGROUND};
use crate::controllers::MANAGER;
use crate::scope::ResourceScope;
use crate::tier::Chain;

/// Why a piece of work could not be finished now.
#[derive(Debug)]
pub(super) enum Failure {
    /// Someone else changed the object meanwhile (409): look again soon.
    Conflict(String),
    /// An ownerReference names a kind nothing serves (yet: a CRD may come), kube's
    /// `restMappingError`: retried with a growing pause.
    Unmapped(String),
    /// A cluster-scoped object names a namespaced owner, which can never resolve (kube's
    /// `namespacedOwnerOfClusterScopedObjectErr`): the reference is left alone.
    Invalid(String),
    /// Any other error from the store.
    Api(ApiError),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Conflict(m) | Failure::Unmapped(m) | Failure::Invalid(m) => f.write_str(m),
            Failure::Api(e) => write!(f, "{}", e.message),
        }
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        if e.code == 409 {
            Failure::Conflict(e.message)
        } else {
            Failure::Api(e)
        }
    }
}

/// What the live owner of a reference is (kube's `classifyReferences`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OwnerState {
    /// Exists with the referenced uid and does not wait for its dependents.
    Solid,
    /// No object of that name, or one with another uid.
    Dangling,
    /// Exists, being deleted with `foregroundDeletion`: waits for its dependents.
    Waiting,
}

pub(super) struct Ops {
    pub rest: RestStore,
    pub chain: Chain,
}

impl Ops {
    fn scope(&self, spec: &ResourceSpec) -> Result<Arc<dyn ResourceScope>, Failure> {
        self.chain
            .scope(spec.group, spec.version, spec.resource)
            .ok_or_else(|| Failure::Unmapped(format!("{}/{} {} is not served", spec.group, spec.version, spec.resource)))
    }

    /// The served resource an ownerReference's apiVersion and kind name (kube's REST mapping).
    fn owner_spec(&self, r: &OwnerRef) -> Result<&'static ResourceSpec, Failure> {
        self.chain
            .resources_in(r.group(), r.version())
            .into_iter()
            .find(|s| s.kind == r.kind && s.serving == Serving::Stored && s.supports("get"))
            .ok_or_else(|| Failure::Unmapped(format!("unable to get REST mapping for {}/{}", r.api_version, r.kind)))
    }

    async fn read(&self, spec: &ResourceSpec, namespace: Option<&str>, name: &str) -> Result<Option<Value>, Failure> {
        let scope = self.scope(spec)?;
        match self.rest.get(scope.strategy(), namespace, name).await {
            Ok(obj) => Ok(Some(obj)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The object as stored now; None when it is gone or its name holds another object.
    pub async fn get(&self, id: &Identity) -> Result<Option<Value>, Failure> {
        let obj = self.read(id.spec, id.namespace.as_deref(), &id.name).await?;
        Ok(obj.filter(|o| str_at(o, "/metadata/uid") == id.uid))
    }

    /// kube's `isDangling` and the classification after it, by a live read of the owner.
    pub async fn owner_state(&self, dependent: &Identity, r: &OwnerRef) -> Result<OwnerState, Failure> {
        let spec = self.owner_spec(r)?;
        if spec.namespaced && dependent.namespace.is_none() {
            return Err(Failure::Invalid(format!("cluster-scoped {} names the namespaced owner {} {}", dependent.name, r.kind, r.name)));
        }
        let namespace = if spec.namespaced { dependent.namespace.as_deref() } else { None };
        let Some(owner) = self.read(spec, namespace, &r.name).await? else { return Ok(OwnerState::Dangling) };
        if str_at(&owner, "/metadata/uid") != r.uid {
            return Ok(OwnerState::Dangling);
        }
        if being_deleted(&owner) && has_finalizer(&owner, FOREGROUND) {
            return Ok(OwnerState::Waiting);
        }
        Ok(OwnerState::Solid)
    }

    /// kube's `deleteObject`: a delete with the uid and resourceVersion the decision was made
    /// on. When only the resourceVersion moved and the ownerReferences are those the decision
    /// saw, the delete is repeated with the uid alone (a status write must not hold it up).
    pub async fn delete(&self, id: &Identity, resource_version: &str, owners_seen: &[OwnerRef], policy: &str) -> Result<(), Failure> {
        let scope = self.scope(id.spec)?;
        let mut opts = DeleteOptions {
            propagation_policy: Some(policy.to_owned()),
            precondition_uid: Some(id.uid.clone()),
            precondition_resource_version: Some(resource_version.to_owned()).filter(|rv| !rv.is_empty()),
            ..DeleteOptions::default()
        };
        let ns = id.namespace.as_deref();
        match self.rest.delete(scope.strategy(), ns, &id.name, &opts).await {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 404 => return Ok(()),
            Err(e) if e.code == 409 && opts.precondition_resource_version.is_some() => {}
            Err(e) => return Err(e.into()),
        }
        let Some(live) = self.get(id).await? else { return Ok(()) };
        if owner_refs(&live) != owners_seen {
            return Err(Failure::Conflict(format!("the ownerReferences of {} changed; looking again", id.name)));
        }
        opts.precondition_resource_version = None;
        match self.rest.delete(scope.strategy(), ns, &id.name, &opts).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Edits the stored object's metadata with `edit` (recomputed from the current object on
    /// every attempt of the store's conflict loop). Done when the object is gone or its name
    /// now holds another uid; an edit that changes nothing writes nothing.
    pub async fn update_meta(&self, id: &Identity, mut edit: impl FnMut(&mut Value) + Send) -> Result<(), Failure> {
        let scope = self.scope(id.spec)?;
        let track = scope.tracker(crate::field_manager::writer_for(scope.as_ref(), MANAGER.into(), ""));
        let mut replaced = false;
        let result = self
            .rest
            .update_with(
                scope.strategy(),
                id.namespace.as_deref(),
                &id.name,
                WriteTarget::Main,
                false,
                WriteHooks::tracking(track.as_deref()),
                |current| {
                    if str_at(current, "/metadata/uid") != id.uid {
                        replaced = true;
                        return Err(ApiError::internal("the object was replaced"));
                    }
                    let mut next = current.clone();
                    edit(&mut next);
                    if next != *current {
                        if let Some(m) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                            m.remove("resourceVersion");
                        }
                    }
                    Ok(next)
                },
            )
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(_) if replaced => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Drops the ownerReferences whose uid is in `uids` (kube's delete-owner-refs patch).
pub(super) fn remove_owner_refs(obj: &mut Value, uids: &[String]) {
    if let Some(refs) = obj.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut) {
        refs.retain(|r| !r.get("uid").and_then(Value::as_str).is_some_and(|u| uids.iter().any(|x| x == u)));
        if refs.is_empty() {
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("ownerReferences");
            }
        }
    }
}

/// Sets `blockOwnerDeletion: false` where it was true (kube's unblock-owner-references patch).
pub(super) fn unblock_owner_refs(obj: &mut Value) {
    for r in obj.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut).into_iter().flatten() {
        if r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
            r["blockOwnerDeletion"] = Value::Bool(false);
        }
    }
}

/// Drops `finalizer` from `metadata.finalizers` (kube's `removeFinalizer`).
pub(super) fn remove_finalizer(obj: &mut Value, finalizer: &str) {
    if let Some(f) = obj.pointer_mut("/metadata/finalizers").and_then(Value::as_array_mut) {
        f.retain(|v| v.as_str() != Some(finalizer));
    }
}
