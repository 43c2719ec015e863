//! kube's `validateCustomResourceDefinitionValidation` and
//! `ValidateCustomResourceDefinitionOpenAPISchema`: which OpenAPI v3 keywords a CRD schema may
//! use, the `x-kubernetes-*` extension rules, and the shape of `x-kubernetes-validations`.
//! The structural-schema rules live in [`super::structural`], defaults in [`super::defaults`].

use kapi_apimachinery::Cause;
use serde_json::Value;

use super::fieldpath::valid_field_path;
use super::schema_walk::{items, items_schema, non_empty_map, or_bool, properties, property, Items};
use super::{
    defaults, forbidden, get_arr, get_bool, get_some, get_str, invalid, invalid_str, not_supported, required,
    structural, Opts, Path,
};

const OPENAPI_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];
const VALIDATION_REASONS: &[&str] =
    &["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

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
    errs.extend(extension_rules(s, path, list_type, opts));
    if opts.require_map_list_keys_map_set_validation {
        errs.extend(map_list_keys_map_set(s, path));
    }
    errs.extend(validation_rule_shapes(s, path));
    if errs.len() == errs_before && ssv.rules_checked {
        cel.extend(old_self_rules(s, path, ssv));
    }
}

/// The `x-kubernetes-*` extension rules of one node.
fn extension_rules(s: &Value, path: &Path, list_type: Option<&str>, opts: &Opts) -> Vec<Cause> {
    let mut errs = Vec::new();
    let ty = get_str(s, "type");
    if get_some(s, "x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(false) {
        errs.push(invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    let map_type = get_some(s, "x-kubernetes-map-type").map(|v| v.as_str().unwrap_or(""));
    if let Some(mt) = map_type {
        let msg = "must be object if x-kubernetes-map-type is specified";
        if ty.is_empty() {
            errs.push(required(&path.child("type"), msg));
        } else if ty != "object" {
            errs.push(invalid_str(&path.child("type"), ty, msg));
        }
        if mt != "atomic" && mt != "granular" {
            errs.push(not_supported(&path.child("x-kubernetes-map-type"), mt, &["atomic", "granular"]));
        }
    }
    if list_type.is_some() && ty != "array" {
        let msg = "must be array if x-kubernetes-list-type is specified";
        if ty.is_empty() {
            errs.push(required(&path.child("type"), msg));
        } else {
            errs.push(invalid_str(&path.child("type"), ty, msg));
        }
    } else if opts.require_atomic_set_type && list_type == Some("set") {
        if let Some(is) = items_schema(s) {
            let msg = "must be atomic as item of a list with x-kubernetes-list-type=set";
            let item_list_type = get_some(is, "x-kubernetes-list-type");
            match get_str(is, "type") {
                "array" if item_list_type.is_some_and(|t| t.as_str() != Some("atomic")) => {
                    errs.push(invalid(
                        &path.child("items").child("x-kubernetes-list-type"),
                        item_list_type.unwrap_or(&Value::Null),
                        msg,
                    ));
                }
                "object" if get_some(is, "x-kubernetes-map-type").and_then(Value::as_str) != Some("atomic") => {
                    // kube shows the items' list type here
                    errs.push(invalid(
                        &path.child("items").child("x-kubernetes-map-type"),
                        item_list_type.unwrap_or(&Value::Null),
                        msg,
                    ));
                }
                _ => {}
            }
        }
    }
    if let Some(lt) = list_type {
        if !matches!(lt, "atomic" | "set" | "map") {
            errs.push(not_supported(&path.child("x-kubernetes-list-type"), lt, &["atomic", "set", "map"]));
        }
    }
    let keys = get_arr(s, "x-kubernetes-list-map-keys");
    if !keys.is_empty() {
        let msg = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errs.push(required(&path.child("x-kubernetes-list-type"), msg)),
            Some(lt) if lt != "map" => errs.push(invalid_str(&path.child("x-kubernetes-list-type"), lt, msg)),
            _ => {}
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(required(
                &path.child("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match items(s) {
            None => errs.push(required(&path.child("items"), "must have a schema if x-kubernetes-list-type is map")),
            Some(Items::Array(_)) => errs.push(invalid(
                &path.child("items"),
                s.get("items").unwrap_or(&Value::Null),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(Items::Schema(is)) => {
                let item_type = get_str(is, "type");
                if item_type != "object" {
                    errs.push(invalid_str(
                        &path.child("items").child("type"),
                        item_type,
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    let keys_value = Value::Array(keys.to_vec());
                    let mut seen: Vec<&str> = Vec::new();
                    for k in keys.iter().map(|k| k.as_str().unwrap_or("")) {
                        match property(is, k) {
                            Some(p) if matches!(get_str(p, "type"), "array" | "object") => errs.push(invalid_str(
                                &path.child("items").child("properties").key(k).child("type"),
                                item_type,
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            )),
                            Some(_) => {}
                            None => errs.push(invalid(
                                &path.child("x-kubernetes-list-map-keys"),
                                &keys_value,
                                "entries must all be names of item properties",
                            )),
                        }
                        if seen.contains(&k) {
                            errs.push(invalid(
                                &path.child("x-kubernetes-list-map-keys"),
                                &keys_value,
                                "must not contain duplicate entries",
                            ));
                        }
                        seen.push(k);
                    }
                }
            }
        }
    }
    errs
}

/// kube's `validateMapListKeysMapSet`: set and map items are not nullable; map keys are
/// required or defaulted, and not nullable.
pub(crate) fn map_list_keys_map_set(s: &Value, path: &Path) -> Vec<Cause> {
    let mut errs = Vec::new();
    let Some(is) = items_schema(s) else {
        return errs;
    };
    let lt = get_some(s, "x-kubernetes-list-type").and_then(Value::as_str).unwrap_or("");
    if lt != "set" && lt != "map" {
        return errs;
    }
    if get_bool(is, "nullable") {
        errs.push(forbidden(
            &path.child("items").child("nullable"),
            &format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
        ));
    }
    if lt == "map" {
        let required_keys: Vec<&str> = get_arr(is, "required").iter().filter_map(Value::as_str).collect();
        for k in get_arr(s, "x-kubernetes-list-map-keys").iter().map(|k| k.as_str().unwrap_or("")) {
            let Some(p) = property(is, k) else {
                continue;
            };
            let ppath = path.child("items").child("properties").key(k);
            if !required_keys.contains(&k) && get_some(p, "default").is_none() {
                errs.push(required(
                    &ppath.child("default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if get_bool(p, "nullable") {
                errs.push(forbidden(
                    &ppath.child("nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
    errs
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The checks kube makes on `x-kubernetes-validations` entries before compiling them.
fn validation_rule_shapes(s: &Value, path: &Path) -> Vec<Cause> {
    let mut errs = Vec::new();
    for (i, rule) in get_arr(s, "x-kubernetes-validations").iter().enumerate() {
        let rpath = path.child("x-kubernetes-validations").index(i);
        let (r, msg, msg_expr) = (get_str(rule, "rule"), get_str(rule, "message"), get_str(rule, "messageExpression"));
        let (tr, tm) = (r.trim(), msg.trim());
        if tr.is_empty() {
            errs.push(required(&rpath.child("rule"), "rule is not specified"));
        } else if !msg.is_empty() && tm.is_empty() {
            errs.push(invalid_str(&rpath.child("message"), msg, "must be non-empty if specified"));
        } else if has_newlines(tm) {
            errs.push(invalid_str(&rpath.child("message"), msg, "must not contain line breaks"));
        } else if has_newlines(tr) && tm.is_empty() {
            errs.push(required(&rpath.child("message"), "message must be specified if rule contains line breaks"));
        }
        if !msg_expr.is_empty() && msg_expr.trim().is_empty() {
            errs.push(required(&rpath.child("messageExpression"), "messageExpression must be non-empty if specified"));
        }
        if let Some(reason) = get_some(rule, "reason") {
            let reason = reason.as_str().unwrap_or("");
            if !VALIDATION_REASONS.contains(&reason) {
                errs.push(not_supported(&rpath.child("reason"), reason, VALIDATION_REASONS));
            }
        }
        let field_path = get_str(rule, "fieldPath");
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(invalid_str(&rpath.child("fieldPath"), field_path, "must be non-empty if specified"));
        }
        if has_newlines(field_path) {
            errs.push(invalid_str(&rpath.child("fieldPath"), field_path, "must not contain line breaks"));
        }
        if !field_path.is_empty()
            && structural::new_structural_error(s).is_none()
            && valid_field_path(field_path, Some(s), true).is_err()
        {
            errs.push(invalid_str(&rpath.child("fieldPath"), field_path, "must be a valid path"));
        }
    }
    errs
}

/// Whether a CEL rule refers to `oldSelf` (a lexical check standing in for the compiler's).
fn uses_old_self(rule: &str) -> bool {
    let b = rule.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    rule.match_indices("oldSelf")
        .any(|(i, m)| (i == 0 || !ident(b[i - 1])) && b.get(i + m.len()).is_none_or(|c| !ident(*c)))
}

/// The transition-rule checks kube makes after compiling: `oldSelf` only where old and new
/// values correlate, `optionalOldSelf` only with `oldSelf`.
fn old_self_rules(s: &Value, path: &Path, ssv: &Ssv) -> Vec<Cause> {
    let mut errs = Vec::new();
    for (i, rule) in get_arr(s, "x-kubernetes-validations").iter().enumerate() {
        let rpath = path.child("x-kubernetes-validations").index(i);
        let r = get_str(rule, "rule");
        if uses_old_self(r) {
            if let Some(p) = &ssv.uncorrelatable {
                errs.push(invalid_str(
                    &rpath.child("rule"),
                    r,
                    &format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {p}"),
                ));
            }
        } else if let Some(o) = get_some(rule, "optionalOldSelf") {
            errs.push(invalid(&rpath.child("optionalOldSelf"), o, "may not be set if oldSelf is not used in rule"));
        }
    }
    errs
}
