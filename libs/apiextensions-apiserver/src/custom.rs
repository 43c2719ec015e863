//! Custom resources: the strategy and the request scope one CRD version gets (kube's
//! `pkg/registry/customresource` and the per-version `crdInfo` of the CRD handler).

use std::collections::BTreeMap;
use std::sync::Arc;

use kapi_apiextensions::printer::{field_value, selectable_field_name, JsonPath, TableConvertor};
use kapi_apiextensions::cel::CelValidator;
use kapi_apiextensions::schema::Structural;
use kapi_apimachinery::validation::{validate_object_meta, NameRule};
use kapi_apimachinery::{ApiError, Cause, GroupResource};
use kapi_fieldmanager::{track_update, ApplySchema, Deduced, FieldSet, Path, Writer};
use kapi_openapi::SchemaNode;
use kapi_registry::catalog::ResourceSpec;
use kapi_registry::rest::Tracker;
use kapi_registry::strategy::Strategy;
use kapi_server::field_validation::{FieldValidation, Source};
use kapi_server::scope::{ConvertFuture, ResourceScope};
use kapi_server::transform::{self, IncludeObject};
use serde_json::Value;

/// How the scale subresource reads and writes replicas (`spec.subresources.scale`), as JSON
/// pointers into the object.
#[derive(Debug, Clone)]
pub struct ScalePaths {
    /// `specReplicasPath`.
    pub spec_replicas: String,
    /// `statusReplicasPath`.
    pub status_replicas: String,
    /// `labelSelectorPath`, if any.
    pub label_selector: Option<String>,
}

/// `.spec.replicas` -> `/spec/replicas` (CRD validation allows only such simple paths).
pub fn pointer(json_path: &str) -> String {
    json_path.split('.').filter(|s| !s.is_empty()).fold(String::new(), |mut p, seg| {
        p.push('/');
        p.push_str(seg);
        p
    })
}

/// The strategy of one CRD's objects, in its storage version.
pub struct CustomStrategy {
    /// The storage version's spec (keys, kind, scope, subresources).
    pub spec: &'static ResourceSpec,
    /// The storage version's structural schema.
    pub schema: Option<Arc<Structural>>,
    /// `selectableFields`: field-selector name and path.
    pub selectable: Vec<(String, JsonPath)>,
    /// The storage version's `x-kubernetes-validations`, compiled once with the schema.
    pub cel: Option<Arc<CelValidator>>,
}

impl CustomStrategy {
    fn meta_causes(&self, obj: &Value) -> Vec<Cause> {
        let meta = obj.get("metadata").cloned().unwrap_or(Value::Null);
        validate_object_meta(&meta, self.spec.namespaced, NameRule::Dns1123Subdomain)
    }
}

impl Strategy for CustomStrategy {
    fn spec(&self) -> &'static ResourceSpec {
        self.spec
    }

    /// kube's custom resource store (`customresource/strategy.go`, `etcd.go`): no create on
    /// update, unconditional updates, DELETE answers a Status; generation counts everything
    /// outside metadata, and outside status too when status is a subresource.
    fn semantics(&self) -> &'static kapi_registry::semantics::Semantics {
        if self.spec.has_subresource("status") {
            &kapi_registry::semantics::CUSTOM_RESOURCE_WITH_STATUS
        } else {
            &kapi_registry::semantics::CUSTOM_RESOURCE
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if self.spec.has_subresource("status") {
            if let Some(map) = obj.as_object_mut() {
                map.remove("status");
            }
        }
    }

    fn apply_defaults(&self, obj: &mut Value) {
        if let Some(schema) = &self.schema {
            schema.apply_defaults(obj);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut causes = self.meta_causes(obj);
        if let Some(schema) = &self.schema {
            causes.extend(schema.validate(obj));
        }
        if let Some(cel) = &self.cel {
            causes.extend(cel.validate(obj));
        }
        causes
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.meta_causes(new);
        if let Some(schema) = &self.schema {
            causes.extend(schema.validate_update(new, old));
        }
        if let Some(cel) = &self.cel {
            causes.extend(cel.validate_update(new, old));
        }
        causes
    }

    fn field_set(&self, obj: &Value) -> BTreeMap<String, String> {
        let mut set = BTreeMap::new();
        let meta = |f: &str| obj.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).unwrap_or_default().to_owned();
        set.insert("metadata.name".to_owned(), meta("name"));
        if self.spec.namespaced {
            set.insert("metadata.namespace".to_owned(), meta("namespace"));
        }
        for (name, path) in &self.selectable {
            // kube fails the object's attributes on an ambiguous path; here it matches nothing.
            set.insert(name.clone(), field_value(path, obj).unwrap_or_default());
        }
        set
    }
}

/// The scope of one served version of a custom resource.
pub struct CustomScope {
    /// The served version's spec.
    pub served: &'static ResourceSpec,
    /// The served version's schema (pruning of request bodies).
    pub schema: Option<Arc<Structural>>,
    /// Shared by every version of the CRD.
    pub strategy: Arc<CustomStrategy>,
    /// `additionalPrinterColumns` of the served version.
    pub columns: Arc<TableConvertor>,
    /// The scale subresource's paths.
    pub scale: Option<ScalePaths>,
    /// The CRD is being deleted: creates are refused.
    pub terminating: bool,
    /// A deprecated version's warning.
    pub warnings: Vec<String>,
    /// The CRD's conversion webhook (strategy `Webhook`); None rewrites `apiVersion` only.
    pub webhook: Option<Arc<crate::conversion::Webhook>>,
}

impl CustomScope {
    fn with_api_version(&self, obj: Value, api_version: String) -> Value {
        match obj {
            Value::Object(mut map) => {
                map.insert("apiVersion".into(), Value::String(api_version));
                Value::Object(map)
            }
            other => other,
        }
    }
}

impl ResourceScope for CustomScope {
    fn spec(&self) -> &'static ResourceSpec {
        self.served
    }

    fn strategy(&self) -> &dyn Strategy {
        self.strategy.as_ref()
    }

    fn converts(&self) -> bool {
        self.served.version != self.strategy.spec.version
    }

    /// Defaults of the request's version apply first, as kube defaults while decoding; then the
    /// object moves to the storage version: `apiVersion` only (strategy `None`) or through
    /// the CRD's webhook.
    fn convert_to_storage(&self, obj: Value) -> ConvertFuture<'_, Value> {
        Box::pin(async move {
            let served = self.served.api_version();
            match obj.get("apiVersion").and_then(Value::as_str) {
                None | Some("") => {}
                Some(v) if v == served => {}
                Some(v) => {
                    return Err(ApiError::bad_request(format!(
                        "the API version in the data ({v}) does not match the expected API version ({served})"
                    )))
                }
            }
            let mut obj = obj;
            if let Some(schema) = &self.schema {
                schema.apply_defaults(&mut obj);
            }
            if !self.converts() {
                return Ok(obj);
            }
            let storage = self.strategy.spec.api_version();
            match &self.webhook {
                Some(webhook) => {
                    let mut obj = obj;
                    if obj.get("apiVersion").is_none_or(|v| v.as_str().unwrap_or_default().is_empty()) {
                        obj["apiVersion"] = Value::String(served);
                    }
                    if obj.get("kind").is_none_or(|v| v.as_str().unwrap_or_default().is_empty()) {
                        obj["kind"] = Value::String(self.served.kind.to_owned());
                    }
                    let mut out = webhook.convert(vec![obj], &storage).await?;
                    out.pop().ok_or_else(|| ApiError::internal("the conversion webhook returned no object"))
                }
                None => Ok(self.with_api_version(obj, storage)),
            }
        })
    }

    fn convert_from_storage(&self, obj: Value) -> ConvertFuture<'_, Value> {
        Box::pin(async move {
            let mut out = self.convert_list_from_storage(vec![obj]).await?;
            out.pop().ok_or_else(|| ApiError::internal("the conversion webhook returned no object"))
        })
    }

    fn read_defaults(&self, obj: &Value) -> Option<Value> {
        // Converted reads are defaulted in the served version after conversion.
        if self.converts() {
            return None;
        }
        self.schema.as_ref()?.with_defaults(obj)
    }

    fn convert_list_from_storage(&self, objs: Vec<Value>) -> ConvertFuture<'_, Vec<Value>> {
        Box::pin(async move {
            if !self.converts() {
                return Ok(objs.into_iter().map(|obj| self.read_defaults(&obj).unwrap_or(obj)).collect());
            }
            if objs.is_empty() {
                return Ok(objs);
            }
            let served = self.served.api_version();
            let converted = match &self.webhook {
                Some(webhook) => {
                    // Only objects in another version go to the webhook, in one call.
                    let mut out = objs;
                    let at: Vec<usize> =
                        (0..out.len()).filter(|i| out[*i].get("apiVersion").and_then(Value::as_str) != Some(served.as_str())).collect();
                    let sent: Vec<Value> = at.iter().map(|i| std::mem::take(&mut out[*i])).collect();
                    for (i, obj) in at.into_iter().zip(webhook.convert(sent, &served).await?) {
                        out[i] = obj;
                    }
                    out
                }
                None => objs.into_iter().map(|o| self.with_api_version(o, served.clone())).collect(),
            };
            Ok(converted
                .into_iter()
                .map(|mut obj| {
                    if let Some(schema) = &self.schema {
                        schema.apply_defaults(&mut obj);
                    }
                    obj
                })
                .collect())
        })
    }

    fn check_fields(&self, mode: FieldValidation, obj: &mut Value, source: Source<'_>) -> Result<Vec<String>, ApiError> {
        let Some(schema) = &self.schema else { return Ok(Vec::new()) };
        if !obj.is_object() {
            return Ok(Vec::new());
        }
        let mut pruned = obj.clone();
        let unknown = schema.prune(&mut pruned);
        match mode {
            FieldValidation::Strict if !unknown.is_empty() => {
                let detail = format!("strict decoding error: {}", unknown.join(", "));
                Err(ApiError::bad_request(match source {
                    Source::Body(_) => format!("{kind} in version {version:?} cannot be handled as a {kind}: {detail}", kind = self.served.kind, version = self.served.version),
                    Source::Patched(_) => detail,
                }))
            }
            FieldValidation::Ignore => {
                *obj = pruned;
                Ok(Vec::new())
            }
            _ => {
                *obj = pruned;
                Ok(unknown)
            }
        }
    }

    fn patch_schema(&self) -> Option<SchemaNode> {
        None
    }

    /// The served version's structural schema as kube's type converter sees it, `metadata`
    /// typed as the built-in ObjectMeta; kube deduces the types of schemaless resources.
    fn apply_schema(&self) -> Option<ApplySchema<'_>> {
        let meta = kapi_server::field_manager::object_meta()?;
        Some(match &self.schema {
            Some(schema) => ApplySchema::new(schema.apply_type(meta)),
            None => ApplySchema::new(Deduced),
        })
    }

    /// Compares with the served version's schema, the version the writer speaks, as kube's field
    /// manager does after converting both objects to it.
    fn tracker(&self, writer: Writer) -> Option<Box<Tracker>> {
        let meta = kapi_server::field_manager::object_meta()?;
        let schema = self.schema.clone();
        Some(Box::new(move |old: Option<&Value>, new: &mut Value| match &schema {
            Some(schema) => track_update(old, new, &schema.apply_type(meta), &writer),
            None => track_update(old, new, &Deduced, &writer),
        }))
    }

    /// kube's custom resource status strategy resets `metadata` as well as `spec`.
    fn reset_fields(&self, subresource: &str) -> FieldSet {
        match subresource {
            "status" => FieldSet::from_paths(&[Path::fields(&["metadata"]), Path::fields(&["spec"])]),
            _ => kapi_server::field_manager::reset_fields(self.served, subresource),
        }
    }

    fn table(&self, items: &mut dyn Iterator<Item = &Value>, list_meta: Value, include: IncludeObject, with_columns: bool) -> Value {
        let columns = if with_columns { self.columns.column_definitions() } else { Vec::new() };
        let now = std::time::SystemTime::now();
        transform::table(columns, |obj| self.columns.cells_at(obj, now), items, list_meta, include)
    }

    fn protobuf(&self) -> bool {
        false
    }

    fn scale_of(&self, obj: &Value) -> Value {
        let Some(paths) = &self.scale else { return kapi_server::scale::scale_of(obj, self.served.kind) };
        let selector = paths
            .label_selector
            .as_deref()
            .and_then(|p| obj.pointer(p))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        kapi_server::scale::scale(obj, &paths.spec_replicas, &paths.status_replicas, selector)
    }

    fn apply_scale(&self, parent: &Value, scale: &Value) -> Result<Value, ApiError> {
        match &self.scale {
            Some(paths) => kapi_server::scale::apply_replicas(parent, scale, &paths.spec_replicas),
            None => kapi_server::scale::apply_scale(parent, scale),
        }
    }

    fn typed_lists(&self) -> bool {
        false
    }

    fn check_verb(&self, verb: &str) -> Result<(), ApiError> {
        if self.terminating && verb == "create" {
            let gr = GroupResource::new(self.served.group, self.served.resource);
            let mut err = ApiError::method_not_supported(&gr, verb);
            err.message = format!("{verb} not allowed while custom resource definition is terminating");
            return Err(err);
        }
        Ok(())
    }

    fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// Parses a CRD version's selectable fields.
pub fn selectable_fields(fields: Option<&Value>) -> Vec<(String, JsonPath)> {
    fields
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
        .filter_map(|p| JsonPath::parse(p).ok().map(|jp| (selectable_field_name(p).to_owned(), jp)))
        .collect()
}
