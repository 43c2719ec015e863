//! Validation and defaulting of `apiextensions.k8s.io/v1` CustomResourceDefinition objects, as
//! kube-apiserver's `pkg/apis/apiextensions/validation` and `v1/defaults.go` do them.
//!
//! Clients (kubectl, Helm, operators' installers) print the causes verbatim and CI pipelines
//! grep them, so field paths and messages follow kube character for character. Two kube
//! behaviours shape the paths:
//!
//! - kube validates the *internal* type after converting from v1. That conversion hoists
//!   `versions[*].schema`, `subresources`, `additionalPrinterColumns` and `selectableFields` to
//!   the top level when every version carries the same value (always so with one version), so
//!   such errors read `spec.validation.openAPIV3Schema...`, `spec.subresources.scale...`,
//!   `spec.additionalPrinterColumns[0]...`; per-version paths (`spec.versions[1].schema...`)
//!   appear only when versions differ. [`crd`] mirrors that hoisting.
//! - the conversion settings are validated under their internal names
//!   (`spec.conversion.webhookClientConfig`, `spec.conversion.conversionReviewVersions`).
//!
//! Values that are whole structs in kube (the version list, a schema) are shown as their v1
//! JSON rather than Go's rendering of the internal struct. `x-kubernetes-validations` rules get
//! kube's shape checks here ([`rules`]) and are compiled and cost-checked by
//! [`crate::cel::validate_crd_schema`].
//!
//! The module is IO-free: callers pass `serde_json::Value`s in kube's JSON form.

mod columns;
mod conversion;
mod crd;
mod defaults;
mod extensions;
mod fieldpath;
mod names;
mod openapi;
mod regex_check;
mod rules;
mod schema_walk;
mod structural;
mod update;

#[cfg(test)]
mod tests;

use kapi_apimachinery::Cause;
use serde_json::{json, Value};

/// kube's `SetObjectDefaults_CustomResourceDefinition` for v1: `names.singular` =
/// lowercase(kind), `names.listKind` = kind + "List", `conversion.strategy` = None when no
/// conversion is given, a webhook service's `port` = 443, and `status.storedVersions` = the
/// storage version when empty. The strategy applies it before validation, so validation sees
/// what will be stored.
pub fn apply_defaults(crd: &mut Value) {
    let Some(obj) = crd.as_object_mut() else {
        return;
    };
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        let names = spec.entry("names").or_insert_with(|| json!({}));
        if let Some(names) = names.as_object_mut() {
            let kind = names.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
            if names.get("singular").and_then(Value::as_str).unwrap_or("").is_empty() {
                names.insert("singular".into(), Value::from(kind.to_lowercase()));
            }
            if names.get("listKind").and_then(Value::as_str).unwrap_or("").is_empty() && !kind.is_empty() {
                names.insert("listKind".into(), Value::from(format!("{kind}List")));
            }
        }
        if spec.get("conversion").is_none_or(Value::is_null) {
            spec.insert("conversion".into(), json!({"strategy": "None"}));
        }
        let service = spec
            .get_mut("conversion")
            .and_then(|c| c.pointer_mut("/webhook/clientConfig/service"))
            .and_then(Value::as_object_mut);
        if let Some(service) = service {
            if service.get("port").is_none_or(Value::is_null) {
                service.insert("port".into(), Value::from(443));
            }
        }
    }
    let storage = obj
        .get("spec")
        .and_then(|s| s.get("versions"))
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v.get("storage").and_then(Value::as_bool) == Some(true)))
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .map(str::to_string);
    let status = obj.entry("status").or_insert_with(|| json!({}));
    if let (Some(status), Some(storage)) = (status.as_object_mut(), storage) {
        let empty = status.get("storedVersions").and_then(Value::as_array).is_none_or(Vec::is_empty);
        if empty {
            status.insert("storedVersions".into(), json!([storage]));
        }
    }
}

/// kube's `ValidateCustomResourceDefinition`: metadata (the name must be
/// `<spec.names.plural>.<spec.group>`), the spec (group, scope, names, versions, schemas with
/// the structural rules, subresources, printer columns, selectable fields, conversion), the
/// status names and stored versions, API approval for `*.k8s.io` groups. Every cause is
/// returned, in kube's order.
pub fn validate_create(crd: &Value) -> Vec<Cause> {
    let mut causes = names::validate_metadata_create(crd);
    causes.extend(crd::validate_spec(crd, &Opts::create()));
    causes.extend(names::validate_status(crd));
    causes.extend(names::validate_stored_versions(crd));
    causes.extend(names::validate_api_approval(crd, None));
    causes.extend(names::validate_preserve_unknown_fields(crd, None));
    causes
}

/// kube's `ValidateCustomResourceDefinitionUpdate`: the create rules, relaxed where the old
/// object already broke them (invalid types, non-structural schemas, unpruned defaults,
/// non-atomic set items, map-list keys, unrecognised conversion review versions, an invalid
/// CA bundle, too many selectable fields), plus immutability: `spec.group` and
/// `spec.names.plural` always, `spec.scope` and `spec.names.kind` once the CRD is Established.
pub fn validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    update::validate_update(new, old)
}

/// kube's `ValidateUpdateCustomResourceDefinitionStatus`, for writes to the status
/// subresource: metadata update rules and `status.acceptedNames`.
pub fn validate_status_update(new: &Value, old: &Value) -> Vec<Cause> {
    let mut causes = update::validate_metadata_update(new, old);
    causes.extend(names::validate_status(new));
    causes
}

/// The switches kube's `validationOptions` carries: create enables every rule; update relaxes
/// the ones the old object already violated so that stored CRDs stay updatable.
#[derive(Debug, Clone)]
pub(crate) struct Opts {
    pub allow_defaults: bool,
    pub require_recognized_conversion_review_version: bool,
    pub require_immutable_names: bool,
    pub require_openapi_schema: bool,
    pub require_valid_property_type: bool,
    pub require_structural_schema: bool,
    pub require_pruned_defaults: bool,
    pub require_atomic_set_type: bool,
    pub require_map_list_keys_map_set_validation: bool,
    pub allow_invalid_ca_bundle: bool,
    /// Versions ("" for the top level) whose unchanged selectable fields may exceed the limit.
    pub allow_too_many_selectable_fields: Vec<String>,
}

impl Opts {
    pub(crate) fn create() -> Self {
        Self {
            allow_defaults: true,
            require_recognized_conversion_review_version: true,
            require_immutable_names: false,
            require_openapi_schema: true,
            require_valid_property_type: true,
            require_structural_schema: true,
            require_pruned_defaults: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set_validation: true,
            allow_invalid_ca_bundle: true,
            allow_too_many_selectable_fields: Vec::new(),
        }
    }
}

/// kube's `field.Path`, rendered as it prints: `a.b[0][key]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path(String);

impl Path {
    pub(crate) fn new(root: &str) -> Self {
        Self(root.to_string())
    }

    pub(crate) fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_string())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    pub(crate) fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    pub(crate) fn key(&self, k: &str) -> Self {
        Self(format!("{}[{k}]", self.0))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

// ---- field.Error constructors, rendered as kube's ErrorBody ------------------------------------

pub(crate) fn invalid(path: &Path, value: &Value, detail: &str) -> Cause {
    Cause::invalid(path.as_str(), value, detail)
}

pub(crate) fn invalid_str(path: &Path, value: &str, detail: &str) -> Cause {
    Cause::invalid(path.as_str(), &Value::from(value), detail)
}

pub(crate) fn required(path: &Path, detail: &str) -> Cause {
    Cause::required(path.as_str(), detail)
}

pub(crate) fn forbidden(path: &Path, detail: &str) -> Cause {
    Cause::forbidden(path.as_str(), detail)
}

pub(crate) fn not_supported(path: &Path, value: &str, supported: &[&str]) -> Cause {
    Cause::not_supported(path.as_str(), &Value::from(value), supported)
}

pub(crate) fn duplicate(path: &Path, value: &str) -> Cause {
    Cause::duplicate(path.as_str(), &Value::from(value))
}

/// kube's `field.TooMany`.
pub(crate) fn too_many(path: &Path, actual: usize, max: usize) -> Cause {
    let unit = if max == 1 { "item" } else { "items" };
    Cause {
        reason: "FieldValueTooMany".into(),
        message: format!("{path}: Too many: {actual}: must have at most {max} {unit}"),
        field: path.as_str().into(),
    }
}

/// kube's `field.TypeInvalid` (printed as "Invalid value").
pub(crate) fn type_invalid(path: &Path, value: &Value, detail: &str) -> Cause {
    let mut c = Cause::invalid(path.as_str(), value, detail);
    c.reason = "FieldValueTypeInvalid".into();
    c
}

// ---- lenient reads of kube's JSON form ---------------------------------------------------------

/// The string at `key`, "" when absent or not a string (Go's zero value).
pub(crate) fn get_str<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The boolean at `key`, false when absent.
pub(crate) fn get_bool(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// The value at `key` unless absent or null (Go decodes null into a nil pointer).
pub(crate) fn get_some<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// The array at `key`, empty when absent.
pub(crate) fn get_arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}
