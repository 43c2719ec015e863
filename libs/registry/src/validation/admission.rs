//! Webhook configuration validation (kube's
//! `pkg/apis/admissionregistration/validation/validation.go`, and
//! `k8s.io/apiserver/pkg/util/webhook` for client configs), plus the rule and match-condition
//! checks the admission policies share.
//!
//! Match-condition expressions are compiled in the CEL environment the plugins evaluate them
//! with ([`super::admission_cel`]).

use std::collections::HashSet;

use kapi_apimachinery::validation::{is_dns1035_label, is_dns1123_subdomain, is_qualified_name};
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::{array_at, label_selector, str_at};

/// Which admission review versions this server speaks (kube's `AcceptedAdmissionReviewVersions`).
const ACCEPTED_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
pub(super) const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
pub(super) const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
/// kube requires `None` or `NoneOnDryRun` for new v1 webhooks (`noSideEffectClasses`).
const NO_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
/// Every class kube knows; an update may keep what the old object had (`supportedSideEffectClasses`).
const ALL_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun", "Some", "Unknown"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];

/// kube's `validationOptions`. Create is strict; kube's update relaxes each check the old
/// object already failed. kapi's strategy runs create validation on update too, and every
/// stored webhook configuration passed it when created, so only [`Options::CREATE`] is used.
#[derive(Debug, Clone, Copy)]
pub(super) struct Options {
    require_no_side_effects: bool,
    require_recognized_review_version: bool,
    require_unique_names: bool,
    allow_invalid_label_values: bool,
    ignore_match_conditions: bool,
}

impl Options {
    pub(super) const CREATE: Options = Options {
        require_no_side_effects: true,
        require_recognized_review_version: true,
        require_unique_names: true,
        allow_invalid_label_values: false,
        ignore_match_conditions: false,
    };
}

/// `ValidateValidatingWebhookConfiguration` / `ValidateMutatingWebhookConfiguration`.
pub(super) fn validate_webhook_configuration(
    obj: &Value,
    mutating: bool,
    opts: Options,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = HashSet::new();
    for (i, hook) in array_at(obj, "/webhooks").iter().enumerate() {
        let path = format!("webhooks[{i}]");
        causes.extend(validate_webhook(hook, &path, mutating, opts));
        causes.extend(review_versions(
            hook,
            &format!("{path}.admissionReviewVersions"),
            opts,
        ));
        let name = str_at(hook, "/name");
        if opts.require_unique_names && !name.is_empty() && !names.insert(name) {
            causes.push(Cause::duplicate(
                &format!("{path}.name"),
                &Value::from(name),
            ));
        }
    }
    causes
}

fn validate_webhook(hook: &Value, path: &str, mutating: bool, opts: Options) -> Vec<Cause> {
    let mut causes = fully_qualified_name(&format!("{path}.name"), str_at(hook, "/name"));
    for (i, rule) in array_at(hook, "/rules").iter().enumerate() {
        causes.extend(rule_with_operations(rule, &format!("{path}.rules[{i}]")));
    }
    enum_field(hook, "failurePolicy", path, FAILURE_POLICIES, &mut causes);
    enum_field(hook, "matchPolicy", path, MATCH_POLICIES, &mut causes);
    let allowed = if opts.require_no_side_effects {
        NO_SIDE_EFFECTS
    } else {
        ALL_SIDE_EFFECTS
    };
    match hook.get("sideEffects").filter(|v| !v.is_null()) {
        None => causes.push(Cause::required(
            &format!("{path}.sideEffects"),
            &format!("must specify one of {}", allowed.join(", ")),
        )),
        Some(v) if v.as_str().is_some_and(|s| allowed.contains(&s)) => {}
        Some(v) => causes.push(Cause::not_supported(
            &format!("{path}.sideEffects"),
            v,
            allowed,
        )),
    }
    if let Some(t) = hook.get("timeoutSeconds").filter(|v| !v.is_null()) {
        if t.as_i64().is_none_or(|t| !(1..=30).contains(&t)) {
            causes.push(Cause::invalid(
                &format!("{path}.timeoutSeconds"),
                t,
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
    }
    for key in ["namespaceSelector", "objectSelector"] {
        if let Some(sel) = hook.get(key).filter(|v| !v.is_null()) {
            causes.extend(label_selector(
                sel,
                &format!("{path}.{key}"),
                opts.allow_invalid_label_values,
            ));
        }
    }
    if mutating {
        enum_field(
            hook,
            "reinvocationPolicy",
            path,
            REINVOCATION_POLICIES,
            &mut causes,
        );
    }
    causes.extend(client_config(
        hook.get("clientConfig").unwrap_or(&Value::Null),
        &format!("{path}.clientConfig"),
    ));
    if !opts.ignore_match_conditions {
        causes.extend(match_conditions(
            array_at(hook, "/matchConditions"),
            &format!("{path}.matchConditions"),
            &kapi_apiextensions::cel::ExpressionCompiler::new(),
            false,
        ));
    }
    causes
}

/// `field: Invalid value: <shown>: detail` where `shown` is already rendered as Go renders the
/// value (slices print with `%#v`, e.g. `[]string{"*", "apps"}`).
pub(super) fn invalid_shown(field: &str, shown: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("{field}: Invalid value: {shown}: {detail}"),
        field: field.into(),
    }
}

/// Go's `%#v` of a slice of strings of type `elem` (`string`, or a named string type such as
/// `admissionregistration.OperationType`).
pub(super) fn go_slice(elem: &str, items: &[Value]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|v| format!("{:?}", v.as_str().unwrap_or("")))
        .collect();
    format!("[]{elem}{{{}}}", quoted.join(", "))
}

/// An optional enumerated field: `Unsupported value` when set to anything else.
pub(super) fn enum_field(
    obj: &Value,
    key: &str,
    path: &str,
    supported: &[&str],
    causes: &mut Vec<Cause>,
) {
    if let Some(v) = obj.get(key).filter(|v| !v.is_null()) {
        if !v.as_str().is_some_and(|s| supported.contains(&s)) {
            causes.push(Cause::not_supported(&format!("{path}.{key}"), v, supported));
        }
    }
}

/// `utilvalidation.IsFullyQualifiedName`: a DNS subdomain with at least three segments.
fn fully_qualified_name(field: &str, name: &str) -> Vec<Cause> {
    if name.is_empty() {
        return vec![Cause::required(field, "")];
    }
    let errs = is_dns1123_subdomain(name);
    if !errs.is_empty() {
        return vec![Cause::invalid(field, &Value::from(name), &errs.join(","))];
    }
    if name.split('.').count() < 3 {
        return vec![Cause::invalid(
            field,
            &Value::from(name),
            "should be a domain with at least three segments separated by dots",
        )];
    }
    Vec::new()
}

fn review_versions(hook: &Value, path: &str, opts: Options) -> Vec<Cause> {
    let versions = array_at(hook, "/admissionReviewVersions");
    if versions.is_empty() {
        return vec![Cause::required(
            path,
            &format!(
                "must specify one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        )];
    }
    let mut causes = Vec::new();
    let mut seen = HashSet::new();
    let mut accepted = false;
    for (i, v) in versions.iter().enumerate() {
        let s = v.as_str().unwrap_or("");
        if !seen.insert(s) {
            causes.push(Cause::invalid(
                &format!("{path}[{i}]"),
                v,
                "duplicate version",
            ));
            continue;
        }
        causes.extend(
            is_dns1035_label(s)
                .iter()
                .map(|m| Cause::invalid(&format!("{path}[{i}]"), v, m)),
        );
        accepted |= ACCEPTED_REVIEW_VERSIONS.contains(&s);
    }
    if opts.require_recognized_review_version && !accepted {
        causes.push(invalid_shown(
            path,
            &go_slice("string", versions),
            &format!(
                "must include at least one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    causes
}

pub(super) fn strings(obj: &Value, key: &str) -> Vec<String> {
    array_at(obj, &format!("/{key}"))
        .iter()
        .map(|v| v.as_str().unwrap_or("").to_string())
        .collect()
}

/// `validateRuleWithOperations`, then `validateRule` with subresources allowed.
pub(super) fn rule_with_operations(rule: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ops = strings(rule, "operations");
    if ops.is_empty() {
        causes.push(Cause::required(&format!("{path}.operations"), ""));
    }
    if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        causes.push(invalid_shown(
            &format!("{path}.operations"),
            &go_slice(
                "admissionregistration.OperationType",
                array_at(rule, "/operations"),
            ),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        if !OPERATIONS.contains(&op.as_str()) {
            causes.push(Cause::not_supported(
                &format!("{path}.operations[{i}]"),
                &Value::from(op.as_str()),
                OPERATIONS,
            ));
        }
    }
    causes.extend(validate_rule(rule, path));
    causes
}

fn validate_rule(rule: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (key, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let items = strings(rule, key);
        if items.is_empty() {
            causes.push(Cause::required(&format!("{path}.{key}"), ""));
        }
        if items.len() > 1 && items.iter().any(|s| s == "*") {
            causes.push(invalid_shown(
                &format!("{path}.{key}"),
                &go_slice("string", array_at(rule, &format!("/{key}"))),
                &format!("if '*' is present, must not specify other {what}"),
            ));
        }
        if key == "apiVersions" {
            for (i, _) in items.iter().enumerate().filter(|(_, v)| v.is_empty()) {
                causes.push(Cause::required(&format!("{path}.apiVersions[{i}]"), ""));
            }
        }
    }
    causes.extend(resources(rule, &format!("{path}.resources")));
    enum_field(rule, "scope", path, SCOPES, &mut causes);
    causes
}

/// `validateResources`: `resource/subresource` pairs with kube's wildcard rules.
fn resources(rule: &Value, path: &str) -> Vec<Cause> {
    let items = strings(rule, "resources");
    let all = go_slice("string", array_at(rule, "/resources"));
    let mut causes = Vec::new();
    if items.is_empty() {
        causes.push(Cause::required(path, ""));
    }
    let (mut res_wild_sub, mut sub_wild_res) = (HashSet::new(), HashSet::new());
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, item) in items.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if item.is_empty() {
            causes.push(Cause::required(&field, ""));
            continue;
        }
        double |= item == "*/*";
        single |= item == "*";
        let Some((res, sub)) = item.split_once('/') else {
            // kube keeps only the last plain entry's answer here (`hasResourceWithoutSubresource = ...`).
            plain = item != "*";
            continue;
        };
        let shown = Value::from(item.as_str());
        if res_wild_sub.contains(res) {
            causes.push(Cause::invalid(
                &field,
                &shown,
                &format!("if '{res}/*' is present, must not specify {item}"),
            ));
        }
        if sub_wild_res.contains(sub) {
            causes.push(Cause::invalid(
                &field,
                &shown,
                &format!("if '*/{sub}' is present, must not specify {item}"),
            ));
        }
        if sub == "*" {
            res_wild_sub.insert(res);
        }
        if res == "*" {
            sub_wild_res.insert(sub);
        }
    }
    if items.len() > 1 && double {
        causes.push(invalid_shown(
            path,
            &all,
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        causes.push(invalid_shown(
            path,
            &all,
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    causes
}

/// A webhook's `clientConfig`: exactly one of `url` and `service`.
fn client_config(cc: &Value, path: &str) -> Vec<Cause> {
    let url = cc.get("url").filter(|v| !v.is_null());
    let service = cc.get("service").filter(|v| !v.is_null());
    match (url, service) {
        (Some(url), None) => webhook_url(&format!("{path}.url"), url.as_str().unwrap_or("")),
        (None, Some(svc)) => webhook_service(svc, &format!("{path}.service")),
        _ => vec![Cause::required(
            path,
            "exactly one of url or service is required",
        )],
    }
}

/// `webhook.ValidateWebhookURL` with https forced.
fn webhook_url(field: &str, raw: &str) -> Vec<Cause> {
    const FORM: &str = "; desired format: https://host[/path]";
    let u = match GoUrl::parse(raw) {
        Ok(u) => u,
        Err(e) => {
            return vec![Cause::required(
                field,
                &format!("url must be a valid URL: parse {raw:?}: {e}{FORM}"),
            )]
        }
    };
    let mut causes = Vec::new();
    if u.scheme != "https" {
        causes.push(Cause::invalid(
            field,
            &Value::from(u.scheme),
            &format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if u.host.is_empty() {
        causes.push(Cause::invalid(
            field,
            &Value::from(u.host),
            &format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = u.user {
        causes.push(Cause::invalid(
            field,
            &Value::from(user),
            "user information is not permitted in the URL",
        ));
    }
    if !u.fragment.is_empty() {
        causes.push(Cause::invalid(
            field,
            &Value::from(u.fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !u.query.is_empty() {
        causes.push(Cause::invalid(
            field,
            &Value::from(u.query),
            "query parameters are not permitted in the URL",
        ));
    }
    causes
}

/// The parts of Go's `url.Parse` the webhook checks read.
struct GoUrl<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    host: &'a str,
    query: &'a str,
    fragment: &'a str,
}

impl<'a> GoUrl<'a> {
    fn parse(raw: &'a str) -> Result<Self, &'static str> {
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("net/url: invalid control character in URL");
        }
        let (rest, fragment) = raw.split_once('#').unwrap_or((raw, ""));
        let mut scheme = "";
        let mut rest = rest;
        for (i, c) in rest.char_indices() {
            match c {
                'a'..='z' | 'A'..='Z' => {}
                '0'..='9' | '+' | '-' | '.' if i > 0 => {}
                ':' if i == 0 => return Err("missing protocol scheme"),
                ':' => {
                    scheme = &rest[..i];
                    rest = &rest[i + 1..];
                    break;
                }
                _ => break,
            }
        }
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (mut user, mut host) = (None, "");
        if let Some(auth) = rest.strip_prefix("//") {
            let auth = &auth[..auth.find('/').unwrap_or(auth.len())];
            match auth.rfind('@') {
                Some(at) => {
                    user = Some(&auth[..at]);
                    host = &auth[at + 1..];
                }
                None => host = auth,
            }
        } else if scheme.is_empty() && rest.split('/').next().is_some_and(|seg| seg.contains(':')) {
            return Err("first path segment in URL cannot contain colon");
        }
        Ok(GoUrl {
            scheme,
            user,
            host,
            query,
            fragment,
        })
    }
}

/// `webhook.ValidateWebhookService`. kube declares it `(namespace, name)` and calls it with
/// `(name, namespace)`, so a missing name is reported at `.namespace` and the reverse
/// (kubernetes/kubernetes#141353); the paths here are the ones kube answers with.
fn webhook_service(svc: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if str_at(svc, "/namespace").is_empty() {
        causes.push(Cause::required(&format!("{path}.name"), ""));
    }
    if str_at(svc, "/name").is_empty() {
        causes.push(Cause::required(&format!("{path}.namespace"), ""));
    }
    if let Some(port) = svc.get("port").filter(|v| !v.is_null()) {
        if port.as_i64().is_none_or(|p| !(1..=65535).contains(&p)) {
            causes.push(Cause::invalid(
                &format!("{path}.port"),
                port,
                "port is not valid: must be between 1 and 65535, inclusive",
            ));
        }
    }
    let url_path = str_at(svc, "/path");
    if url_path.is_empty() || url_path == "/" {
        return causes;
    }
    let field = format!("{path}.path");
    let shown = Value::from(url_path);
    if url_path == "//" {
        causes.push(Cause::invalid(
            &field,
            &shown,
            "segment[0] may not be empty",
        ));
        return causes;
    }
    if !url_path.starts_with('/') {
        causes.push(Cause::invalid(&field, &shown, "must start with a '/'"));
    }
    // Go slices off the first byte whatever it is.
    let check = url_path.get(1..).unwrap_or("");
    let check = check.strip_suffix('/').unwrap_or(check);
    for (i, step) in check.split('/').enumerate() {
        if step.is_empty() {
            causes.push(Cause::invalid(
                &field,
                &shown,
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for failure in is_dns1123_subdomain(step) {
            causes.push(Cause::invalid(
                &field,
                &shown,
                &format!("segment[{i}]: {failure}"),
            ));
        }
    }
    causes
}

/// `validateMatchConditions`: at most 64, unique qualified names, expressions that compile
/// (with `params` for policies, kube's `allowParamsInMatchConditions`).
pub(super) fn match_conditions(conditions: &[Value], path: &str, compiler: &kapi_apiextensions::cel::ExpressionCompiler, params: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    if conditions.len() > 64 {
        causes.push(Cause {
            reason: "FieldValueTooMany".into(),
            message: format!(
                "{path}: Too many: {}: must have at most 64 items",
                conditions.len()
            ),
            field: path.into(),
        });
    }
    let mut names = HashSet::new();
    for (i, mc) in conditions.iter().enumerate() {
        let item = format!("{path}[{i}]");
        let expression = str_at(mc, "/expression").trim();
        if expression.is_empty() {
            causes.push(Cause::required(&format!("{item}.expression"), ""));
        } else {
            causes.extend(super::admission_cel::match_condition(compiler, &format!("{item}.expression"), expression, params));
        }
        let name = str_at(mc, "/name");
        if name.is_empty() {
            causes.push(Cause::required(&format!("{item}.name"), ""));
        } else {
            causes.extend(
                is_qualified_name(name)
                    .iter()
                    .map(|m| Cause::invalid(&format!("{item}.name"), &Value::from(name), m)),
            );
            if !names.insert(name) {
                causes.push(Cause::duplicate(
                    &format!("{item}.name"),
                    &Value::from(name),
                ));
            }
        }
    }
    causes
}
