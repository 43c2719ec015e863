//! kube's `handlers.RequestScope`: everything the verb handlers need to know about one served
//! resource, whichever tier serves it. A built-in kind fills it from the catalog and
//! k8s-openapi's schemas ([`BuiltinScope`]); a custom resource fills it from its CRD (the
//! extensions tier). The handlers never ask which.

use std::sync::Arc;

use kapi_apimachinery::ApiError;
use kapi_fieldmanager::{ApplySchema, FieldSet, Writer};
use kapi_openapi::{apply_schema, patch_schema, OpenApi, SchemaNode};
use kapi_protobuf_codec::Codec;
use kapi_registry::catalog::ResourceSpec;
use kapi_registry::conversion;
use kapi_registry::rest::Tracker;
use kapi_registry::strategy::{CatalogStrategy, Strategy};
use kapi_registry::table;
use serde_json::Value;

use crate::field_validation::{self, FieldValidation, Source};
use crate::transform::{self, IncludeObject};

/// A conversion between versions in progress.
pub type ConvertFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ApiError>> + Send + 'a>>;

/// How requests of one resource in one served version are decoded, checked, converted,
/// stored and printed.
pub trait ResourceScope: Send + Sync {
    /// The resource as served (the request's version): routing, discovery, answers' kind.
    fn spec(&self) -> &'static ResourceSpec;

    /// The storage version's strategy: defaults, validation, status rules, storage keys.
    fn strategy(&self) -> &dyn Strategy;

    /// Whether objects are stored in another version than [`ResourceScope::spec`]'s, so
    /// answers and watch events are converted one by one.
    fn converts(&self) -> bool;

    /// A request object, in the storage version. May wait: a custom resource's conversion
    /// webhook is an HTTPS call.
    fn convert_to_storage(&self, obj: Value) -> ConvertFuture<'_, Value>;

    /// A stored object, in the served version.
    fn convert_from_storage(&self, obj: Value) -> ConvertFuture<'_, Value>;

    /// A stored object as reads of a scope that does not convert answer it, when that differs
    /// from the stored object: a custom resource's schema defaults that the object predates
    /// (kube defaults what it decodes from storage). None: the stored object as it is, so
    /// lists and watch events keep answering from the cached objects without a copy.
    fn read_defaults(&self, _obj: &Value) -> Option<Value> {
        None
    }

    /// Stored objects (a list), in the served version: one webhook call for all of them.
    fn convert_list_from_storage(&self, objs: Vec<Value>) -> ConvertFuture<'_, Vec<Value>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(objs.len());
            for obj in objs {
                out.push(self.convert_from_storage(obj).await?);
            }
            Ok(out)
        })
    }

    /// `fieldValidation` on a decoded body or patched object: drops unknown fields, returns
    /// the warnings to send, or the error the request fails with.
    fn check_fields(&self, mode: FieldValidation, obj: &mut Value, source: Source<'_>) -> Result<Vec<String>, ApiError>;

    /// The schema strategic merge patch follows; None answers 415 as kube does for kinds
    /// without Go types (custom resources).
    fn patch_schema(&self) -> Option<SchemaNode>;

    /// The schema server-side apply follows (built-in OpenAPI definitions or a CRD's structural
    /// schema, behind one type); None answers 415.
    fn apply_schema(&self) -> Option<ApplySchema<'_>>;

    /// The managedFields tracker of writes by `writer`; None leaves managedFields as sent.
    fn tracker(&self, writer: Writer) -> Option<Box<Tracker>>;

    /// The fields a write of `subresource` ("" for the main resource) cannot own because the
    /// strategy resets them (kube's `GetResetFields`): `status` on the main resource of kinds
    /// with a status subresource, `spec` on their status.
    fn reset_fields(&self, subresource: &str) -> FieldSet {
        crate::field_manager::reset_fields(self.spec(), subresource)
    }

    /// A `meta.k8s.io/v1` Table of stored objects (columns only when `with_columns`).
    fn table(&self, items: &mut dyn Iterator<Item = &Value>, list_meta: Value, include: IncludeObject, with_columns: bool) -> Value;

    /// Whether answers may be protobuf (kube answers custom resources in JSON only).
    fn protobuf(&self) -> bool;

    /// The `autoscaling/v1` Scale of a stored object (the `scale` subresource).
    fn scale_of(&self, obj: &Value) -> Value {
        crate::scale::scale_of(obj, self.spec().kind)
    }

    /// The stored object with a Scale's replicas written into it.
    fn apply_scale(&self, parent: &Value, scale: &Value) -> Result<Value, ApiError> {
        crate::scale::apply_scale(parent, scale)
    }

    /// Whether list items drop `kind` and `apiVersion`, as Go's typed lists encode them (true
    /// for built-in kinds); custom resources' unstructured lists keep them.
    fn typed_lists(&self) -> bool {
        true
    }

    /// Refuses a verb the resource does not take right now (kube refuses creates of custom
    /// resources while their CRD terminates).
    fn check_verb(&self, _verb: &str) -> Result<(), ApiError> {
        Ok(())
    }

    /// `Warning` headers every request of this resource gets (a deprecated version's).
    fn warnings(&self) -> &[String] {
        &[]
    }
}

/// The scope of a built-in kind: the catalog entry, the per-kind strategy tables and the
/// schemas of `/openapi/v2`.
pub struct BuiltinScope {
    spec: &'static ResourceSpec,
    stored: &'static ResourceSpec,
    strategy: Box<dyn Strategy>,
    openapi: Arc<OpenApi>,
}

impl BuiltinScope {
    /// The scope of `spec`; objects of a few resources live in another version's storage
    /// (`conversion::storage_spec`).
    pub fn new(spec: &'static ResourceSpec, openapi: Arc<OpenApi>) -> Self {
        let stored = conversion::storage_spec(spec);
        Self { spec, stored, strategy: Box::new(CatalogStrategy(stored)), openapi }
    }

    /// The scope of a built-in kind whose strategy lives with its tier (CustomResourceDefinitions
    /// in the extensions tier).
    pub fn with_strategy(spec: &'static ResourceSpec, strategy: Box<dyn Strategy>, openapi: Arc<OpenApi>) -> Self {
        Self { spec, stored: conversion::storage_spec(spec), strategy, openapi }
    }
}

impl ResourceScope for BuiltinScope {
    fn spec(&self) -> &'static ResourceSpec {
        self.spec
    }

    fn strategy(&self) -> &dyn Strategy {
        self.strategy.as_ref()
    }

    fn converts(&self) -> bool {
        conversion::needs_conversion(self.spec)
    }

    fn convert_to_storage(&self, obj: Value) -> ConvertFuture<'_, Value> {
        Box::pin(std::future::ready(conversion::to_storage(self.spec, obj)))
    }

    fn convert_from_storage(&self, obj: Value) -> ConvertFuture<'_, Value> {
        Box::pin(std::future::ready(conversion::from_storage(self.spec, obj)))
    }

    fn check_fields(&self, mode: FieldValidation, obj: &mut Value, source: Source<'_>) -> Result<Vec<String>, ApiError> {
        field_validation::check(&self.openapi, mode, self.spec, obj, source)
    }

    fn patch_schema(&self) -> Option<SchemaNode> {
        patch_schema(self.spec.group, self.spec.version, self.spec.kind)
    }

    fn apply_schema(&self) -> Option<ApplySchema<'_>> {
        apply_schema(self.spec.group, self.spec.version, self.spec.kind).map(ApplySchema::new)
    }

    fn tracker(&self, writer: Writer) -> Option<Box<Tracker>> {
        crate::field_manager::tracker(self.spec, writer)
    }

    fn table(&self, items: &mut dyn Iterator<Item = &Value>, list_meta: Value, include: IncludeObject, with_columns: bool) -> Value {
        // Printed from the stored version, as kube prints from its internal version.
        let stored = self.stored;
        let now = time::OffsetDateTime::now_utc();
        let columns = if with_columns { table::columns(stored.group, stored.kind) } else { Vec::new() };
        let cells = |obj: &Value| table::cells(stored.group, stored.kind, obj, now);
        match table::row_order(stored.group, stored.kind) {
            Some(order) => {
                let mut sorted: Vec<&Value> = items.collect();
                sorted.sort_by(|a, b| order(a, b));
                transform::table(columns, cells, &mut sorted.into_iter(), list_meta, include)
            }
            None => transform::table(columns, cells, items, list_meta, include),
        }
    }

    fn protobuf(&self) -> bool {
        Codec::global().supports(&self.spec.api_version(), self.spec.kind)
    }
}
