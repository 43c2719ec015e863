//! The internal view of a v1 CRD spec (kube's v1 -> internal conversion) and kube's
//! `validateCustomResourceDefinitionSpec`.
//!
//! The conversion copies `versions[0].name` to `spec.version` and hoists per-version fields
//! that are identical across all versions to the top level; validation then reports them under
//! the top-level paths. Doing the same here keeps every field path as kube prints it.

use kapi_apimachinery::validation::{is_dns1035_label, is_dns1123_subdomain};
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::schema_walk::{crd_has_schema_with, schema_has};
use super::{
    columns, conversion, get_arr, get_bool, get_some, get_str, invalid, invalid_str, names, not_supported, openapi,
    required, Opts, Path,
};

/// One entry of `spec.versions` after hoisting: per-version fields are `None`/empty when the
/// conversion moved them to the top level.
pub(crate) struct Version<'a> {
    pub name: &'a str,
    pub storage: bool,
    pub deprecated: bool,
    pub deprecation_warning: Option<&'a Value>,
    pub schema: Option<&'a Value>,
    pub subresources: Option<&'a Value>,
    pub columns: &'a [Value],
    pub selectable_fields: &'a [Value],
}

/// The internal `CustomResourceDefinitionSpec`: top-level fields set by hoisting.
pub(crate) struct Spec<'a> {
    pub raw: &'a Value,
    pub validation: Option<&'a Value>,
    pub subresources: Option<&'a Value>,
    pub columns: &'a [Value],
    pub selectable_fields: &'a [Value],
    pub versions: Vec<Version<'a>>,
}

/// Go's semantic equality treats absent, null and (for lists) empty alike.
fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    fn norm(v: Option<&Value>) -> Option<&Value> {
        v.filter(|x| !x.is_null() && x.as_array().is_none_or(|a| !a.is_empty()))
    }
    norm(a) == norm(b)
}

impl<'a> Spec<'a> {
    pub(crate) fn from_crd(crd: &'a Value) -> Self {
        static NULL: Value = Value::Null;
        let raw = crd.get("spec").unwrap_or(&NULL);
        let versions_raw = get_arr(raw, "versions");
        let identical = |key: &str| {
            versions_raw.first().is_some_and(|first| versions_raw.iter().all(|v| same(v.get(key), first.get(key))))
        };
        let (hoist_schema, hoist_sub, hoist_cols, hoist_sel) = (
            identical("schema"),
            identical("subresources"),
            identical("additionalPrinterColumns"),
            identical("selectableFields"),
        );
        let first = versions_raw.first();
        let top = |hoisted: bool, key: &str| {
            if hoisted {
                first.and_then(|f| get_some(f, key))
            } else {
                None
            }
        };
        let top_arr = |hoisted: bool, key: &str| {
            if hoisted {
                first.map(|f| get_arr(f, key)).unwrap_or(&[])
            } else {
                &[]
            }
        };
        let versions = versions_raw
            .iter()
            .map(|v| Version {
                name: get_str(v, "name"),
                storage: get_bool(v, "storage"),
                deprecated: get_bool(v, "deprecated"),
                deprecation_warning: get_some(v, "deprecationWarning"),
                schema: if hoist_schema { None } else { get_some(v, "schema") },
                subresources: if hoist_sub { None } else { get_some(v, "subresources") },
                columns: if hoist_cols { &[] } else { get_arr(v, "additionalPrinterColumns") },
                selectable_fields: if hoist_sel { &[] } else { get_arr(v, "selectableFields") },
            })
            .collect();
        Spec {
            raw,
            validation: top(hoist_schema, "schema"),
            subresources: top(hoist_sub, "subresources"),
            columns: top_arr(hoist_cols, "additionalPrinterColumns"),
            selectable_fields: top_arr(hoist_sel, "selectableFields"),
            versions,
        }
    }

    fn preserve_unknown_fields(&self) -> bool {
        get_bool(self.raw, "preserveUnknownFields")
    }

    fn has_per_version_subresources(&self) -> bool {
        self.versions.iter().any(|v| v.subresources.is_some())
    }

    /// kube's `getSubresourcesForVersion`.
    fn subresources_for(&self, v: &Version<'a>) -> Option<&'a Value> {
        if self.has_per_version_subresources() {
            v.subresources
        } else {
            self.subresources
        }
    }

    /// kube's `hasAnyStatusEnabled`.
    fn any_status_enabled(&self) -> bool {
        has_status(self.subresources) || self.versions.iter().any(|v| has_status(v.subresources))
    }
}

fn has_status(sub: Option<&Value>) -> bool {
    sub.and_then(|s| get_some(s, "status")).is_some()
}

fn open_api_schema(validation: Option<&Value>) -> Option<&Value> {
    validation.and_then(|v| get_some(v, "openAPIV3Schema"))
}

/// The v1 versions list, shown where kube prints `spec.Versions`.
fn versions_value(spec: &Spec) -> Value {
    spec.raw.get("versions").cloned().unwrap_or(Value::Null)
}

/// kube's `validateCustomResourceDefinitionSpec`.
pub(crate) fn validate_spec(crd: &Value, opts: &Opts) -> Vec<Cause> {
    let spec = Spec::from_crd(crd);
    let root = Path::new("spec");
    let mut opts = opts.clone();
    let mut causes = Vec::new();

    let group = get_str(spec.raw, "group");
    if group.is_empty() {
        causes.push(required(&root.child("group"), ""));
    } else {
        let errs = is_dns1123_subdomain(group);
        if !errs.is_empty() {
            causes.push(invalid_str(&root.child("group"), group, &errs.join(",")));
        } else if group.split('.').count() < 2 {
            causes.push(invalid_str(&root.child("group"), group, "should be a domain with at least one dot"));
        }
    }
    causes.extend(enum_strings(&root.child("scope"), get_str(spec.raw, "scope"), &["Cluster", "Namespaced"]));

    let preserve = spec.preserve_unknown_fields();
    if !preserve {
        // pruning needs structural schemas
        opts.require_structural_schema = true;
    }
    if open_api_schema(spec.validation).is_none() {
        for (i, v) in spec.versions.iter().enumerate() {
            let missing = open_api_schema(v.schema).is_none();
            let served = get_bool(&get_arr(spec.raw, "versions")[i], "served");
            let path = root.child("versions").index(i).child("schema").child("openAPIV3Schema");
            if opts.require_openapi_schema && missing {
                causes.push(required(&path, ""));
            } else if !opts.require_openapi_schema && !preserve && served && missing {
                causes.push(required(&path, "because otherwise all fields are pruned"));
            }
        }
    }
    let has_defaults = crd_has_schema_with(crd, &|s| schema_has(s, &|x| get_some(x, "default").is_some()));
    if opts.allow_defaults && has_defaults {
        opts.require_structural_schema = true;
        if preserve {
            causes.push(invalid(
                &root.child("preserveUnknownFields"),
                &Value::Bool(true),
                "must be false in order to use defaults in the schema",
            ));
        }
    }
    if crd_has_schema_with(crd, &|s| schema_has(s, &has_kubernetes_extensions)) {
        opts.require_structural_schema = true;
    }

    let mut storage_count = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, v) in spec.versions.iter().enumerate() {
        let vpath = root.child("versions").index(i);
        if v.storage {
            storage_count += 1;
        }
        if seen.contains(&v.name) {
            unique = false;
        } else {
            seen.push(v.name);
        }
        let errs = is_dns1035_label(v.name);
        if !errs.is_empty() {
            causes.push(invalid_str(&vpath.child("name"), v.name, &errs.join(",")));
        }
        causes.extend(validate_version(&spec, v, &vpath, &opts));
    }
    // kube's "top-level and per-version ... mutually exclusive" and "per-version ... may not
    // all be set to identical values" cannot fire for a v1 object: hoisting is all or nothing.
    if !unique {
        causes.push(invalid(&root.child("versions"), &versions_value(&spec), "must contain unique version names"));
    }
    if storage_count != 1 {
        causes.push(invalid(
            &root.child("versions"),
            &versions_value(&spec),
            "must have exactly one version marked as storage version",
        ));
    }
    // The conversion sets spec.version to versions[0].name; kube checks it again.
    if let Some(first) = spec.versions.first().filter(|v| !v.name.is_empty()) {
        let errs = is_dns1035_label(first.name);
        if !errs.is_empty() {
            causes.push(invalid_str(&root.child("version"), first.name, &errs.join(",")));
        }
    }

    let names_value = spec.raw.get("names").cloned().unwrap_or(Value::Null);
    for key in ["plural", "singular", "kind", "listKind"] {
        if get_str(&names_value, key).is_empty() {
            causes.push(required(&root.child("names").child(key), ""));
        }
    }
    causes.extend(names::validate_names(&names_value, &root.child("names")));
    causes.extend(openapi::validate_validation(
        spec.validation,
        spec.any_status_enabled(),
        &opts,
        &root.child("validation"),
    ));
    causes.extend(columns::validate_subresources(spec.subresources, &root.child("subresources")));
    for (i, col) in spec.columns.iter().enumerate() {
        causes.extend(columns::validate_column(col, &root.child("additionalPrinterColumns").index(i)));
    }
    if !spec.selectable_fields.is_empty() {
        let path = root.child("selectableFields");
        match spec.validation {
            None => causes.push(invalid_str(&path, "", "may only be set when validations.schema is included")),
            Some(validation) => {
                let schema = open_api_schema(Some(validation));
                if let Some(err) = schema.and_then(super::structural::new_structural_error) {
                    causes.push(invalid_str(&root.child("schema.openAPIV3Schema"), "", &err));
                }
                causes.extend(columns::validate_selectable_fields(spec.selectable_fields, schema, &path, &opts, ""));
            }
        }
    }

    let conv = get_some(spec.raw, "conversion");
    let strategy = conv.map(|c| get_str(c, "strategy")).unwrap_or("");
    if conv.is_some() && strategy != "None" && preserve {
        causes.push(invalid_str(
            &root.child("conversion").child("strategy"),
            strategy,
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    causes.extend(conversion::validate_conversion(conv, &root.child("conversion"), &opts));
    causes
}

/// kube's `validateCustomResourceDefinitionVersion`.
fn validate_version(spec: &Spec, v: &Version, path: &Path, opts: &Opts) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(w) = v.deprecation_warning {
        for msg in names::deprecation_warning_errors(v.deprecated, w.as_str().unwrap_or("")) {
            causes.push(invalid(&path.child("deprecationWarning"), w, &msg));
        }
    }
    let status_enabled = has_status(spec.subresources_for(v));
    causes.extend(openapi::validate_validation(v.schema, status_enabled, opts, &path.child("schema")));
    causes.extend(columns::validate_subresources(v.subresources, &path.child("subresources")));
    for (i, col) in v.columns.iter().enumerate() {
        causes.extend(columns::validate_column(col, &path.child("additionalPrinterColumns").index(i)));
    }
    if !v.selectable_fields.is_empty() {
        let fpath = path.child("selectableFields");
        match open_api_schema(v.schema) {
            None => causes.push(invalid_str(
                &fpath,
                "",
                "may only be set when `version.schema.openAPIV3Schema` is not included",
            )),
            Some(schema) => {
                if let Some(err) = super::structural::new_structural_error(schema) {
                    causes.push(invalid_str(&path.child("schema.openAPIV3Schema"), "", &err));
                }
                causes.extend(columns::validate_selectable_fields(
                    v.selectable_fields,
                    Some(schema),
                    &fpath,
                    opts,
                    v.name,
                ));
            }
        }
    }
    causes
}

/// kube's `validateEnumStrings` for a required enumerated string.
pub(crate) fn enum_strings(path: &Path, value: &str, accepted: &[&str]) -> Vec<Cause> {
    if value.is_empty() {
        vec![required(path, "")]
    } else if accepted.contains(&value) {
        Vec::new()
    } else {
        vec![not_supported(path, value, accepted)]
    }
}

/// kube's `schemaHasKubernetesExtensions` predicate for one node.
fn has_kubernetes_extensions(s: &Value) -> bool {
    get_bool(s, "x-kubernetes-embedded-resource")
        || get_some(s, "x-kubernetes-preserve-unknown-fields").is_some()
        || get_bool(s, "x-kubernetes-int-or-string")
        || !get_arr(s, "x-kubernetes-list-map-keys").is_empty()
        || get_some(s, "x-kubernetes-list-type").is_some()
        || !get_arr(s, "x-kubernetes-validations").is_empty()
}
