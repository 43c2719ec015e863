//! Name, label and object-metadata validation with kube-apiserver's exact messages.
//!
//! Mirrors `k8s.io/apimachinery/pkg/util/validation` (the `Is*` helpers return the list of
//! reasons a value is wrong, empty when it is fine) and `apimachinery/pkg/api/validation`
//! (`ValidateObjectMeta`). Clients such as kubectl print these messages verbatim, and users
//! search for them, so the wording and the regex shown in them follow kube character for
//! character. The regexes are matched by hand: they are tiny and fixed.

use serde_json::{Map, Value};

use crate::status::Cause;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_MAX: usize = 63;

const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// Longest label value kube accepts.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
/// Longest RFC 1123 label (namespace names, many resource names).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;

const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
/// Longest RFC 1123 subdomain (most object names).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
/// Longest DNS-1035 label (service names).
pub const DNS1035_LABEL_MAX_LENGTH: usize = 63;

/// Total bytes of annotation keys and values an object may carry.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// kube's `MaxLenError`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// kube's `EmptyError`.
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

/// kube's `RegexError`: the message, examples, and the regex used.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(e);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, anchored.
fn matches_qualified_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_alnum(f) && is_alnum(l) && b.iter().all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.')
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, anchored; with `first_alpha`, the DNS-1035 variant.
fn matches_dns_label(s: &str, first_alpha: bool) -> bool {
    let b = s.as_bytes();
    let lower_alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            let first_ok = if first_alpha { f.is_ascii_lowercase() } else { lower_alnum(f) };
            first_ok && lower_alnum(l) && b.iter().all(|&c| lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

fn matches_dns_subdomain(s: &str) -> bool {
    s.split('.').all(|part| matches_dns_label(part, false))
}

/// Reasons `s` is not a lowercase RFC 1123 subdomain (most object names).
pub fn is_dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns_subdomain(s) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// Reasons `s` is not a lowercase RFC 1123 label (namespace names).
pub fn is_dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !matches_dns_label(s, false) {
        if matches_dns_subdomain(s) {
            // A valid subdomain that is not a valid label: the length is checked, so it is dots.
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(DNS1123_LABEL_ERR, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// Reasons `s` is not a DNS-1035 label (service names: must start with a letter).
pub fn is_dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1035_LABEL_MAX_LENGTH {
        errs.push(max_len_error(DNS1035_LABEL_MAX_LENGTH));
    }
    if !matches_dns_label(s, true) {
        errs.push(regex_error(DNS1035_LABEL_ERR, DNS1035_LABEL_FMT, &["my-name", "abc-123"]));
    }
    errs
}

/// Reasons `s` is not a qualified name (label and annotation keys, finalizers): an optional
/// DNS-subdomain prefix and `/`, then a name of at most 63 characters.
pub fn is_qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(is_dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    if !matches_qualified_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// Reasons `s` is not a valid label value (empty is valid).
pub fn is_valid_label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !(s.is_empty() || matches_qualified_name(s)) {
        errs.push(regex_error(LABEL_VALUE_ERR, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// Reasons `s` cannot be a path segment (kube's `IsValidPathSegmentName`).
pub fn is_valid_path_segment_name(s: &str) -> Vec<String> {
    for bad in [".", ".."] {
        if s == bad {
            return vec![format!("may not be '{bad}'")];
        }
    }
    ["/", "%"].iter().filter(|bad| s.contains(**bad)).map(|bad| format!("may not contain '{bad}'")).collect()
}

/// Which rule a kind's `metadata.name` follows (kube's per-type `ValidateNameFunc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// Most kinds: lowercase RFC 1123 subdomain, 253 characters.
    Dns1123Subdomain,
    /// Namespaces and a few others: RFC 1123 label, 63 characters.
    Dns1123Label,
    /// Services: DNS-1035 label (starts with a letter).
    Dns1035Label,
    /// RBAC objects and similar: anything usable as a URL path segment.
    PathSegment,
    /// IPAddresses: the address itself.
    IpAddress,
}

impl NameRule {
    /// Reasons `name` is invalid; `prefix` is true for `generateName`, where a trailing `-` is
    /// allowed because random characters follow it.
    pub fn validate(self, name: &str, prefix: bool) -> Vec<String> {
        let masked;
        let name = if prefix && !matches!(self, NameRule::PathSegment | NameRule::IpAddress) {
            masked = mask_trailing_dash(name);
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Dns1123Subdomain => is_dns1123_subdomain(name),
            NameRule::Dns1123Label => is_dns1123_label(name),
            NameRule::Dns1035Label => is_dns1035_label(name),
            NameRule::PathSegment => is_valid_path_segment_name(name),
            NameRule::IpAddress if name.parse::<std::net::IpAddr>().is_ok() => Vec::new(),
            NameRule::IpAddress => vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".to_owned()],
        }
    }
}

fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        format!("{}a", &name[..name.len() - 1])
    } else {
        name.to_string()
    }
}

fn meta_str<'a>(meta: &'a Value, key: &str) -> &'a str {
    meta.get(key).and_then(Value::as_str).unwrap_or("")
}

fn string_map<'a>(meta: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    meta.get(key).and_then(Value::as_object)
}

/// Validates an object's `metadata` as kube's `ValidateObjectMeta` does, returning every cause.
///
/// Call it after `generateName` has been turned into a name (kube generates the name before
/// validating), so an object with only `generateName` reports `metadata.name` as required.
pub fn validate_object_meta(meta: &Value, namespaced: bool, rule: NameRule) -> Vec<Cause> {
    let mut causes = Vec::new();
    let generate_name = meta_str(meta, "generateName");
    if !generate_name.is_empty() {
        for msg in rule.validate(generate_name, true) {
            causes.push(Cause::invalid("metadata.generateName", &Value::from(generate_name), &msg));
        }
    }
    let name = meta_str(meta, "name");
    if name.is_empty() {
        causes.push(Cause::required("metadata.name", "name or generateName is required"));
    } else {
        for msg in rule.validate(name, false) {
            causes.push(Cause::invalid("metadata.name", &Value::from(name), &msg));
        }
    }
    let namespace = meta_str(meta, "namespace");
    if namespaced {
        if namespace.is_empty() {
            causes.push(Cause::required("metadata.namespace", ""));
        } else {
            for msg in is_dns1123_label(namespace) {
                causes.push(Cause::invalid("metadata.namespace", &Value::from(namespace), &msg));
            }
        }
    } else if !namespace.is_empty() {
        causes.push(Cause::forbidden("metadata.namespace", "not allowed on this type"));
    }
    if let Some(g) = meta.get("generation").and_then(Value::as_i64) {
        if g < 0 {
            causes.push(Cause::invalid("metadata.generation", &Value::from(g), "must be greater than or equal to 0"));
        }
    }
    causes.extend(validate_labels(string_map(meta, "labels"), "metadata.labels"));
    causes.extend(validate_annotations(string_map(meta, "annotations"), "metadata.annotations"));
    causes.extend(validate_owner_references(meta.get("ownerReferences"), "metadata.ownerReferences"));
    causes.extend(validate_finalizers(meta.get("finalizers"), "metadata.finalizers"));
    causes
}

/// Label keys must be qualified names and values valid label values (kube's `ValidateLabels`).
pub fn validate_labels(labels: Option<&Map<String, Value>>, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (k, v) in labels.into_iter().flatten() {
        for msg in is_qualified_name(k) {
            causes.push(Cause::invalid(field, &Value::from(k.as_str()), &msg));
        }
        match v.as_str() {
            Some(s) => {
                for msg in is_valid_label_value(s) {
                    causes.push(Cause::invalid(field, v, &msg));
                }
            }
            None => causes.push(Cause::invalid(field, v, "label values must be strings")),
        }
    }
    causes
}

/// Annotation keys are case-insensitive qualified names; keys and values total at most 256 KiB.
pub fn validate_annotations(annotations: Option<&Map<String, Value>>, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut total = 0usize;
    for (k, v) in annotations.into_iter().flatten() {
        for msg in is_qualified_name(&k.to_lowercase()) {
            causes.push(Cause::invalid(field, &Value::from(k.as_str()), &msg));
        }
        total += k.len();
        match v.as_str() {
            Some(s) => total += s.len(),
            None => causes.push(Cause::invalid(field, v, "annotation values must be strings")),
        }
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        causes.push(Cause::too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    causes
}

/// Every owner reference names its owner fully; at most one is the controller.
pub fn validate_owner_references(refs: Option<&Value>, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(refs) = refs.and_then(Value::as_array) else {
        return causes;
    };
    let mut first_controller: Option<String> = None;
    for r in refs {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
        let api_version = s("apiVersion");
        let version = api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() {
            causes.push(Cause::invalid(
                &format!("{field}.apiVersion"),
                &Value::from(api_version),
                "version must not be empty",
            ));
        }
        for key in ["kind", "name", "uid"] {
            if s(key).is_empty() {
                causes.push(Cause::invalid(&format!("{field}.{key}"), &Value::from(s(key)), "must not be empty"));
            }
        }
        if api_version == "v1" && s("kind") == "Event" {
            causes.push(Cause::invalid(field, r, "/v1, Kind=Event is disallowed from being an owner"));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{}/{}", s("kind"), s("name"));
            match &first_controller {
                Some(first) => causes.push(Cause::invalid(
                    field,
                    &Value::Array(refs.clone()),
                    &format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    causes
}

/// Finalizers are qualified names; `orphan` and `foregroundDeletion` exclude each other.
pub fn validate_finalizers(finalizers: Option<&Value>, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(list) = finalizers.and_then(Value::as_array) else {
        return causes;
    };
    let (mut orphan, mut foreground) = (false, false);
    for f in list {
        let s = f.as_str().unwrap_or("");
        for msg in is_qualified_name(s) {
            causes.push(Cause::invalid(field, f, &msg));
        }
        orphan |= s == "orphan";
        foreground |= s == "foregroundDeletion";
    }
    if orphan && foreground {
        causes.push(Cause::invalid(
            field,
            &Value::Array(list.clone()),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subdomain_rules() {
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert!(is_dns1123_subdomain("a").is_empty());
        let errs = is_dns1123_subdomain("Bad_Name");
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0],
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start \
             and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert!(is_dns1123_subdomain(&"a".repeat(253)).is_empty());
        assert_eq!(is_dns1123_subdomain(&"a".repeat(254)), vec!["must be no more than 253 characters".to_string()]);
        assert_eq!(is_dns1123_subdomain("").len(), 1);
        assert_eq!(is_dns1123_subdomain("a..b").len(), 1);
        assert_eq!(is_dns1123_subdomain("-a").len(), 1);
    }

    #[test]
    fn label_rules() {
        assert!(is_dns1123_label(&"a".repeat(63)).is_empty());
        assert_eq!(is_dns1123_label(&"a".repeat(64)), vec!["must be no more than 63 characters".to_string()]);
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots".to_string()]);
        assert!(is_dns1123_label("123-abc").is_empty());
        assert!(is_dns1123_label("abc-").len() == 1);
        assert!(is_dns1035_label("abc-123").is_empty());
        assert!(is_dns1035_label("1abc")[0].starts_with("a DNS-1035 label must consist"));
    }

    #[test]
    fn qualified_names_and_values() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("example.com/MyName").is_empty());
        assert!(is_qualified_name("app.kubernetes.io/name").is_empty());
        assert_eq!(is_qualified_name("/a"), vec!["prefix part must be non-empty".to_string()]);
        assert_eq!(is_qualified_name("a/").len(), 2, "empty name: non-empty and regex");
        assert!(is_qualified_name("a/b/c")[0].starts_with("a qualified name must consist of"));
        assert!(is_qualified_name("Bad_Prefix/x")[0].starts_with("prefix part a lowercase RFC 1123 subdomain"));
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters".to_string()]
        );
        assert!(is_qualified_name("-a")[0].starts_with("name part must consist of alphanumeric characters"));
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("my_value").is_empty());
        assert!(is_valid_label_value("a b")[0].starts_with("a valid label must be an empty string"));
        assert_eq!(is_valid_label_value(&"a".repeat(64)).len(), 1);
    }

    #[test]
    fn path_segments() {
        assert_eq!(is_valid_path_segment_name(".."), vec!["may not be '..'".to_string()]);
        assert_eq!(
            is_valid_path_segment_name("a/b%c"),
            vec!["may not contain '/'".to_string(), "may not contain '%'".to_string()]
        );
        assert!(is_valid_path_segment_name("system:admin").is_empty());
    }

    #[test]
    fn object_meta_name_and_namespace() {
        let causes = validate_object_meta(
            &json!({"name": "Bad_Name", "namespace": "default"}),
            true,
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "metadata.name");
        assert!(causes[0]
            .message
            .starts_with("metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));

        let causes = validate_object_meta(&json!({"generateName": "web-"}), true, NameRule::Dns1123Subdomain);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, vec!["metadata.name", "metadata.namespace"]);
        assert_eq!(causes[0].message, "metadata.name: Required value: name or generateName is required");

        let causes = validate_object_meta(&json!({"name": "n", "namespace": "x"}), false, NameRule::Dns1123Label);
        assert_eq!(causes[0].message, "metadata.namespace: Forbidden: not allowed on this type");
        assert!(validate_object_meta(&json!({"name": "n"}), false, NameRule::Dns1123Label).is_empty());
    }

    #[test]
    fn object_meta_labels_annotations_finalizers_owners() {
        let meta = json!({
            "name": "n", "namespace": "d",
            "labels": {"ok": "v", "bad key": "v", "k": "bad value"},
            "annotations": {"Example.com/Key": "x"},
            "finalizers": ["orphan", "foregroundDeletion", "a/b/c"],
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1", "controller": true},
                {"apiVersion": "apps/", "kind": "", "name": "x", "uid": "2", "controller": true}
            ]
        });
        let causes = validate_object_meta(&meta, true, NameRule::Dns1123Subdomain);
        let by = |f: &str| causes.iter().filter(|c| c.field == f).count();
        assert_eq!(by("metadata.labels"), 2);
        assert_eq!(by("metadata.annotations"), 0, "annotation keys are case-insensitive");
        assert_eq!(by("metadata.finalizers"), 2);
        assert_eq!(by("metadata.ownerReferences.apiVersion"), 1);
        assert_eq!(by("metadata.ownerReferences.kind"), 1);
        assert!(causes.iter().any(|c| c.message.contains("Found \"true\" in references for ReplicaSet/rs and /x")));
    }

    #[test]
    fn annotation_size_limit() {
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let meta = json!({"name": "n", "annotations": {"a": big}});
        let causes = validate_object_meta(&meta, false, NameRule::Dns1123Subdomain);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].reason, "FieldValueTooLong");
    }

    #[test]
    fn generate_name_allows_trailing_dash() {
        assert!(NameRule::Dns1123Subdomain.validate("web-", true).is_empty());
        assert!(!NameRule::Dns1123Subdomain.validate("web-", false).is_empty());
    }
}
