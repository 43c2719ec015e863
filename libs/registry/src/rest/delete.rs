//! DELETE and DELETECOLLECTION: preconditions, admission of the stored object, finalizers
//! (the garbage collector's `orphan` and `foregroundDeletion` as kube's default policy per
//! kind chooses them), pods' grace periods, namespaces held by `spec.finalizers`, and the
//! store's write effects given back once the object is gone.

use kapi_apimachinery::{ApiError, Result};
use kapi_storage::{Revision, StorageError};
use serde_json::{json, Value};

use super::stored::{encode_for_storage, set_resource_version};
use super::{
    decode_stored, finalizers, group_resource, held_by_spec_finalizers, meta_mut, meta_str, object_key, storage_error, DeleteOptions, DeleteOutcome,
    ListParams, RestStore, StoreAdmission, MAX_UPDATE_RETRIES,
};
use crate::catalog::ResourceSpec;
use crate::strategy::Strategy;

/// kube's `GarbageCollectionPolicy`: what a DELETE that names no propagation does with the
/// object's dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GcPolicy {
    /// Background deletion of the dependents (kube's `DeleteDependents`, the default).
    DeleteDependents,
    /// The `orphan` finalizer: dependents are kept, their ownerReferences to the object removed.
    OrphanDependents,
    /// No garbage collection finalizers at all (events).
    Unsupported,
}

/// kube's `DefaultGarbageCollectionPolicy` per kind (registry strategies): batch/v1 Jobs and
/// core/v1 ReplicationControllers orphan for backwards compatibility, as do the workloads of
/// the old extensions/v1beta1 and apps/v1beta1/v1beta2 versions; events have none.
fn default_gc_policy(spec: &ResourceSpec) -> GcPolicy {
    match (spec.group, spec.version, spec.resource) {
        ("" | "events.k8s.io", _, "events") => GcPolicy::Unsupported,
        ("", "v1", "replicationcontrollers") | ("batch", "v1", "jobs") => GcPolicy::OrphanDependents,
        ("extensions", "v1beta1", "deployments" | "daemonsets" | "replicasets")
        | ("apps", "v1beta1" | "v1beta2", "deployments" | "daemonsets" | "replicasets" | "statefulsets") => GcPolicy::OrphanDependents,
        _ => GcPolicy::DeleteDependents,
    }
}

/// kube's `deletionFinalizersForGarbageCollection`: the finalizers a DELETE leaves on the
/// object. The request's policy wins (the handler already turned the deprecated
/// `orphanDependents` into Orphan or Background), then an `orphan` / `foregroundDeletion`
/// finalizer the object carries, then the kind's default; both GC finalizers are taken out and
/// the chosen one put back, so a later Background delete drops an earlier `orphan`. The
/// existing list is kept as it is (order included) when the set does not change.
fn gc_finalizers(spec: &ResourceSpec, existing: &[String], policy: Option<&str>) -> Vec<String> {
    const ORPHAN: &str = "orphan";
    const FOREGROUND: &str = "foregroundDeletion";
    let default = default_gc_policy(spec);
    let (orphan, foreground) = match policy {
        _ if default == GcPolicy::Unsupported => (false, false),
        Some("Orphan") => (true, false),
        Some("Foreground") => (false, true),
        Some(_) => (false, false),
        None => match existing.iter().find(|f| *f == ORPHAN || *f == FOREGROUND) {
            Some(f) => (f == ORPHAN, f == FOREGROUND),
            None => (default == GcPolicy::OrphanDependents, false),
        },
    };
    let mut next: Vec<String> = existing.iter().filter(|f| *f != ORPHAN && *f != FOREGROUND).cloned().collect();
    if orphan {
        next.push(ORPHAN.into());
    }
    if foreground {
        next.push(FOREGROUND.into());
    }
    let same = |a: &[String], b: &[String]| a.iter().all(|f| b.contains(f));
    if same(&next, existing) && same(existing, &next) {
        existing.to_vec()
    } else {
        next
    }
}

impl RestStore {
    /// DELETE with preconditions, finalizers, pod grace periods and propagation policy.
    pub async fn delete(&self, strategy: &dyn Strategy, namespace: Option<&str>, name: &str, opts: &DeleteOptions) -> Result<DeleteOutcome> {
        self.delete_admitted(strategy, namespace, name, opts, None).await
    }

    /// [`RestStore::delete`] through admission, which sees the stored object of each attempt
    /// once the preconditions hold.
    pub async fn delete_admitted(
        &self,
        strategy: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        admission: Option<&dyn StoreAdmission>,
    ) -> Result<DeleteOutcome> {
        let spec = strategy.spec();
        let gr = group_resource(spec);
        let key = object_key(spec, namespace, name);
        for _ in 0..MAX_UPDATE_RETRIES {
            let Some(kv) = self.read(spec, &key, name).await? else {
                return Err(ApiError::not_found(&gr, name));
            };
            let mut obj = decode_stored(&kv)?;
            let uid = meta_str(&obj, "uid").unwrap_or_default().to_owned();
            if let Some(want) = &opts.precondition_uid {
                if *want != uid {
                    return Err(ApiError::conflict(
                        &gr,
                        name,
                        &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
                    ));
                }
            }
            if let Some(want) = &opts.precondition_resource_version {
                if *want != kv.mod_revision.to_string() {
                    return Err(ApiError::conflict(
                        &gr,
                        name,
                        &format!("Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {}", kv.mod_revision),
                    ));
                }
            }
            if let Some(admission) = admission {
                admission.delete(&obj).await?;
            }
            strategy.prepare_for_delete(&mut obj);
            let fins = gc_finalizers(spec, &finalizers(&obj), opts.propagation_policy.as_deref());
            let grace = self.grace_period(spec, &obj, opts);
            let graceful = grace > 0;
            // kube's namespace delete: `spec.finalizers` (the namespace controller's
            // `kubernetes`) keeps the namespace, Terminating, until its content is gone.
            if fins.is_empty() && !graceful && !held_by_spec_finalizers(spec, &obj) {
                if opts.dry_run {
                    return Ok(DeleteOutcome { object: obj, deleted: true });
                }
                match self.store.delete(&key, Some(kv.mod_revision)).await {
                    Ok((rev, _)) => {
                        self.after_delete(spec, &obj).await;
                        set_resource_version(&mut obj, rev);
                        return Ok(DeleteOutcome { object: obj, deleted: true });
                    }
                    Err(StorageError::Conflict { .. }) => continue,
                    Err(e) => return Err(storage_error(spec, name, e)),
                }
            }
            // Graceful or finalized deletion: mark the object and keep it.
            let already = meta_str(&obj, "deletionTimestamp").is_some();
            {
                let m = meta_mut(&mut obj);
                if !already {
                    let when = time::OffsetDateTime::now_utc() + time::Duration::seconds(grace.max(0));
                    let ts = when
                        .replace_nanosecond(0)
                        .unwrap_or(when)
                        .format(&time::format_description::well_known::Rfc3339)
                        .map_err(ApiError::internal)?;
                    m.insert("deletionTimestamp".into(), Value::String(ts));
                    m.insert("deletionGracePeriodSeconds".into(), Value::from(grace.max(0)));
                }
                if !fins.is_empty() {
                    m.insert("finalizers".into(), json!(fins));
                }
            }
            if spec.group.is_empty() && spec.resource == "namespaces" {
                obj["status"]["phase"] = Value::String("Terminating".into());
            }
            if opts.dry_run {
                return Ok(DeleteOutcome { object: obj, deleted: false });
            }
            match self.store.update(&key, encode_for_storage(&obj)?, kv.mod_revision).await {
                Ok(rev) => {
                    set_resource_version(&mut obj, rev);
                    return Ok(DeleteOutcome { object: obj, deleted: false });
                }
                Err(StorageError::Conflict { .. }) => continue,
                Err(e) => return Err(storage_error(spec, name, e)),
            }
        }
        Err(ApiError::conflict(&gr, name, "the object has been modified too often; please try again"))
    }

    /// kube's grace rules: only Pods bound to a node wait (for their kubelet); everything else
    /// is deleted at once unless finalizers hold it.
    fn grace_period(&self, spec: &ResourceSpec, obj: &Value, opts: &DeleteOptions) -> i64 {
        if !(spec.group.is_empty() && spec.resource == "pods") {
            return 0;
        }
        let scheduled = obj.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
        let phase = obj.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        if !scheduled || phase == "Succeeded" || phase == "Failed" {
            return 0;
        }
        opts.grace_period_seconds.or_else(|| obj.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64)).unwrap_or(30)
    }

    /// DELETECOLLECTION: deletes every object the selectors match, one by one with the same
    /// options, and returns what was deleted.
    pub async fn delete_collection(
        &self,
        strategy: &dyn Strategy,
        namespace: Option<&str>,
        params: &ListParams,
        opts: &DeleteOptions,
        admission: Option<&dyn StoreAdmission>,
    ) -> Result<(Vec<Value>, Revision)> {
        let mut list_params = params.clone();
        list_params.limit = None;
        list_params.continue_token = None;
        let page = self.list(strategy, namespace, &list_params).await?;
        let mut deleted = Vec::with_capacity(page.items.len());
        for obj in page.items {
            let Some(name) = meta_str(&obj, "name") else { continue };
            let ns = meta_str(&obj, "namespace");
            match self.delete_admitted(strategy, ns.or(namespace), name, opts, admission).await {
                Ok(outcome) => deleted.push(outcome.object),
                // Someone else deleted it first: that is what we wanted.
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok((deleted, page.resource_version))
    }
}

#[cfg(test)]
mod gc_finalizer_tests {
    use super::gc_finalizers;
    use crate::catalog;

    fn fins(group: &str, version: &str, resource: &str, existing: &[&str], policy: Option<&str>) -> Vec<String> {
        let spec = catalog::find(group, version, resource).expect("served");
        gc_finalizers(spec, &existing.iter().map(|f| f.to_string()).collect::<Vec<_>>(), policy)
    }

    #[test]
    fn defaults_per_kind() {
        assert!(fins("apps", "v1", "deployments", &[], None).is_empty());
        assert_eq!(fins("batch", "v1", "jobs", &[], None), ["orphan"]);
        assert_eq!(fins("", "v1", "replicationcontrollers", &[], None), ["orphan"]);
        assert!(fins("", "v1", "events", &[], Some("Foreground")).is_empty());
        assert!(fins("", "v1", "events", &["orphan"], None).is_empty());
    }

    #[test]
    fn request_policy_then_existing_finalizer() {
        assert_eq!(fins("batch", "v1", "jobs", &[], Some("Background")), Vec::<String>::new());
        assert_eq!(fins("apps", "v1", "deployments", &["a"], Some("Foreground")), ["a", "foregroundDeletion"]);
        assert_eq!(fins("apps", "v1", "deployments", &["orphan", "a"], Some("Foreground")), ["a", "foregroundDeletion"]);
        assert_eq!(fins("apps", "v1", "deployments", &["orphan", "a"], Some("Background")), ["a"]);
        // unchanged sets keep their order
        assert_eq!(fins("apps", "v1", "deployments", &["orphan", "a"], None), ["orphan", "a"]);
        assert_eq!(fins("batch", "v1", "jobs", &["foregroundDeletion"], None), ["foregroundDeletion"]);
    }
}
