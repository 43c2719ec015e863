//! FlowSchema and PriorityLevelConfiguration validation (kube's
//! `pkg/apis/flowcontrol/validation`). kube validates the internal object after its v1
//! defaults ran; kapi stores what the client sent, so every defaulted field is read here as
//! kube would have defaulted it (an unset or zero `matchingPrecedence` is 1000, zero queuing
//! numbers are 64 queues, hand size 8, queue length 50, ...). Otherwise objects kube accepts
//! would be refused, and the numbers in messages would differ from kube's.
//!
//! kube's update validation is its create validation, so there are no update-only rules.
//!
//! The mandatory objects (the FlowSchemas and levels `exempt` and `catch-all`) must have kube's
//! fixed spec, compared as kube's `apiequality.Semantic.DeepEqual` compares the defaulted
//! internal objects (an unset list equals an empty one, an unset pointer does not equal an
//! empty struct); only the `exempt` level's `spec.exempt` (its shares and lendable percent) is
//! the administrator's to change. Without this, a change would be accepted only for the
//! configuration producer to put the spec back. kube shows the refused spec as its Go `%#v`,
//! pointer addresses included; kapi shows it as JSON.

use kapi_apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use kapi_apimachinery::Cause;
use serde_json::{json, Value};

use super::admission::{go_slice, invalid_shown};
use super::array_at;

/// kube's `FlowSchemaMaxMatchingPrecedence`.
const MAX_MATCHING_PRECEDENCE: i64 = 10_000;
/// v1's default `matchingPrecedence`.
const DEFAULT_MATCHING_PRECEDENCE: i64 = 1000;
/// kube's `priorityLevelConfigurationQueuingMaxQueues` (10^7).
const MAX_QUEUES: i64 = 10_000_000;
/// kube's `shufflesharding.MaxHashBits`: a hand is dealt from a 64-bit hash, of which kube
/// spends at most this many bits.
const MAX_HASH_BITS: i64 = 60;
/// The annotation kube's v1beta3 conversion used to carry a zero `nominalConcurrencyShares`;
/// it must never reach a stored object.
const PRESERVE_ZERO_SHARES: &str = "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares";

// Supported values in the order kube lists them (its sets print sorted).
const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"];
const SUBJECT_KINDS: &[&str] = &["Group", "ServiceAccount", "User"];
const DISTINGUISHER_METHODS: &[&str] = &["ByNamespace", "ByUser"];
const ENABLEMENTS: &[&str] = &["Exempt", "Limited"];
const LIMIT_RESPONSES: &[&str] = &["Queue", "Reject"];

/// Prefixed to each namespace-name message of a resource rule.
const NS_ERR_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

/// A field that is present and not null (a non-nil pointer in kube's Go types).
fn set<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn int(obj: &Value, key: &str) -> Option<i64> {
    obj.get(key).and_then(Value::as_i64)
}

/// An int32 field v1 defaults when it is unset or zero.
fn int_or_default(obj: &Value, key: &str, default: i64) -> i64 {
    int(obj, key).filter(|n| *n != 0).unwrap_or(default)
}

fn text<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A string-typed field's value as kube shows it: unset is the empty string.
fn shown_string(obj: &Value, key: &str) -> Value {
    set(obj, key).cloned().unwrap_or_else(|| Value::from(""))
}

/// `field: Unsupported value: <Go value>: ...`, for values kube renders with `%#v`.
fn not_supported_shown(field: &str, shown: &str, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause {
        reason: "FieldValueNotSupported".into(),
        message: format!("{field}: Unsupported value: {shown}: supported values: {}", list.join(", ")),
        field: field.into(),
    }
}

fn has_wildcard(items: &[Value]) -> bool {
    items.iter().any(|v| v.as_str() == Some("*"))
}

/// kube's `ValidateFlowSchema` (metadata aside, which every kind gets).
pub(super) fn validate_flow_schema(obj: &Value) -> Vec<Cause> {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mut causes = Vec::new();

    let precedence = int_or_default(spec, "matchingPrecedence", DEFAULT_MATCHING_PRECEDENCE);
    let field = "spec.matchingPrecedence";
    if precedence <= 0 {
        causes.push(Cause::invalid(field, &Value::from(precedence), "must be a positive value"));
    }
    if precedence > MAX_MATCHING_PRECEDENCE {
        causes.push(Cause::invalid(
            field,
            &Value::from(precedence),
            &format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if precedence == 1 && name != "exempt" {
        causes.push(Cause::invalid(field, &Value::from(precedence), "only the schema named 'exempt' may have matchingPrecedence 1"));
    }

    if let Some(method) = set(spec, "distinguisherMethod") {
        let kind = text(method, "type");
        if !DISTINGUISHER_METHODS.contains(&kind) {
            // kube passes the whole method struct as the value.
            let shown = format!("flowcontrol.FlowDistinguisherMethod{{Type:{kind:?}}}");
            causes.push(not_supported_shown("spec.distinguisherMethod.type", &shown, DISTINGUISHER_METHODS));
        }
    }

    let level = spec.pointer("/priorityLevelConfiguration/name").and_then(Value::as_str).unwrap_or("");
    let field = "spec.priorityLevelConfiguration.name";
    if level.is_empty() {
        causes.push(Cause::required(field, "must reference a priority level"));
    } else {
        causes.extend(is_dns1123_subdomain(level).iter().map(|m| Cause::invalid(field, &Value::from(level), m)));
    }

    for (i, rule) in array_at(spec, "/rules").iter().enumerate() {
        causes.extend(rule_with_subjects(rule, &format!("spec.rules[{i}]")));
    }
    if let Some(fixed) = mandatory_schema_spec(name) {
        if schema_spec(spec) != schema_spec(&fixed) {
            causes.push(Cause::invalid("spec", spec, &format!("spec of '{name}' must equal the fixed value")));
        }
    }
    causes.extend(status_conditions(obj));
    causes
}

/// The rules kube's bootstrap gives both mandatory schemas: everything, resource or not.
fn everything(subjects: Value) -> Value {
    json!([{"subjects": subjects,
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}])
}

/// The fixed spec of a mandatory FlowSchema (kube's `internalbootstrap.MandatoryFlowSchemas`).
fn mandatory_schema_spec(name: &str) -> Option<Value> {
    let group = |name: &str| json!({"kind": "Group", "group": {"name": name}});
    match name {
        "exempt" => Some(json!({"priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1,
            "rules": everything(json!([group("system:masters")]))})),
        "catch-all" => Some(json!({"priorityLevelConfiguration": {"name": "catch-all"}, "matchingPrecedence": 10000,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": everything(json!([group("system:unauthenticated"), group("system:authenticated")]))})),
        _ => None,
    }
}

/// The fixed spec of a mandatory priority level (kube's
/// `internalbootstrap.MandatoryPriorityLevelConfigurations`).
fn mandatory_level_spec(name: &str) -> Option<Value> {
    match name {
        "exempt" => Some(json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}})),
        "catch-all" => Some(json!({"type": "Limited",
            "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0, "limitResponse": {"type": "Reject"}}})),
        _ => None,
    }
}

/// A present object field as `read` makes it, or null (a nil pointer).
fn pointer(obj: &Value, key: &str, read: impl Fn(&Value) -> Value) -> Value {
    set(obj, key).map_or(Value::Null, read)
}

/// A string list; unset, null and empty are all the same to kube's semantic equality.
fn strings(obj: &Value, key: &str) -> Value {
    Value::Array(obj.get(key).and_then(Value::as_array).map_or_else(Vec::new, |items| {
        items.iter().map(|v| Value::from(v.as_str().unwrap_or_default())).collect()
    }))
}

fn objects(obj: &Value, key: &str, read: impl Fn(&Value) -> Value) -> Value {
    Value::Array(obj.get(key).and_then(Value::as_array).map_or_else(Vec::new, |items| items.iter().map(read).collect()))
}

fn name_only(v: &Value) -> Value {
    json!({"name": text(v, "name")})
}

/// A FlowSchema spec as kube compares it: its internal form after v1's defaults, every field
/// present.
fn schema_spec(spec: &Value) -> Value {
    let subject = |s: &Value| {
        json!({"kind": text(s, "kind"), "user": pointer(s, "user", name_only), "group": pointer(s, "group", name_only),
            "serviceAccount": pointer(s, "serviceAccount", |a| json!({"namespace": text(a, "namespace"), "name": text(a, "name")}))})
    };
    let resource_rule = |r: &Value| {
        json!({"verbs": strings(r, "verbs"), "apiGroups": strings(r, "apiGroups"), "resources": strings(r, "resources"),
            "clusterScope": r.get("clusterScope").and_then(Value::as_bool).unwrap_or(false), "namespaces": strings(r, "namespaces")})
    };
    let non_resource_rule = |r: &Value| json!({"verbs": strings(r, "verbs"), "nonResourceURLs": strings(r, "nonResourceURLs")});
    let rule = |r: &Value| {
        json!({"subjects": objects(r, "subjects", subject), "resourceRules": objects(r, "resourceRules", resource_rule),
            "nonResourceRules": objects(r, "nonResourceRules", non_resource_rule)})
    };
    json!({
        "priorityLevelConfiguration": name_only(spec.get("priorityLevelConfiguration").unwrap_or(&Value::Null)),
        "matchingPrecedence": int_or_default(spec, "matchingPrecedence", DEFAULT_MATCHING_PRECEDENCE),
        "distinguisherMethod": pointer(spec, "distinguisherMethod", |m| json!({"type": text(m, "type")})),
        "rules": objects(spec, "rules", rule),
    })
}

/// A priority level spec as kube compares it: its internal form after v1's defaults (unset
/// shares 30, unset lendable percent 0, zero queuing numbers 64, 8 and 50).
fn level_spec(spec: &Value) -> Value {
    let queuing = |q: &Value| {
        json!({"queues": int_or_default(q, "queues", 64), "handSize": int_or_default(q, "handSize", 8),
            "queueLengthLimit": int_or_default(q, "queueLengthLimit", 50)})
    };
    let limited = |l: &Value| {
        let response = l.get("limitResponse").unwrap_or(&Value::Null);
        json!({"nominalConcurrencyShares": int(l, "nominalConcurrencyShares").unwrap_or(30),
            "lendablePercent": int(l, "lendablePercent").unwrap_or(0),
            "borrowingLimitPercent": int(l, "borrowingLimitPercent"),
            "limitResponse": {"type": text(response, "type"), "queuing": pointer(response, "queuing", queuing)}})
    };
    let exempt = |e: &Value| {
        json!({"nominalConcurrencyShares": int(e, "nominalConcurrencyShares").unwrap_or(0), "lendablePercent": int(e, "lendablePercent").unwrap_or(0)})
    };
    json!({"type": text(spec, "type"), "limited": pointer(spec, "limited", limited), "exempt": pointer(spec, "exempt", exempt)})
}

/// kube's `ValidateIfMandatoryPriorityLevelConfigurationObject`: a mandatory level's spec must
/// be the fixed one, except the `exempt` level's `spec.exempt`.
fn mandatory_level(name: &str, spec: &Value) -> Option<Cause> {
    let fixed = level_spec(&mandatory_level_spec(name)?);
    let mut have = level_spec(spec);
    if name == "exempt" {
        have["exempt"] = fixed["exempt"].clone();
        return (have != fixed).then(|| {
            Cause::invalid("spec", spec, &format!("spec of '{name}' except the 'spec.exempt' field must equal the fixed value"))
        });
    }
    (have != fixed).then(|| Cause::invalid("spec", spec, &format!("spec of '{name}' must equal the fixed value")))
}

/// kube's `ValidateFlowSchemaPolicyRulesWithSubjects`.
fn rule_with_subjects(rule: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let subjects = array_at(rule, "/subjects");
    if subjects.is_empty() {
        causes.push(Cause::required(&format!("{path}.subjects"), "subjects must contain at least one value"));
    }
    for (i, subject) in subjects.iter().enumerate() {
        causes.extend(validate_subject(subject, &format!("{path}.subjects[{i}]")));
    }
    let resource_rules = array_at(rule, "/resourceRules");
    let non_resource_rules = array_at(rule, "/nonResourceRules");
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        causes.push(Cause::required(path, "at least one of resourceRules and nonResourceRules has to be non-empty"));
    }
    for (i, r) in resource_rules.iter().enumerate() {
        causes.extend(resource_rule(r, &format!("{path}.resourceRules[{i}]")));
    }
    for (i, r) in non_resource_rules.iter().enumerate() {
        causes.extend(non_resource_rule(r, &format!("{path}.nonResourceRules[{i}]")));
    }
    causes
}

/// kube's `ValidateFlowSchemaSubject`: the member of the subject's kind is required, the
/// other two are forbidden.
fn validate_subject(subject: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let kind = text(subject, "kind");
    let members: [(&str, &str, &str); 3] = [
        ("ServiceAccount", "serviceAccount", "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"),
        ("User", "user", "user is forbidden when subject kind is not 'User'"),
        ("Group", "group", "group is forbidden when subject kind is not 'Group'"),
    ];
    match kind {
        "ServiceAccount" => causes.extend(service_account_subject(set(subject, "serviceAccount"), &format!("{path}.serviceAccount"))),
        "User" | "Group" => {
            let key = if kind == "User" { "user" } else { "group" };
            let member_path = format!("{path}.{key}");
            match set(subject, key) {
                None => causes.push(Cause::required(&member_path, &format!("{key} is required when subject kind is '{kind}'"))),
                Some(member) if text(member, "name").is_empty() => causes.push(Cause::required(&format!("{member_path}.name"), "")),
                Some(_) => {}
            }
        }
        _ => {
            causes.push(Cause::not_supported(&format!("{path}.kind"), &shown_string(subject, "kind"), SUBJECT_KINDS));
            return causes;
        }
    }
    for (member_kind, key, message) in members {
        if member_kind != kind && set(subject, key).is_some() {
            causes.push(Cause::forbidden(&format!("{path}.{key}"), message));
        }
    }
    causes
}

/// kube's `ValidateServiceAccountSubject`: `*` names every service account of the namespace.
fn service_account_subject(sa: Option<&Value>, path: &str) -> Vec<Cause> {
    let Some(sa) = sa else {
        return vec![Cause::required(path, "serviceAccount is required when subject kind is 'ServiceAccount'")];
    };
    let mut causes = Vec::new();
    let name = text(sa, "name");
    let field = format!("{path}.name");
    if name.is_empty() {
        causes.push(Cause::required(&field, ""));
    } else if name != "*" {
        causes.extend(is_dns1123_subdomain(name).iter().map(|m| Cause::invalid(&field, &Value::from(name), m)));
    }
    let namespace = text(sa, "namespace");
    let field = format!("{path}.namespace");
    if namespace.is_empty() {
        causes.push(Cause::required(&field, "must specify namespace for service account"));
    } else {
        causes.extend(is_dns1123_label(namespace).iter().map(|m| Cause::invalid(&field, &Value::from(namespace), m)));
    }
    causes
}

/// The verbs of a resource or non-resource rule: required, `*` alone, else kube's verbs.
fn verbs(rule: &Value, path: &str) -> Option<Cause> {
    let verbs = array_at(rule, "/verbs");
    let field = format!("{path}.verbs");
    if verbs.is_empty() {
        Some(Cause::required(&field, "verbs must contain at least one value"))
    } else if has_wildcard(verbs) {
        (verbs.len() > 1).then(|| invalid_shown(&field, &go_slice("string", verbs), "if '*' is present, must not specify other verbs"))
    } else if verbs.iter().any(|v| !v.as_str().is_some_and(|s| VERBS.contains(&s))) {
        Some(not_supported_shown(&field, &go_slice("string", verbs), VERBS))
    } else {
        None
    }
}

/// A list that must not be empty and in which `*` must stand alone.
fn wildcard_list(rule: &Value, key: &str, path: &str, required: &str, others: &str) -> Option<Cause> {
    let items = array_at(rule, &format!("/{key}"));
    let field = format!("{path}.{key}");
    if items.is_empty() {
        Some(Cause::required(&field, required))
    } else if items.len() > 1 && has_wildcard(items) {
        Some(invalid_shown(&field, &go_slice("string", items), &format!("if '*' is present, must not specify other {others}")))
    } else {
        None
    }
}

/// kube's `ValidateFlowSchemaResourcePolicyRule`.
fn resource_rule(rule: &Value, path: &str) -> Vec<Cause> {
    let mut causes: Vec<Cause> = [
        verbs(rule, path),
        wildcard_list(rule, "apiGroups", path, "resource rules must supply at least one api group", "api groups"),
        wildcard_list(rule, "resources", path, "resource rules must supply at least one resource", "resources"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let namespaces = array_at(rule, "/namespaces");
    let cluster_scope = rule.get("clusterScope").and_then(Value::as_bool).unwrap_or(false);
    let field = format!("{path}.namespaces");
    if namespaces.is_empty() && !cluster_scope {
        causes.push(Cause::required(&field, "resource rules that are not cluster scoped must supply at least one namespace"));
    } else if has_wildcard(namespaces) {
        if namespaces.len() > 1 {
            causes.push(invalid_shown(&field, &go_slice("string", namespaces), "if '*' is present, must not specify other namespaces"));
        }
    } else {
        for (i, ns) in namespaces.iter().enumerate() {
            let name = ns.as_str().unwrap_or("");
            causes.extend(
                is_dns1123_label(name)
                    .iter()
                    .map(|m| Cause::invalid(&format!("{field}[{i}]"), &Value::from(name), &format!("{NS_ERR_INTRO}{m}"))),
            );
        }
    }
    causes
}

/// kube's `ValidateFlowSchemaNonResourcePolicyRule`.
fn non_resource_rule(rule: &Value, path: &str) -> Vec<Cause> {
    let mut causes: Vec<Cause> = verbs(rule, path).into_iter().collect();
    let urls = array_at(rule, "/nonResourceURLs");
    let field = format!("{path}.nonResourceURLs");
    if urls.is_empty() {
        causes.push(Cause::required(&field, "nonResourceURLs must contain at least one value"));
    } else if has_wildcard(urls) {
        if urls.len() > 1 {
            causes.push(invalid_shown(&field, &go_slice("string", urls), "if '*' is present, must not specify other non-resource URLs"));
        }
    } else {
        for (i, url) in urls.iter().enumerate() {
            let url = url.as_str().unwrap_or("");
            if let Some(why) = non_resource_url_error(url) {
                causes.push(Cause::invalid(&format!("{field}[{i}]"), &Value::from(url), why));
            }
        }
    }
    causes
}

/// kube's `ValidateNonResourceURLPath`: the first reason a path fails, if any. A `*` may
/// only end the path, after a slash (it matches anything below, slashes included).
fn non_resource_url_error(url: &str) -> Option<&'static str> {
    if url.is_empty() {
        return Some("must not be empty");
    }
    if url == "/" {
        return None;
    }
    if !url.starts_with('/') {
        Some("must start with slash")
    } else if url.contains(' ') {
        Some("must not contain white-space")
    } else if url.contains("//") {
        Some("must not contain double slash")
    } else {
        let stars = url.matches('*').count();
        (stars > 1 || (stars == 1 && !url.ends_with("/*"))).then_some("wildcard can only do suffix matching")
    }
}

/// kube's status checks of both kinds: condition types present and unique.
fn status_conditions(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, condition) in array_at(obj, "/status/conditions").iter().enumerate() {
        let field = format!("status.conditions[{i}].type");
        let kind = text(condition, "type");
        if seen.contains(&kind) {
            causes.push(Cause::duplicate(&field, &Value::from(kind)));
        }
        seen.push(kind);
        if kind.is_empty() {
            causes.push(Cause::required(&field, "must not be empty"));
        }
    }
    causes
}

/// kube's `ValidatePriorityLevelConfiguration` for a v1 request (metadata aside).
pub(super) fn validate_priority_level(obj: &Value) -> Vec<Cause> {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mut causes = Vec::new();
    if obj.pointer("/metadata/annotations").and_then(|a| a.get(PRESERVE_ZERO_SHARES)).is_some() {
        causes.push(Cause::forbidden("metadata.annotations", &format!("annotation '{PRESERVE_ZERO_SHARES}' is forbidden")));
    }

    let kind = text(spec, "type");
    let kind_value = shown_string(spec, "type");
    if (name == "exempt") != (kind == "Exempt") {
        causes.push(Cause::invalid("spec.type", &kind_value, "type must be 'Exempt' if and only if name is 'exempt'"));
    }
    match kind {
        "Exempt" => {
            if set(spec, "limited").is_some() {
                causes.push(Cause::forbidden("spec.limited", "must be nil if the type is not Limited"));
            }
            if let Some(exempt) = set(spec, "exempt") {
                causes.extend(exempt_level(exempt));
            }
        }
        "Limited" => {
            if set(spec, "exempt").is_some() {
                causes.push(Cause::forbidden("spec.exempt", "must be nil if the type is Limited"));
            }
            match set(spec, "limited") {
                None => causes.push(Cause::required("spec.limited", "must not be empty when type is Limited")),
                Some(limited) => causes.extend(limited_level(limited)),
            }
        }
        _ => causes.push(Cause::not_supported("spec.type", &kind_value, ENABLEMENTS)),
    }
    causes.extend(mandatory_level(name, spec));
    causes.extend(status_conditions(obj));
    causes
}

/// `lendablePercent` of either kind of level, defaulted to 0 when unset.
fn lendable_percent(level: &Value, path: &str) -> Option<Cause> {
    let percent = int(level, "lendablePercent")?;
    (!(0..=100).contains(&percent))
        .then(|| Cause::invalid(&format!("{path}.lendablePercent"), &Value::from(percent), "must be between 0 and 100, inclusive"))
}

/// kube's `ValidateExemptPriorityLevelConfiguration`.
fn exempt_level(exempt: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(shares) = int(exempt, "nominalConcurrencyShares").filter(|n| *n < 0) {
        causes.push(Cause::invalid("spec.exempt.nominalConcurrencyShares", &Value::from(shares), "must be a non-negative integer"));
    }
    causes.extend(lendable_percent(exempt, "spec.exempt"));
    causes
}

/// kube's `ValidateLimitedPriorityLevelConfiguration` as v1 requests get it (zero shares
/// allowed; unset shares default to 30).
fn limited_level(limited: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(shares) = int(limited, "nominalConcurrencyShares").filter(|n| *n < 0) {
        causes.push(Cause::invalid("spec.limited.nominalConcurrencyShares", &Value::from(shares), "must be a non-negative integer"));
    }
    causes.extend(limit_response(limited.get("limitResponse").unwrap_or(&Value::Null)));
    causes.extend(lendable_percent(limited, "spec.limited"));
    if let Some(percent) = int(limited, "borrowingLimitPercent").filter(|n| *n < 0) {
        causes.push(Cause::invalid(
            "spec.limited.borrowingLimitPercent",
            &Value::from(percent),
            "if specified, must be a non-negative integer",
        ));
    }
    causes
}

/// kube's `ValidateLimitResponse`. Its messages say `Limited` where they mean `Queue`; kept.
fn limit_response(response: &Value) -> Vec<Cause> {
    const PATH: &str = "spec.limited.limitResponse";
    let queuing = set(response, "queuing");
    match text(response, "type") {
        "Reject" if queuing.is_some() => {
            vec![Cause::forbidden(&format!("{PATH}.queuing"), "must be nil if limited.limitResponse.type is not Limited")]
        }
        "Reject" => Vec::new(),
        "Queue" => match queuing {
            None => vec![Cause::required(&format!("{PATH}.queuing"), "must not be empty if limited.limitResponse.type is Limited")],
            Some(q) => queuing_config(q, &format!("{PATH}.queuing")),
        },
        _ => vec![Cause::not_supported(&format!("{PATH}.type"), &shown_string(response, "type"), LIMIT_RESPONSES)],
    }
}

/// kube's `shufflesharding.RequiredEntropyBits`: the hash bits needed to deal `hand_size`
/// cards from a deck of `deck_size`.
fn required_entropy_bits(deck_size: i64, hand_size: i64) -> i64 {
    ((deck_size as f64).log2() * hand_size as f64).ceil() as i64
}

/// kube's `ValidatePriorityLevelQueuingConfiguration`, on v1's defaults for zero values.
fn queuing_config(q: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let length = int_or_default(q, "queueLengthLimit", 50);
    if length <= 0 {
        causes.push(Cause::invalid(&format!("{path}.queueLengthLimit"), &Value::from(length), "must be positive"));
    }
    let queues = int_or_default(q, "queues", 64);
    let field = format!("{path}.queues");
    if queues <= 0 {
        causes.push(Cause::invalid(&field, &Value::from(queues), "must be positive"));
    } else if queues > MAX_QUEUES {
        causes.push(Cause::invalid(&field, &Value::from(queues), &format!("must not be greater than {MAX_QUEUES}")));
    }
    let hand = int_or_default(q, "handSize", 8);
    let field = format!("{path}.handSize");
    if hand <= 0 {
        causes.push(Cause::invalid(&field, &Value::from(hand), "must be positive"));
    } else if hand > queues {
        causes.push(Cause::invalid(&field, &Value::from(hand), &format!("should not be greater than queues ({queues})")));
    } else if required_entropy_bits(queues, hand) > MAX_HASH_BITS {
        causes.push(Cause::invalid(
            &field,
            &Value::from(hand),
            &format!("required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"),
        ));
    }
    causes
}

#[cfg(test)]
#[path = "flowcontrol_tests.rs"]
mod tests;
