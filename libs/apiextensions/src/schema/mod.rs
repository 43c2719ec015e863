//! Structural schemas of custom resources, as kube's apiextensions-apiserver applies them:
//! validation (kube-openapi's validator with kube's messages, ratcheting on update),
//! pruning of unknown fields, defaulting, and the list-type invariants.
//!
//! [`Structural`] is built once per CRD version from `schema.openAPIV3Schema` (already
//! accepted as structural by CRD validation) and is pure: no IO, no clock. The CR strategy
//! calls, in kube's order: [`Structural::prune`] on decode (unknown fields become
//! `unknown field "..."` warnings or errors), [`Structural::apply_defaults`], then
//! [`Structural::validate`] or [`Structural::validate_update`] before storage.
//!
//! Not covered here, by design: the root object's `metadata` validation and the TypeMeta
//! check (`kind: must be ...`), which the strategy does with apimachinery's object-meta rules;
//! `x-kubernetes-validations` (CEL), which needs a CEL evaluator; scale subresource paths.

pub mod apply;
mod default;
mod formats;
mod formats_net;
mod gofmt;
mod list_type;
mod node;
mod objectmeta;
mod openapi;
mod prune;
mod ratchet;
mod regex_go;
mod validate;
mod validate_number;

#[cfg(test)]
mod tests_default;
#[cfg(test)]
mod tests_prune;
#[cfg(test)]
mod tests_ratchet;
#[cfg(test)]
mod tests_validate;

use kapi_apimachinery::Cause;
use serde_json::Value;

pub use node::{AdditionalProperties, Schema};

/// The structural schema of one version of a custom resource.
#[derive(Debug, Clone)]
pub struct Structural {
    /// Shared: a CRD version's strategy and its CEL validator walk the same parsed schema.
    root: std::sync::Arc<Schema>,
    /// Whether the schema declares any default.
    has_defaults: bool,
}

/// Prunes a default value as kube's `PruneDefaults` does, so that defaulting never brings back
/// fields that pruning would drop.
fn prune_defaults(s: &mut Schema) {
    if let Some(mut d) = s.default.take() {
        let mut unknown = Vec::new();
        objectmeta::coerce_embedded("", &mut d, Some(s), &mut unknown);
        prune::Pruner::new().prune(&mut d, Some(s), false);
        s.default = Some(d);
    }
    if let Some(AdditionalProperties::Schema(ap)) = &mut s.additional_properties {
        prune_defaults(ap);
    }
    if let Some(items) = &mut s.items {
        prune_defaults(items);
    }
    for p in s.properties.values_mut() {
        prune_defaults(p);
    }
}

impl Structural {
    /// Parses a CRD version's `openAPIV3Schema`. Defaults are pruned against their position.
    pub fn new(open_api_v3_schema: &Value) -> Result<Structural, String> {
        let mut root = Schema::parse(open_api_v3_schema)?;
        prune_defaults(&mut root);
        let has_defaults = default::schema_has_defaults(&root);
        Ok(Structural { root: std::sync::Arc::new(root), has_defaults })
    }

    /// The root node, for walking the schema (list and map types for server-side apply).
    pub fn schema(&self) -> &Schema {
        &self.root
    }

    /// Validates a whole custom resource: the schema's value validations, the metadata of
    /// embedded resources, and the list-type invariants. Every failing field is reported, with
    /// kube's paths (`spec.replicas`) and messages.
    pub fn validate(&self, obj: &Value) -> Vec<Cause> {
        let res = validate::Validator.validate_node(&self.root, "", obj, None);
        let mut causes = openapi::to_causes(None, &res.errors);
        objectmeta::validate("", obj, Some(&self.root), &mut causes);
        self.list_types(obj, &mut causes);
        causes
    }

    /// Validates an update with ratcheting: errors on nodes unchanged from `old` (as kube
    /// correlates them) are dropped; list-type invariants are only enforced when `old`
    /// satisfied them.
    pub fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let corr = ratchet::Corr::new(new, old, &self.root);
        let res = validate::Validator.validate_node(&self.root, "", new, Some(&corr));
        let mut causes = openapi::to_causes(None, &res.errors);
        objectmeta::validate("", new, Some(&self.root), &mut causes);
        let mut old_list_errors = Vec::new();
        self.list_types(old, &mut old_list_errors);
        if old_list_errors.is_empty() {
            self.list_types(new, &mut causes);
        }
        causes
    }

    fn list_types(&self, obj: &Value, out: &mut Vec<Cause>) {
        if let Value::Object(m) = obj {
            list_type::validate_object("", &self.root, m, out);
        }
    }

    /// Drops what the schema does not know, as kube does on decode: root `metadata` is reduced
    /// to `ObjectMeta`'s fields, unknown fields are pruned (`apiVersion`, `kind`, `metadata`
    /// are kept at the root and in embedded resources), nulls that are neither nullable nor
    /// defaulted are removed, and embedded `metadata` is reduced to `ObjectMeta` too.
    ///
    /// Returns `unknown field "<path>"` for each dropped field, in kube's order, ready for a
    /// `fieldValidation` warning or a strict-decoding error.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut unknown = Vec::new();
        if let Some(meta) = obj.as_object_mut().and_then(|m| m.get_mut("metadata")) {
            unknown.extend(objectmeta::coerce_metadata(meta, "metadata", true));
        }
        let mut pruner = prune::Pruner::new();
        pruner.prune(obj, Some(&self.root), true);
        pruner.pruned.sort();
        unknown.extend(pruner.pruned);
        prune::prune_non_nullable_nulls(obj, Some(&self.root));
        let mut embedded = Vec::new();
        objectmeta::coerce_embedded("", obj, Some(&self.root), &mut embedded);
        embedded.sort();
        unknown.extend(embedded);
        unknown
            .into_iter()
            .map(|p| format!("unknown field \"{p}\""))
            .collect()
    }

    /// Removes null values the schema neither allows nor defaults (also done by [`Self::prune`]).
    pub fn prune_non_nullable_nulls(&self, obj: &mut Value) {
        prune::prune_non_nullable_nulls(obj, Some(&self.root));
    }

    /// Applies the schema's defaults (missing properties, and non-nullable nulls in
    /// properties, `additionalProperties` and `items`).
    pub fn apply_defaults(&self, obj: &mut Value) {
        default::apply(obj, Some(&self.root));
    }

    /// `obj` with the schema's defaults, when it lacks some (kube defaults objects read from
    /// storage too, so a default added to a CRD shows on objects stored before it); None when
    /// [`Self::apply_defaults`] would change nothing, checked without copying `obj`.
    pub fn with_defaults(&self, obj: &Value) -> Option<Value> {
        if !self.has_defaults || !default::needed(obj, Some(&self.root)) {
            return None;
        }
        let mut defaulted = obj.clone();
        self.apply_defaults(&mut defaulted);
        Some(defaulted)
    }
}
