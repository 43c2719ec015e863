//! Updates: PUT (creating when the kind allows it), and the read-modify-write loop behind
//! update, patch, apply and the controllers' writes (kube's GuaranteedUpdate).

use kapi_apimachinery::{ApiError, Result};
use kapi_storage::{Revision, StorageError};
use serde_json::Value;

use super::{
    decode_stored, encode_for_storage, finalizers, held_by_spec_finalizers, group_resource, meta, meta_mut, meta_str, named_resource_version, object_key,
    resource_version_required, set_resource_version, storage_error, MutateFuture, RestStore, WriteHooks, MAX_UPDATE_RETRIES,
};
use crate::strategy::{Strategy, WriteTarget};

impl RestStore {
    /// UPDATE (PUT) of the main resource or its status; see [`RestStore::update_or_create`].
    #[allow(clippy::too_many_arguments)]
    pub async fn update(
        &self,
        strategy: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        obj: Value,
        target: WriteTarget,
        dry_run: bool,
        hooks: WriteHooks<'_>,
    ) -> Result<Value> {
        self.update_or_create(strategy, namespace, name, obj, target, dry_run, hooks).await.map(|(obj, _)| obj)
    }

    /// PUT with kube's store rules: a missing object is created (answered `true`, 201) when
    /// the kind allows create on update and this is the main resource, else 404; a
    /// `resourceVersion` in the body must match the stored one (409 otherwise); without one
    /// (or with "0") the update is unconditional if the kind allows it, else 422.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_or_create(
        &self,
        strategy: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        obj: Value,
        target: WriteTarget,
        dry_run: bool,
        hooks: WriteHooks<'_>,
    ) -> Result<(Value, bool)> {
        let spec = strategy.spec();
        let mut body = obj;
        Self::check_type_and_namespace(spec, &mut body, namespace)?;
        match meta_str(&body, "name") {
            Some(n) if n == name => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the name of the object does not match the name on the URL",
                ))
            }
            None => return Err(ApiError::bad_request("name is required")),
        }
        let unconditional = named_resource_version(&body)?.is_none();
        if unconditional {
            meta_mut(&mut body).remove("resourceVersion");
        }
        // Subresources never create (kube passes forceAllowCreate=false and their strategies
        // answer for the parent).
        let may_create = target == WriteTarget::Main && strategy.allow_create_on_update();
        let key = object_key(spec, namespace, name);
        for _ in 0..MAX_UPDATE_RETRIES {
            if may_create && self.read(spec, &key, name).await?.is_none() {
                match self.create(strategy, namespace, body.clone(), dry_run, hooks).await {
                    Ok(created) => return Ok((created, true)),
                    // Another writer created it first: update that object instead.
                    Err(e) if e.reason == kapi_apimachinery::StatusReason::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
            let updated = self
                .update_with(strategy, namespace, name, target, dry_run, hooks, |_current| {
                    if unconditional && !strategy.allow_unconditional_update() {
                        return Err(resource_version_required(spec, name));
                    }
                    Ok(body.clone())
                })
                .await;
            match updated {
                // Deleted between the read and the update: create it after all.
                Err(e) if may_create && e.code == 404 => continue,
                other => return other.map(|obj| (obj, false)),
            }
        }
        Err(ApiError::conflict(&group_resource(spec), name, "the object has been modified too often; please try again"))
    }

    /// The read-modify-write loop shared by update and patch (kube's GuaranteedUpdate).
    /// `mutate` turns the current object into the desired one; if the result names a
    /// resourceVersion it must be the current one.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_with(
        &self,
        strategy: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        target: WriteTarget,
        dry_run: bool,
        hooks: WriteHooks<'_>,
        mut mutate: impl FnMut(&Value) -> Result<Value> + Send,
    ) -> Result<Value> {
        self.update_with_async(strategy, namespace, name, target, dry_run, hooks, |current| {
            let next = mutate(current);
            Box::pin(std::future::ready(next))
        })
        .await
    }

    /// [`RestStore::update_with`] starting from a copy of the object the caller holds already
    /// (a controller's, from a watch cache), as kube's GuaranteedUpdate takes a cached existing
    /// object: the first attempt skips the store read and decode; if the copy was stale the
    /// write conflicts and the loop goes on from the store, calling `mutate` again.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_from_cached(
        &self,
        strategy: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        target: WriteTarget,
        hooks: WriteHooks<'_>,
        cached: &Value,
        mut mutate: impl FnMut(&Value) -> Result<Value> + Send,
    ) -> Result<Value> {
        let cached = meta_str(cached, "resourceVersion").and_then(|rv| rv.parse::<Revision>().ok()).map(|rev| (cached, rev));
        self.guaranteed_update(strategy, namespace, name, target, false, hooks, cached, |current| {
            let next = mutate(current);
            Box::pin(std::future::ready(next))
        })
        .await
    }

    /// [`RestStore::update_with`] whose `mutate` may wait (a conversion webhook between the
    /// stored and the requested version): it gets the current object (to copy what the wait
    /// needs) and answers the desired one, and is called again with the new current object when
    /// another writer won the race.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_with_async<'m>(
        &self,
        strategy: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        target: WriteTarget,
        dry_run: bool,
        hooks: WriteHooks<'_>,
        mutate: impl FnMut(&Value) -> MutateFuture<'m> + Send,
    ) -> Result<Value> {
        self.guaranteed_update(strategy, namespace, name, target, dry_run, hooks, None, mutate).await
    }

    /// The loop behind every update: read (or take the cached copy, once), mutate, prepare,
    /// validate, write on the read revision; a conflict starts over from the store unless the
    /// desired object pinned the revision it was made from.
    #[allow(clippy::too_many_arguments)]
    async fn guaranteed_update<'m>(
        &self,
        strategy: &dyn Strategy,
        namespace: Option<&str>,
        name: &str,
        target: WriteTarget,
        dry_run: bool,
        hooks: WriteHooks<'_>,
        mut cached: Option<(&Value, Revision)>,
        mut mutate: impl FnMut(&Value) -> MutateFuture<'m> + Send,
    ) -> Result<Value> {
        let spec = strategy.spec();
        let gr = group_resource(spec);
        let key = object_key(spec, namespace, name);
        for _ in 0..MAX_UPDATE_RETRIES {
            // A conflict on the cached copy says only that the copy was stale: retried from
            // the store whatever the desired object pinned.
            let (old, mod_revision, from_cache, stale) = match cached.take() {
                Some((obj, rev)) => (obj.clone(), rev, true, false),
                None => {
                    let Some(kv) = self.read(spec, &key, name).await? else {
                        return Err(ApiError::not_found(&gr, name));
                    };
                    (decode_stored(&kv)?, kv.mod_revision, false, kv.stale)
                }
            };
            let mut new = mutate(&old).await?;
            Self::check_type_and_namespace(spec, &mut new, namespace)?;
            if meta_str(&new, "name") != Some(name) {
                return Err(ApiError::bad_request("the name of the object does not match the name on the URL"));
            }
            let pinned = match named_resource_version(&new)? {
                None => false,
                Some(rv) if rv == mod_revision => true,
                Some(_) => return Err(ApiError::stale_update(&gr, name)),
            };
            if let Some(admission) = hooks.admission {
                if target == WriteTarget::Main {
                    strategy.apply_defaults(&mut new);
                }
                admission.mutate(Some(&old), &mut new).await?;
                Self::check_type_and_namespace(spec, &mut new, namespace)?;
                if meta_str(&new, "name") != Some(name) {
                    return Err(ApiError::bad_request("the name of the object does not match the name on the URL"));
                }
            }
            strategy.prepare_for_update(&mut new, &old, target);
            // System fields are the server's: keep them from the stored object.
            {
                let old_meta = meta(&old).cloned().unwrap_or_default();
                let m = meta_mut(&mut new);
                for field in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
                    match old_meta.get(field) {
                        Some(v) => {
                            m.insert(field.into(), v.clone());
                        }
                        None => {
                            m.remove(field);
                        }
                    }
                }
                m.remove("selfLink");
            }
            crate::omitempty::omit_empty(spec, &mut new);
            if target == WriteTarget::Main {
                strategy.apply_defaults(&mut new);
            }
            if strategy.generation().bumps(&new, &old) {
                let g = meta(&old).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
                meta_mut(&mut new).insert("generation".into(), Value::from(g + 1));
            }
            let causes = match target {
                WriteTarget::Main => strategy.validate_update(&new, &old),
                WriteTarget::Status => strategy.validate_status_update(&new, &old),
                WriteTarget::Subresource => Vec::new(),
            };
            if !causes.is_empty() {
                return Err(ApiError::invalid(spec.group, spec.kind, name, causes));
            }
            if let Some(track) = hooks.track {
                track(Some(&old), &mut new);
            }
            set_resource_version(&mut new, mod_revision);
            // kube validates even a write that turns out to change nothing.
            if let Some(admission) = hooks.admission {
                admission.validate(Some(&old), &new).await?;
            }
            // What the object reserves (a Service's addresses), settled once the store answers.
            let pending = match self.effects_for(spec) {
                Some(effects) if target == WriteTarget::Main => Some(effects.begin_update(&old, &mut new, dry_run).await?),
                _ => None,
            };
            let settle = |stored: bool| async move {
                if let Some(pending) = pending {
                    pending.finish(stored).await;
                }
            };
            if new == old && !stale {
                // kube skips no-op writes: the object and its resourceVersion stay as they are;
                // unless the stored value was sealed with an older key, which the write
                // replaces (rotation rewrites every object unchanged).
                settle(false).await;
                return Ok(old);
            }
            // Removing the last finalizer of an object being deleted completes the deletion.
            if meta_str(&new, "deletionTimestamp").is_some() && finalizers(&new).is_empty() && !held_by_spec_finalizers(spec, &new) {
                settle(false).await;
                if dry_run {
                    return Ok(new);
                }
                return match self.store.delete(&key, Some(mod_revision)).await {
                    Ok((rev, _)) => {
                        self.after_delete(spec, &old).await;
                        set_resource_version(&mut new, rev);
                        Ok(new)
                    }
                    Err(StorageError::Conflict { .. }) if !pinned || from_cache => continue,
                    Err(e) => Err(storage_error(spec, name, e)),
                };
            }
            if dry_run {
                settle(false).await;
                return Ok(new);
            }
            let written = match encode_for_storage(&new) {
                Ok(value) => self.store.update(&key, value, mod_revision).await,
                Err(e) => {
                    settle(false).await;
                    return Err(e);
                }
            };
            settle(written.is_ok()).await;
            match written {
                Ok(rev) => {
                    set_resource_version(&mut new, rev);
                    return Ok(new);
                }
                Err(StorageError::Conflict { .. }) if !pinned || from_cache => continue,
                Err(e) => return Err(storage_error(spec, name, e)),
            }
        }
        Err(ApiError::conflict(&gr, name, "the object has been modified too often; please try again"))
    }
}
