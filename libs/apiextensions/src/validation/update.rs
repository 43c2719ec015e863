//! Update validation: kube's `ValidateCustomResourceDefinitionUpdate`, whose options are
//! derived from the old object so that a CRD stored under older, looser rules (or by an older
//! server) stays updatable: a rule the old object already broke is not enforced on the update.

use kapi_apimachinery::validation::{validate_annotations, validate_labels, validate_owner_references};
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::crd::{validate_spec, Spec};
use super::extensions::map_list_keys_map_set;
use super::schema_walk::{crd_has_schema_with, items_schema, schema_has, version_schemas};
use super::{conversion, defaults, get_arr, get_some, get_str, invalid, names, structural, Opts, Path};

/// The whole update check, in kube's order.
pub(crate) fn validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    let opts = update_opts(new, old);
    let mut causes = validate_metadata_update(new, old);
    causes.extend(validate_spec(new, &opts));
    let spec = Path::new("spec");
    if opts.require_immutable_names {
        // these shape storage keys and the served kind
        causes.extend(immutable(new, old, "/spec/scope", &spec.child("scope")));
        causes.extend(immutable(new, old, "/spec/names/kind", &spec.child("names").child("kind")));
    }
    // the resource name, and so the object name, derive from these
    causes.extend(immutable(new, old, "/spec/group", &spec.child("group")));
    causes.extend(immutable(new, old, "/spec/names/plural", &spec.child("names").child("plural")));
    causes.extend(names::validate_status(new));
    causes.extend(names::validate_stored_versions(new));
    causes.extend(names::validate_api_approval(new, Some(old)));
    causes.extend(names::validate_preserve_unknown_fields(new, Some(old)));
    causes
}

/// kube's `ValidateImmutableField` on the string at `pointer`.
fn immutable(new: &Value, old: &Value, pointer: &str, path: &Path) -> Vec<Cause> {
    let s = |v: &Value| v.pointer(pointer).and_then(Value::as_str).unwrap_or("").to_string();
    if s(new) == s(old) {
        Vec::new()
    } else {
        vec![invalid(path, &Value::from(s(new)), "field is immutable")]
    }
}

/// kube's `ValidateObjectMetaUpdate` (without the resourceVersion and finalizer-while-deleting
/// checks, which the generic store makes): identity fields are immutable, generation never
/// decreases, labels, annotations and owner references stay valid.
pub(crate) fn validate_metadata_update(new: &Value, old: &Value) -> Vec<Cause> {
    static NULL: Value = Value::Null;
    let (nm, om) = (new.get("metadata").unwrap_or(&NULL), old.get("metadata").unwrap_or(&NULL));
    let meta = Path::new("metadata");
    let mut causes = Vec::new();
    let generation = |m: &Value| m.get("generation").and_then(Value::as_i64).unwrap_or(0);
    if generation(nm) < 0 {
        causes.push(invalid(
            &meta.child("generation"),
            &Value::from(generation(nm)),
            "must be greater than or equal to 0",
        ));
    }
    if generation(nm) < generation(om) {
        causes.push(invalid(&meta.child("generation"), &Value::from(generation(nm)), "must not be decremented"));
    }
    for key in ["name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"] {
        let (n, o) = (get_some(nm, key), get_some(om, key));
        let empty = |v: Option<&Value>| v.is_none_or(|x| x == "");
        if n != o && !(empty(n) && empty(o)) {
            causes.push(invalid(&meta.child(key), n.unwrap_or(&Value::from("")), "field is immutable"));
        }
    }
    causes.extend(validate_labels(nm.get("labels").and_then(Value::as_object), "metadata.labels"));
    causes.extend(validate_annotations(nm.get("annotations").and_then(Value::as_object), "metadata.annotations"));
    causes.extend(validate_owner_references(nm.get("ownerReferences"), "metadata.ownerReferences"));
    causes
}

fn established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| get_str(c, "type") == "Established")
        .is_some_and(|c| get_str(c, "status") == "True")
}

/// kube's update options, each relaxed when the old object already breaks the rule.
fn update_opts(new: &Value, old: &Value) -> Opts {
    let old_review_versions =
        old.pointer("/spec/conversion/webhook/conversionReviewVersions").and_then(Value::as_array);
    let old_schemas = version_schemas(old);
    let non_structural = |s: &Value| {
        structural::new_structural_error(s).is_some() || !structural::validate_structural(&Path::new(""), s).is_empty()
    };
    let unpruned_defaults = |s: &Value| {
        schema_has(s, &|x| get_some(x, "default").is_some())
            && !non_structural(s)
            && defaults::validate_defaults(&Path::new(""), s, true)
                .iter()
                .any(|c| c.message.ends_with("must not have unknown fields"))
    };
    Opts {
        allow_defaults: true,
        require_recognized_conversion_review_version: old_review_versions
            .is_none_or(|v| conversion::has_valid_review_version_or_empty(v)),
        require_immutable_names: established(old),
        require_openapi_schema: get_arr(old.get("spec").unwrap_or(&Value::Null), "versions")
            .iter()
            .all(|v| get_some(v, "schema").and_then(|s| get_some(s, "openAPIV3Schema")).is_some()),
        require_valid_property_type: !crd_has_schema_with(old, &|s| schema_has(s, &has_invalid_type)),
        require_structural_schema: !old_schemas.iter().any(|s| non_structural(s)),
        require_pruned_defaults: !old_schemas.iter().any(|s| unpruned_defaults(s)),
        require_atomic_set_type: !crd_has_schema_with(old, &|s| schema_has(s, &non_atomic_set)),
        require_map_list_keys_map_set_validation: !crd_has_schema_with(old, &|s| {
            schema_has(s, &|x| !map_list_keys_map_set(x, &Path::new("")).is_empty())
        }),
        allow_invalid_ca_bundle: allow_invalid_ca_bundle(old),
        allow_too_many_selectable_fields: too_many_selectable_allowed(new, old),
    }
}

fn has_invalid_type(s: &Value) -> bool {
    let t = get_str(s, "type");
    !t.is_empty() && !matches!(t, "string" | "number" | "integer" | "boolean" | "array" | "object")
}

/// kube's `hasNonAtomicSetType` predicate: a set whose items are not atomic.
fn non_atomic_set(s: &Value) -> bool {
    if get_some(s, "x-kubernetes-list-type").and_then(Value::as_str) != Some("set") {
        return false;
    }
    let Some(is) = items_schema(s) else {
        return false;
    };
    match get_str(is, "type") {
        "array" => get_some(is, "x-kubernetes-list-type").is_some_and(|t| t.as_str() != Some("atomic")),
        "object" => get_some(is, "x-kubernetes-map-type").and_then(Value::as_str) != Some("atomic"),
        _ => false,
    }
}

/// An invalid CA bundle may stay while the CRD is not Established or if it was already invalid.
fn allow_invalid_ca_bundle(old: &Value) -> bool {
    if !established(old) {
        return true;
    }
    let ca = old.pointer("/spec/conversion/webhook/clientConfig/caBundle").and_then(Value::as_str).unwrap_or("");
    if ca.is_empty() {
        return false;
    }
    // reuse the create-time check: does the old bundle fail it?
    let probe = serde_json::json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x", "caBundle": ca}, "conversionReviewVersions": ["v1"]}});
    let strict = Opts { allow_invalid_ca_bundle: false, ..Opts::create() };
    !conversion::validate_conversion(Some(&probe), &Path::new("c"), &strict).is_empty()
}

/// Versions ("" = top level) whose selectable fields exceed the limit but are unchanged.
fn too_many_selectable_allowed(new: &Value, old: &Value) -> Vec<String> {
    const MAX: usize = 8;
    let (ns, os) = (Spec::from_crd(new), Spec::from_crd(old));
    let mut out = Vec::new();
    if os.selectable_fields.len() > MAX && ns.selectable_fields == os.selectable_fields {
        out.push(String::new());
    }
    for v in &ns.versions {
        if let Some(ov) = os.versions.iter().find(|o| o.name == v.name) {
            if ov.selectable_fields.len() > MAX && v.selectable_fields == ov.selectable_fields {
                out.push(v.name.to_string());
            }
        }
    }
    out
}
