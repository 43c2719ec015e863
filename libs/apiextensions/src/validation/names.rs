//! Names: `metadata.name` = `<plural>.<group>`, `spec.names` / `status.acceptedNames`
//! (kube's `ValidateCustomResourceDefinitionNames`), `status.storedVersions`, the API-approval
//! annotation of protected groups, `spec.preserveUnknownFields`, and version deprecation
//! warnings.

use kapi_apimachinery::validation::{is_dns1035_label, validate_object_meta, NameRule};
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::{get_arr, get_bool, get_str, invalid, invalid_str, required, Path};

const MISMATCH: &str = r#"must be spec.names.plural+"."+spec.group"#;

/// kube's `ValidateObjectMeta` with the CRD name function: a DNS subdomain that must equal
/// `spec.names.plural + "." + spec.group` (checked for `generateName` too, as kube does).
pub(crate) fn validate_metadata_create(crd: &Value) -> Vec<Cause> {
    let meta = crd.get("metadata").cloned().unwrap_or(Value::Null);
    let wanted = format!(
        "{}.{}",
        crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or(""),
        crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or("")
    );
    let causes = validate_object_meta(&meta, false, NameRule::Dns1123Subdomain);
    let (mut generate, mut name, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    for c in causes {
        match c.field.as_str() {
            "metadata.generateName" => generate.push(c),
            "metadata.name" => name.push(c),
            _ => rest.push(c),
        }
    }
    let generate_name = get_str(&meta, "generateName");
    if !generate_name.is_empty() && generate_name != wanted {
        generate.push(invalid_str(&Path::new("metadata.generateName"), generate_name, MISMATCH));
    }
    let n = get_str(&meta, "name");
    if !n.is_empty() && n != wanted {
        name.push(invalid_str(&Path::new("metadata.name"), n, MISMATCH));
    }
    generate.extend(name);
    generate.extend(rest);
    generate
}

/// kube's `ValidateCustomResourceDefinitionNames`: DNS-1035 labels; kind and listKind may be
/// mixed case and must differ.
pub(crate) fn validate_names(names: &Value, path: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    for key in ["plural", "singular"] {
        let v = get_str(names, key);
        let errs = is_dns1035_label(v);
        if !v.is_empty() && !errs.is_empty() {
            causes.push(invalid_str(&path.child(key), v, &errs.join(",")));
        }
    }
    for key in ["kind", "listKind"] {
        let v = get_str(names, key);
        let errs = is_dns1035_label(&v.to_lowercase());
        if !v.is_empty() && !errs.is_empty() {
            let msg = format!("may have mixed case, but should otherwise match: {}", errs.join(","));
            causes.push(invalid_str(&path.child(key), v, &msg));
        }
    }
    for (i, short) in get_arr(names, "shortNames").iter().enumerate() {
        let s = short.as_str().unwrap_or("");
        let errs = is_dns1035_label(s);
        if !errs.is_empty() {
            causes.push(invalid_str(&path.child("shortNames").index(i), s, &errs.join(",")));
        }
    }
    let (kind, list_kind) = (get_str(names, "kind"), get_str(names, "listKind"));
    if !kind.is_empty() && kind == list_kind {
        causes.push(invalid_str(&path.child("listKind"), list_kind, "kind and listKind may not be the same"));
    }
    for (i, cat) in get_arr(names, "categories").iter().enumerate() {
        let s = cat.as_str().unwrap_or("");
        let errs = is_dns1035_label(s);
        if !errs.is_empty() {
            causes.push(invalid_str(&path.child("categories").index(i), s, &errs.join(",")));
        }
    }
    causes
}

/// kube's `ValidateCustomResourceDefinitionStatus`: the accepted names.
pub(crate) fn validate_status(crd: &Value) -> Vec<Cause> {
    let accepted = crd.pointer("/status/acceptedNames").cloned().unwrap_or(Value::Null);
    validate_names(&accepted, &Path::new("status").child("acceptedNames"))
}

/// kube's `ValidateCustomResourceDefinitionStoredVersions`: the storage version is recorded,
/// and nothing once stored has left `spec.versions` (its data may still be in storage).
pub(crate) fn validate_stored_versions(crd: &Value) -> Vec<Cause> {
    let path = Path::new("status").child("storedVersions");
    let stored_value = crd.pointer("/status/storedVersions").cloned().unwrap_or(Value::Null);
    let stored: Vec<&str> = stored_value.as_array().into_iter().flatten().map(|v| v.as_str().unwrap_or("")).collect();
    if stored.is_empty() {
        return vec![invalid(&path, &stored_value, "must have at least one stored version")];
    }
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let mut causes = Vec::new();
    let mut remaining: Vec<(usize, &str)> = Vec::new();
    for (i, v) in stored.iter().enumerate() {
        // a later duplicate index wins, as in kube's map
        remaining.retain(|(_, x)| x != v);
        remaining.push((i, v));
    }
    for v in versions {
        let name = get_str(v, "name");
        let found = remaining.iter().any(|(_, x)| *x == name);
        if get_bool(v, "storage") && !found {
            causes.push(invalid(&path, &stored_value, &format!("must have the storage version {name}")));
        }
        remaining.retain(|(_, x)| *x != name);
    }
    remaining.sort_by_key(|(i, _)| *i);
    for (i, v) in remaining {
        causes.push(invalid_str(
            &path.index(i),
            v,
            &format!(
                "missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"
            ),
        ));
    }
    causes
}

const APPROVAL: &str = "api-approved.kubernetes.io";

#[derive(PartialEq, Eq, Clone, Copy)]
enum Approval {
    Invalid,
    Approved,
    Bypassed,
    Missing,
}

fn approval_state(crd: &Value) -> (Approval, String) {
    let annotation =
        crd.pointer("/metadata/annotations").and_then(|a| a.get(APPROVAL)).and_then(Value::as_str).unwrap_or("");
    if annotation.is_empty() {
        return (
            Approval::Missing,
            format!("protected groups must have approval annotation \"{APPROVAL}\", see https://github.com/kubernetes/enhancements/pull/1111"),
        );
    }
    if annotation.starts_with("unapproved") {
        return (Approval::Bypassed, format!("not approved: {annotation:?}"));
    }
    if is_absolute_url_with_host(annotation) {
        return (Approval::Approved, format!("approved in {annotation}"));
    }
    (
        Approval::Invalid,
        format!(
            "protected groups must have approval annotation \"{APPROVAL}\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
        ),
    )
}

/// Go's `url.ParseRequestURI` succeeding with a scheme and a host.
fn is_absolute_url_with_host(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let scheme_ok = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    let Some(authority) = rest.strip_prefix("//") else {
        return false;
    };
    let host = authority.split(['/', '?']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or("");
    scheme_ok && !host.is_empty() && !s.contains(|c: char| c.is_control() || c == ' ')
}

fn is_protected_group(group: &str) -> bool {
    group == "k8s.io" || group.ends_with(".k8s.io") || group == "kubernetes.io" || group.ends_with(".kubernetes.io")
}

/// kube's `validateAPIApproval`: CRDs in `*.k8s.io` / `*.kubernetes.io` need the
/// `api-approved.kubernetes.io` annotation (a URL, or a reason starting with "unapproved");
/// an update that leaves its state alone is never rejected.
pub(crate) fn validate_api_approval(crd: &Value, old: Option<&Value>) -> Vec<Cause> {
    let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or("");
    if !is_protected_group(group) {
        return Vec::new();
    }
    let (state, reason) = approval_state(crd);
    if old.is_some_and(|o| approval_state(o).0 == state) {
        return Vec::new();
    }
    let path = Path::new("metadata").child("annotations").key(APPROVAL);
    let value =
        crd.pointer("/metadata/annotations").and_then(|a| a.get(APPROVAL)).and_then(Value::as_str).unwrap_or("");
    match state {
        Approval::Approved | Approval::Bypassed => Vec::new(),
        Approval::Missing => vec![required(&path, &reason)],
        Approval::Invalid => vec![invalid_str(&path, value, &reason)],
    }
}

/// kube's `validatePreserveUnknownFields`: v1 CRDs may not turn pruning off, unless the stored
/// object already has it off.
pub(crate) fn validate_preserve_unknown_fields(crd: &Value, old: Option<&Value>) -> Vec<Cause> {
    let set = |v: &Value| v.pointer("/spec/preserveUnknownFields").and_then(Value::as_bool) == Some(true);
    if old.is_some_and(set) || !set(crd) {
        return Vec::new();
    }
    vec![invalid(
        &Path::new("spec").child("preserveUnknownFields"),
        &Value::Bool(true),
        "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
    )]
}

/// kube's `validateDeprecationWarning`: only on deprecated versions, 1..=256 bytes, printable.
pub(crate) fn deprecation_warning_errors(deprecated: bool, warning: &str) -> Vec<String> {
    if !deprecated {
        return vec!["can only be set for deprecated versions".into()];
    }
    let mut errs = Vec::new();
    if warning.len() > 256 {
        errs.push("must be <= 256 characters long".into());
    }
    if warning.is_empty() {
        errs.push("must not be an empty string".into());
    }
    if let Some((i, _)) = warning.char_indices().find(|(_, c)| !crate::gofmt::is_print(*c)) {
        errs.push(format!("must only contain printable UTF-8 characters; non-printable character found at index {i}"));
    }
    errs
}

