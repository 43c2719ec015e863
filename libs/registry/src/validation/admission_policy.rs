//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding validation (kube's
//! `pkg/apis/admissionregistration/validation/validation.go`).
//!
//! Expressions are compiled in the CEL environment the policy plugin evaluates them with
//! ([`super::admission_cel`]): variables in order, each visible to the later ones; `params`
//! declared when the policy has a paramKind. Fields kube's v1 defaults fill before validation
//! (`failurePolicy`, `matchPolicy`, both selectors) are not required here while kapi's defaults
//! do not fill them, so objects kube accepts are accepted.

use std::collections::HashSet;

use kapi_apimachinery::validation::{
    is_dns1035_label, is_dns1123_subdomain, is_qualified_name, NameRule,
};
use kapi_apimachinery::Cause;
use kapi_apiextensions::cel::{Declarations, ExpressionCompiler, ReturnType};
use serde_json::Value;

use super::admission::{
    enum_field, go_slice, invalid_shown, match_conditions, rule_with_operations, strings,
    FAILURE_POLICIES, MATCH_POLICIES,
};
use super::{admission_cel, array_at, label_selector, str_at};

const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const POLICY_REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];

/// `ValidateValidatingAdmissionPolicy`.
pub(super) fn validate_policy(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let params = spec.get("paramKind").is_some_and(|v| !v.is_null());
    let mut compiler = ExpressionCompiler::new();
    enum_field(spec, "failurePolicy", "spec", FAILURE_POLICIES, &mut causes);
    if let Some(pk) = spec.get("paramKind").filter(|v| !v.is_null()) {
        causes.extend(param_kind(pk, "spec.paramKind"));
    }
    match spec.get("matchConstraints").filter(|v| !v.is_null()) {
        None => causes.push(Cause::required("spec.matchConstraints", "")),
        Some(mc) => {
            causes.extend(match_resources(mc, "spec.matchConstraints"));
            if array_at(mc, "/resourceRules").is_empty() {
                causes.push(Cause::required("spec.matchConstraints.resourceRules", ""));
            }
        }
    }
    // kube compiles match conditions without the policy's variables.
    causes.extend(match_conditions(array_at(spec, "/matchConditions"), "spec.matchConditions", &ExpressionCompiler::new(), params));
    for (i, v) in array_at(spec, "/variables").iter().enumerate() {
        let path = format!("spec.variables[{i}]");
        let name = str_at(v, "/name");
        if name.trim().is_empty() {
            causes.push(Cause::required(
                &format!("{path}.name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(name) {
            causes.push(Cause::invalid(
                &format!("{path}.name"),
                &Value::from(name),
                "name is not a valid CEL identifier",
            ));
        }
        let expression = str_at(v, "/expression");
        if expression.trim().is_empty() {
            causes.push(Cause::required(
                &format!("{path}.expression"),
                "expression is not specified",
            ));
        } else if let Err(e) = compiler.add_variable(name, expression, Declarations { params, authorizer: true }) {
            causes.push(admission_cel::cause(&format!("{path}.expression"), expression, &e));
        }
    }
    let validations = array_at(spec, "/validations");
    let audits = array_at(spec, "/auditAnnotations");
    if validations.is_empty() && audits.is_empty() {
        let msg = "validations or auditAnnotations must contain at least one item";
        causes.push(Cause::required("spec.validations", msg));
        causes.push(Cause::required("spec.auditAnnotations", msg));
        return causes;
    }
    for (i, v) in validations.iter().enumerate() {
        causes.extend(validation_rule(v, &format!("spec.validations[{i}]"), &compiler, params));
    }
    if audits.len() > 20 {
        causes.push(Cause::invalid(
            "spec.auditAnnotations",
            &Value::Array(audits.to_vec()),
            "must not have more than 20 auditAnnotations",
        ));
    }
    let policy_name = str_at(obj, "/metadata/name");
    let mut keys = HashSet::new();
    for (i, a) in audits.iter().enumerate() {
        let path = format!("spec.auditAnnotations[{i}]");
        let key = str_at(a, "/key");
        if policy_name.is_empty() {
            causes.push(Cause::invalid(
                &format!("{path}.key"),
                &Value::from(key),
                "requires metadata.name be non-empty",
            ));
        } else {
            let full = format!("{policy_name}/{key}");
            causes.extend(
                is_qualified_name(&full).iter().map(|m| {
                    Cause::invalid(&format!("{path}.key"), &Value::from(full.as_str()), m)
                }),
            );
        }
        let value = str_at(a, "/valueExpression").trim();
        if value.is_empty() {
            causes.push(Cause::required(
                &format!("{path}.valueExpression"),
                "valueExpression is not specified",
            ));
        } else if value.len() > 5 * 1024 {
            causes.push(Cause::required(
                &format!("{path}.valueExpression"),
                "must not exceed 5120 bytes in length",
            ));
        } else {
            let raw = str_at(a, "/valueExpression");
            if let Err(e) = compiler.compile(value, ReturnType::StringOrNull, Declarations { params, authorizer: true }) {
                causes.push(admission_cel::cause(&format!("{path}.valueExpression"), raw, &e));
            }
        }
        if !keys.insert(key) {
            causes.push(Cause::duplicate(&format!("{path}.key"), &Value::from(key)));
        }
    }
    causes
}

fn validation_rule(v: &Value, path: &str, compiler: &ExpressionCompiler, params: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let expression = str_at(v, "/expression");
    if expression.trim().is_empty() {
        causes.push(Cause::required(
            &format!("{path}.expression"),
            "expression is not specified",
        ));
    } else {
        let decls = Declarations { params, authorizer: true };
        causes.extend(admission_cel::check(compiler, &format!("{path}.expression"), expression, ReturnType::Bool, decls));
    }
    let message_expression = str_at(v, "/messageExpression");
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        causes.push(Cause::invalid(
            &format!("{path}.messageExpression"),
            &Value::from(message_expression),
            "must be non-empty if specified",
        ));
    } else if !message_expression.is_empty() {
        let decls = Declarations { params, authorizer: false };
        causes.extend(admission_cel::check(compiler, &format!("{path}.messageExpression"), message_expression, ReturnType::String, decls));
    }
    let message = str_at(v, "/message");
    if !message.is_empty() && message.trim().is_empty() {
        causes.push(Cause::invalid(
            &format!("{path}.message"),
            &Value::from(message),
            "message must be non-empty if specified",
        ));
    } else if message.trim().contains(['\n', '\r']) {
        causes.push(Cause::invalid(
            &format!("{path}.message"),
            &Value::from(message),
            "message must not contain line breaks",
        ));
    }
    enum_field(v, "reason", path, POLICY_REASONS, &mut causes);
    causes
}

/// CEL's `IDENT ::= [_a-zA-Z][_a-zA-Z0-9]* - RESERVED`, as the CEL environment defines it.
pub(super) fn is_cel_identifier(name: &str) -> bool {
    kapi_apiextensions::cel::is_identifier(name)
}

pub(super) fn param_kind(pk: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let api_version = str_at(pk, "/apiVersion");
    let field = format!("{path}.apiVersion");
    if api_version.is_empty() {
        causes.push(Cause::required(&field, ""));
    } else if api_version.matches('/').count() > 1 {
        causes.push(Cause::invalid(
            &field,
            &Value::from(api_version),
            &format!("unexpected GroupVersion string: {api_version}"),
        ));
    } else if api_version != "/" {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let errs = if group.is_empty() {
            Vec::new()
        } else {
            is_dns1123_subdomain(group)
        };
        if !errs.is_empty() {
            causes.push(Cause::invalid(&field, &Value::from(group), &errs.join(",")));
        }
        if version.is_empty() {
            causes.push(Cause::invalid(
                &field,
                &Value::from(api_version),
                "version must be specified",
            ));
        } else {
            let errs = is_dns1035_label(version);
            if !errs.is_empty() {
                causes.push(Cause::invalid(
                    &field,
                    &Value::from(version),
                    &errs.join(","),
                ));
            }
        }
    }
    let kind = str_at(pk, "/kind");
    if kind.is_empty() {
        causes.push(Cause::required(&format!("{path}.kind"), ""));
    } else {
        let errs = is_dns1035_label(&kind.to_lowercase());
        if !errs.is_empty() {
            causes.push(Cause::invalid(
                &format!("{path}.kind"),
                &Value::from(kind),
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    errs.join(",")
                ),
            ));
        }
    }
    causes
}

/// `validateMatchResources` (the match policy and selectors kube defaults are optional here).
pub(super) fn match_resources(mc: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    enum_field(mc, "matchPolicy", path, MATCH_POLICIES, &mut causes);
    for key in ["namespaceSelector", "objectSelector"] {
        if let Some(sel) = mc.get(key).filter(|v| !v.is_null()) {
            causes.extend(label_selector(sel, &format!("{path}.{key}"), false));
        }
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in array_at(mc, &format!("/{key}")).iter().enumerate() {
            causes.extend(named_rule(rule, &format!("{path}.{key}[{i}]")));
        }
    }
    causes
}

fn named_rule(rule: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut seen = HashSet::new();
    for (i, name) in strings(rule, "resourceNames").iter().enumerate() {
        let field = format!("{path}.resourceNames[{i}]");
        let shown = Value::from(name.as_str());
        causes.extend(
            NameRule::PathSegment
                .validate(name, false)
                .iter()
                .map(|m| Cause::invalid(&field, &shown, m)),
        );
        if !seen.insert(name.clone()) {
            causes.push(Cause::duplicate(&field, &shown));
        }
    }
    causes.extend(rule_with_operations(rule, path));
    causes
}

/// `ValidateValidatingAdmissionPolicyBinding`.
pub(super) fn validate_policy_binding(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let policy = str_at(spec, "/policyName");
    if policy.is_empty() {
        causes.push(Cause::required("spec.policyName", ""));
    } else {
        causes.extend(
            is_dns1123_subdomain(policy)
                .iter()
                .map(|m| Cause::invalid("spec.policyName", &Value::from(policy), m)),
        );
    }
    if let Some(pr) = spec.get("paramRef").filter(|v| !v.is_null()) {
        causes.extend(param_ref(pr, "spec.paramRef"));
    }
    if let Some(mr) = spec.get("matchResources").filter(|v| !v.is_null()) {
        // kube's path has the typo: `matchResouces`.
        causes.extend(match_resources(mr, "spec.matchResouces"));
    }
    let actions = array_at(spec, "/validationActions");
    let mut seen = HashSet::new();
    for (i, a) in actions.iter().enumerate() {
        let field = format!("spec.validationActions[{i}]");
        let s = a.as_str().unwrap_or("");
        if !VALIDATION_ACTIONS.contains(&s) {
            causes.push(Cause::not_supported(&field, a, VALIDATION_ACTIONS));
        }
        if !seen.insert(s) {
            causes.push(Cause::duplicate(&field, a));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        causes.push(invalid_shown(
            "spec.validationActions",
            &go_slice("admissionregistration.ValidationAction", actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        causes.push(Cause::required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    causes
}

pub(super) fn param_ref(pr: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = str_at(pr, "/name");
    let selector = pr.get("selector").filter(|v| !v.is_null());
    if !name.is_empty() {
        let shown = Value::from(name);
        causes.extend(
            NameRule::PathSegment
                .validate(name, false)
                .iter()
                .map(|m| Cause::invalid(&format!("{path}.name"), &shown, m)),
        );
        if selector.is_some() {
            causes.push(Cause::forbidden(
                &format!("{path}.name"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if let Some(sel) = selector {
        causes.extend(label_selector(sel, &format!("{path}.selector"), false));
        if !name.is_empty() {
            causes.push(Cause::forbidden(
                &format!("{path}.selector"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if name.is_empty() && selector.is_none() {
        causes.push(Cause::required(
            path,
            "one of name or selector must be specified",
        ));
    }
    let action = str_at(pr, "/parameterNotFoundAction");
    if action.is_empty() {
        causes.push(Cause::required(
            &format!("{path}.parameterNotFoundAction"),
            "",
        ));
    } else if action != "Deny" && action != "Allow" {
        causes.push(Cause::not_supported(
            &format!("{path}.parameterNotFoundAction"),
            &Value::from(action),
            &["Deny", "Allow"],
        ));
    }
    causes
}
