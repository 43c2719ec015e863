//! kube's `validateCustomResourceDefinitionValidation` and
//! `ValidateCustomResourceDefinitionOpenAPISchema`: which OpenAPI v3 keywords a CRD schema may
//! use, the `x-kubernetes-*` extension rules, and the shape of `x-kubernetes-validations`.
//! The structural-schema rules live in [`super::structural`], defaults in [`super::defaults`].

use kapi_apimachinery::Cause;
use serde_json::Value;

use super::schema_walk::{items, non_empty_map, or_bool, properties, Items};
use super::{
    defaults, forbidden, get_arr, get_bool, get_some, get_str, invalid, invalid_str, not_supported, structural, Opts,
    Path,
};
use super::{extensions, rules};

const OPENAPI_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// kube's `JSONSchemaProps` fields in declaration order: (JSON key, Go name, allowed at the
/// root when the status subresource is enabled).
const ROOT_FIELDS: &[(&str, &str, bool)] = &[
    ("id", "ID", false),
    ("$schema", "Schema", false),
    ("$ref", "Ref", false),
    ("description", "Description", true),
    ("type", "Type", true),
    ("nullable", "Nullable", false),
    ("format", "Format", true),
    ("title", "Title", true),
    ("default", "Default", false),
    ("maximum", "Maximum", true),
    ("exclusiveMaximum", "ExclusiveMaximum", true),
    ("minimum", "Minimum", true),
    ("exclusiveMinimum", "ExclusiveMinimum", true),
    ("maxLength", "MaxLength", true),
    ("minLength", "MinLength", true),
    ("pattern", "Pattern", true),
    ("maxItems", "MaxItems", true),
    ("minItems", "MinItems", true),
    ("uniqueItems", "UniqueItems", true),
    ("multipleOf", "MultipleOf", true),
    ("enum", "Enum", false),
    ("maxProperties", "MaxProperties", false),
    ("minProperties", "MinProperties", false),
    ("required", "Required", true),
    ("items", "Items", true),
    ("allOf", "AllOf", false),
    ("oneOf", "OneOf", false),
    ("anyOf", "AnyOf", false),
    ("not", "Not", false),
    ("properties", "Properties", true),
    ("additionalProperties", "AdditionalProperties", false),
    ("patternProperties", "PatternProperties", false),
    ("dependencies", "Dependencies", false),
    ("additionalItems", "AdditionalItems", false),
    ("definitions", "Definitions", false),
    ("externalDocs", "ExternalDocs", true),
    ("example", "Example", true),
    ("x-kubernetes-preserve-unknown-fields", "XPreserveUnknownFields", true),
    ("x-kubernetes-embedded-resource", "XEmbeddedResource", false),
    ("x-kubernetes-int-or-string", "XIntOrString", false),
    ("x-kubernetes-list-map-keys", "XListMapKeys", false),
    ("x-kubernetes-list-type", "XListType", false),
    ("x-kubernetes-map-type", "XMapType", false),
    ("x-kubernetes-validations", "XValidations", true),
];

/// Whether the Go field behind `v` holds its zero value (false, "", nil).
fn is_zero(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

/// kube's `validateCustomResourceDefinitionValidation` for one `CustomResourceValidation`
/// (`{openAPIV3Schema: ...}`) at `path` (`spec.validation` or `spec.versions[i].schema`).
pub(crate) fn validate_validation(
    validation: Option<&Value>,
    status_enabled: bool,
    opts: &Opts,
    path: &Path,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(schema) = validation.and_then(|v| get_some(v, "openAPIV3Schema")) else {
        return causes;
    };
    if status_enabled {
        // status is validated as properties["status"], so the root may only carry keywords
        // that survive that extraction
        for (key, go_name, allowed) in ROOT_FIELDS {
            let v = schema.get(*key);
            if is_zero(v) {
                continue;
            }
            if *go_name == "Type" {
                if get_str(schema, "type") != "object" {
                    causes.push(invalid(
                        &path.child("openAPIV3Schema.type"),
                        v.unwrap_or(&Value::Null),
                        r#"only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#,
                    ));
                    break;
                }
                continue;
            }
            if !allowed {
                let names: Vec<&str> = ROOT_FIELDS.iter().filter(|f| f.2).map(|f| f.1).collect();
                causes.push(invalid(
                    &path.child("openAPIV3Schema"),
                    schema,
                    &format!(
                        "only [{}] fields are allowed at the root of the schema if the status subresource is enabled",
                        names.join(" ")
                    ),
                ));
                break;
            }
        }
    }
    if get_bool(schema, "nullable") {
        causes.push(forbidden(&path.child("openAPIV3Schema.nullable"), "nullable cannot be true at the root"));
    }
    let schema_path = path.child("openAPIV3Schema");
    let mut init_errs = Vec::new();
    let mut rules_checked = false;
    if opts.require_structural_schema {
        if let Some(err) = structural::new_structural_error(schema) {
            // overlaps with the keyword checks below: shown only when they find nothing
            init_errs.push(invalid_str(&schema_path, "", &err));
        } else {
            let errs = structural::validate_structural(&schema_path, schema);
            if !errs.is_empty() {
                causes.extend(errs);
            } else {
                let errs = defaults::validate_defaults(&schema_path, schema, opts.require_pruned_defaults);
                rules_checked = errs.is_empty();
                causes.extend(errs);
            }
        }
    }
    let ssv = Ssv {
        allow_defaults: opts.allow_defaults,
        disallow_reason: String::new(),
        inside_resource_meta: false,
        require_valid_property_type: opts.require_valid_property_type,
        uncorrelatable: None,
        rules_checked,
    };
    let mut schema_errs = Vec::new();
    let mut cel_errs = Vec::new();
    validate_openapi_schema(schema, &schema_path, &ssv, true, opts, &mut schema_errs, &mut cel_errs);
    if rules_checked && schema_errs.is_empty() {
        // CEL compilation and cost checks, only on schemas whose keywords are all valid
        cel_errs.extend(crate::cel::validate_crd_schema(schema, schema_path.as_str(), false));
    }
    causes.extend(schema_errs);
    causes.extend(cel_errs);
    if causes.is_empty() {
        causes.extend(init_errs);
    }
    causes
}

/// kube's `specStandardValidatorV3` state threaded through the recursion.
#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    disallow_reason: String,
    inside_resource_meta: bool,
    require_valid_property_type: bool,
    /// The highest ancestor below which old and new values cannot be correlated.
    uncorrelatable: Option<Path>,
    /// kube looks at rules (its CEL context) only when the schema is structural with valid
    /// defaults.
    rules_checked: bool,
}

impl Ssv {
    fn forbid_defaults(&self, reason: &str) -> Self {
        Self { allow_defaults: false, disallow_reason: reason.to_string(), ..self.clone() }
    }

    fn inside_meta(&self) -> Self {
        Self { inside_resource_meta: true, ..self.clone() }
    }

    fn forbid_old_self(&self, path: &Path) -> Self {
        if self.uncorrelatable.is_some() {
            return self.clone();
        }
        Self { uncorrelatable: Some(path.clone()), ..self.clone() }
    }

    /// kube's `specStandardValidatorV3.validate`: unsupported keywords.
    fn validate(&self, s: &Value, path: &Path) -> Vec<Cause> {
        let mut causes = Vec::new();
        let ty = get_str(s, "type");
        if self.require_valid_property_type && !ty.is_empty() && !OPENAPI_TYPES.contains(&ty) {
            causes.push(not_supported(&path.child("type"), ty, OPENAPI_TYPES));
        }
        if get_some(s, "default").is_some() && !self.allow_defaults {
            let mut detail = "must not be set".to_string();
            if !self.disallow_reason.is_empty() {
                detail = format!("{detail} {}", self.disallow_reason);
            }
            causes.push(forbidden(&path.child("default"), &detail));
        }
        if !get_str(s, "id").is_empty() {
            causes.push(forbidden(&path.child("id"), "id is not supported"));
        }
        if get_some(s, "additionalItems").is_some() {
            causes.push(forbidden(&path.child("additionalItems"), "additionalItems is not supported"));
        }
        if non_empty_map(s, "patternProperties") {
            causes.push(forbidden(&path.child("patternProperties"), "patternProperties is not supported"));
        }
        if non_empty_map(s, "definitions") {
            causes.push(forbidden(&path.child("definitions"), "definitions is not supported"));
        }
        if get_some(s, "dependencies").is_some() {
            causes.push(forbidden(&path.child("dependencies"), "dependencies is not supported"));
        }
        if get_some(s, "$ref").is_some() {
            causes.push(forbidden(&path.child("$ref"), "$ref is not supported"));
        }
        if ty == "null" {
            causes.push(forbidden(&path.child("type"), "type cannot be set to null, use nullable as an alternative"));
        }
        if matches!(items(s), Some(Items::Array(a)) if !a.is_empty()) {
            causes.push(forbidden(&path.child("items"), "items must be a schema object and not an array"));
        }
        if self.inside_resource_meta && get_bool(s, "x-kubernetes-embedded-resource") {
            causes.push(forbidden(
                &path.child("x-kubernetes-embedded-resource"),
                "must not be used inside of resource meta",
            ));
        }
        causes
    }
}

fn validate_openapi_schema(
    s: &Value,
    path: &Path,
    ssv: &Ssv,
    is_root: bool,
    opts: &Opts,
    errs: &mut Vec<Cause>,
    cel: &mut Vec<Cause>,
) {
    if !s.is_object() {
        return;
    }
    let errs_before = errs.len();
    errs.extend(ssv.validate(s, path));
    if get_bool(s, "uniqueItems") {
        errs.push(forbidden(
            &path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let has_properties = properties(s).next().is_some();
    if let Some(ap) = or_bool(s, "additionalProperties") {
        if has_properties && (!ap.allows() || ap.schema().is_some()) {
            errs.push(forbidden(
                &path.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ssv.inside_resource_meta {
            // pruning without the value is ambiguous there
            ssv.forbid_defaults("inside additionalProperties applying to object metadata")
        } else {
            ssv.clone()
        };
        if let Some(aps) = ap.schema() {
            validate_openapi_schema(aps, &path.child("additionalProperties"), &sub, false, opts, errs, cel);
        }
    }
    let map_type = get_some(s, "x-kubernetes-map-type").map(|v| v.as_str().unwrap_or(""));
    for (name, prop) in properties(s) {
        let mut sub = ssv.clone();
        if map_type.is_some_and(|t| t != "granular" && t != "atomic") {
            sub = sub.forbid_old_self(path);
        }
        if (is_root || get_bool(s, "x-kubernetes-embedded-resource"))
            && matches!(name.as_str(), "metadata" | "kind" | "apiVersion")
        {
            sub = sub.inside_meta();
            if is_root {
                sub = sub.forbid_defaults(&format!("in top-level {name}"));
            }
        }
        validate_openapi_schema(prop, &path.child("properties").key(name), &sub, false, opts, errs, cel);
    }
    if let Some(not) = get_some(s, "not") {
        validate_openapi_schema(not, &path.child("not"), ssv, false, opts, errs, cel);
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        for (i, x) in get_arr(s, key).iter().enumerate() {
            validate_openapi_schema(x, &path.child(key).index(i), ssv, false, opts, errs, cel);
        }
    }
    if let Some(defs) = s.get("definitions").and_then(Value::as_object) {
        for (k, x) in defs {
            validate_openapi_schema(x, &path.child("definitions").key(k), ssv, false, opts, errs, cel);
        }
    }
    let list_type = get_some(s, "x-kubernetes-list-type").map(|v| v.as_str().unwrap_or(""));
    if let Some(it) = items(s) {
        let sub = if list_type != Some("map") { ssv.forbid_old_self(path) } else { ssv.clone() };
        match it {
            Items::Schema(x) => validate_openapi_schema(x, &path.child("items"), &sub, false, opts, errs, cel),
            Items::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    validate_openapi_schema(x, &path.child("items").index(i), &sub, false, opts, errs, cel);
                }
            }
        }
    }
    if let Some(deps) = s.get("dependencies").and_then(Value::as_object) {
        for (k, x) in deps.iter().filter(|(_, x)| x.is_object()) {
            validate_openapi_schema(x, &path.child("dependencies").key(k), ssv, false, opts, errs, cel);
        }
    }
    errs.extend(extensions::extension_rules(s, path, list_type, opts));
    if opts.require_map_list_keys_map_set_validation {
        errs.extend(extensions::map_list_keys_map_set(s, path));
    }
    errs.extend(rules::validation_rule_shapes(s, path));
    if errs.len() == errs_before && ssv.rules_checked {
        cel.extend(rules::old_self_rules(s, path, ssv.uncorrelatable.as_ref()));
    }
}
