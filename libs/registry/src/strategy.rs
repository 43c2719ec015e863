//! Per-resource behaviour, in kube-apiserver's `RESTCreateStrategy` / `RESTUpdateStrategy` shape.
//!
//! The generic store in [`crate::rest`] calls these hooks in one fixed order (see
//! `pkg/registry/rest/create.go` and `update.go` upstream), so a resource only says *what* differs:
//! its defaults, its validation, how status and spec are separated, and its field-selector
//! attributes. What kube's strategies answer per kind with a flag or a one-line rule (status
//! reset, create on update, unconditional update, generation, DELETE's answer) comes from the
//! [`semantics`] table through the default methods.

use std::collections::BTreeMap;

use kapi_apimachinery::validation::validate_object_meta;
use kapi_apimachinery::Cause;
use serde_json::Value;

use crate::catalog::ResourceSpec;
use crate::semantics::{self, Generation, Semantics, StatusOnCreate};
use crate::{defaults, fields, validation};

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteTarget {
    /// The main resource: status changes in the body are ignored for kinds with a status
    /// subresource.
    Main,
    /// The `status` subresource: only status changes are kept.
    Status,
    /// A subresource with its own rules that the server applies itself (`pods/binding` sets
    /// `spec.nodeName`, which a pod update may not change): the handler computes the whole new
    /// object and checks what it allows; the main resource's update validation does not apply.
    Subresource,
}

/// The hooks the generic store applies around storage calls.
pub trait Strategy: Send + Sync {
    /// Discovery and routing data of the resource.
    fn spec(&self) -> &'static ResourceSpec;

    /// Clears what a client may not set on create (status for kinds with a status subresource)
    /// and fills create-time fields (Pod phase Pending, Namespace finalizers, ...).
    fn prepare_for_create(&self, obj: &mut Value) {
        let spec = self.spec();
        if self.semantics().status_on_create == StatusOnCreate::Reset {
            if let Some(map) = obj.as_object_mut() {
                map.remove("status");
            }
        }
        defaults::prepare_for_create(spec.group, spec.kind, obj);
    }

    /// Keeps what this write may not change, taking it from the stored object.
    fn prepare_for_update(&self, new: &mut Value, old: &Value, target: WriteTarget) {
        prepare_update_by_semantics(self.semantics(), new, old, target);
    }

    /// Applies kube-apiserver's defaults for the kind.
    fn apply_defaults(&self, obj: &mut Value) {
        let spec = self.spec();
        defaults::apply_defaults(spec.group, spec.kind, obj);
    }

    /// Create validation: object metadata plus the kind's own rules.
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let spec = self.spec();
        let meta = obj.get("metadata").cloned().unwrap_or(Value::Null);
        let mut causes = validate_object_meta(&meta, spec.namespaced, validation::name_rule(spec.group, spec.kind));
        causes.extend(validation::validate(spec.group, spec.kind, obj));
        causes
    }

    /// Update validation: everything create checks plus immutability rules.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let spec = self.spec();
        let mut causes = self.validate(new);
        causes.extend(validation::validate_update(spec.group, spec.kind, new, old));
        causes
    }

    /// Validation of a `status` subresource write: kube's status strategies check what a
    /// status write can change (metadata and status), not the whole object again. By default
    /// the whole update validation, which is stricter and never wrong for a status write.
    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        self.validate_update(new, old)
    }

    /// kube's `BeforeDelete` additions: what a delete request changes in the object before the
    /// store decides whether it can go (finalizers the kind's store adds, conditions). The
    /// object is kept, marked for deletion, while finalizers remain.
    fn prepare_for_delete(&self, _obj: &mut Value) {}

    /// The attributes field selectors match against.
    fn field_set(&self, obj: &Value) -> BTreeMap<String, String> {
        fields::field_set(self.spec(), obj)
    }

    /// kube's per-kind registry answers ([`semantics`]): the row of the resource.
    fn semantics(&self) -> &'static Semantics {
        let spec = self.spec();
        semantics::lookup(spec.group, spec.resource)
    }

    /// `AllowCreateOnUpdate`: whether a PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        self.semantics().allow_create_on_update
    }

    /// `AllowUnconditionalUpdate`: whether a PUT may omit `metadata.resourceVersion`.
    fn allow_unconditional_update(&self) -> bool {
        self.semantics().allow_unconditional_update
    }

    /// `ReturnDeletedObject`: whether a completed DELETE answers the object instead of a Status.
    fn returns_deleted_object(&self) -> bool {
        self.semantics().delete_returns_object
    }

    /// When `metadata.generation` is set and bumped.
    fn generation(&self) -> Generation {
        self.semantics().generation
    }
}

/// Sets `pointer` in `new` to its value in `old`, or removes it when `old` has none: a field
/// this write may not change.
/// The update preparation every kind shares, by its row of the semantics table: a main
/// resource write keeps the fields the kind's store keeps from the stored object; a status
/// write changes status only (kube's ResetObjectMetaForStatus plus `new.Spec = old.Spec`).
/// Strategies that do more on update call it first.
pub fn prepare_update_by_semantics(semantics: &Semantics, new: &mut Value, old: &Value, target: WriteTarget) {
    match target {
        WriteTarget::Main => {
            for pointer in semantics.kept_on_update {
                keep_from_old(new, old, pointer);
            }
        }
        WriteTarget::Subresource => {}
        WriteTarget::Status => {
            let status = new.get("status").cloned();
            *new = old.clone();
            match status {
                Some(s) => new["status"] = s,
                None => {
                    if let Some(map) = new.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
        }
    }
}

fn keep_from_old(new: &mut Value, old: &Value, pointer: &str) {
    let Some((parent, field)) = pointer.rsplit_once('/') else { return };
    match old.pointer(pointer) {
        Some(v) => {
            let mut at = &mut *new;
            for part in parent.split('/').filter(|p| !p.is_empty()) {
                if !at.get(part).is_some_and(Value::is_object) {
                    at[part] = Value::Object(Default::default());
                }
                at = &mut at[part];
            }
            at[field] = v.clone();
        }
        None => {
            if let Some(map) = new.pointer_mut(parent).and_then(Value::as_object_mut) {
                map.remove(field);
            }
        }
    }
}

/// The strategy of every built-in resource: the catalog entry plus the per-kind tables of
/// [`defaults`], [`validation`] and [`fields`].
#[derive(Debug, Clone, Copy)]
pub struct CatalogStrategy(pub &'static ResourceSpec);

impl Strategy for CatalogStrategy {
    fn spec(&self) -> &'static ResourceSpec {
        self.0
    }
}
