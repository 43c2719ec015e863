//! MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding validation (kube's
//! `ValidateMutatingAdmissionPolicy` and `ValidateMutatingAdmissionPolicyBinding` in
//! `pkg/apis/admissionregistration/validation/validation.go`).
//!
//! The spec shares most of its fields with ValidatingAdmissionPolicy and kube validates them
//! with the same functions (param kind, match resources, match conditions, variables, param
//! ref); what is mutating's own: only CREATE, UPDATE and CONNECT (or `*`) can be matched, since
//! a delete has nothing to mutate; `mutations` (a union on `patchType`, each expression compiled
//! with the mutation types for the result its patch type takes: a list of `JSONPatch`, or an
//! `Object`); `reinvocationPolicy` is required. As for validating policies, the fields kube's
//! v1 defaults fill before validation (`failurePolicy`, `matchPolicy`, both selectors) are not
//! required while kapi's defaults do not fill them.

use std::collections::HashSet;

use kapi_apiextensions::cel::{Declarations, ExpressionCompiler, ReturnType};
use kapi_apimachinery::validation::{is_dns1035_label, is_dns1123_subdomain, NameRule};
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::admission::{enum_field, match_conditions, rule_with_operations, strings, FAILURE_POLICIES, MATCH_POLICIES};
use super::{admission_cel, array_at, label_selector, str_at};

/// kube's `supportedMutatingOperations`, listed as Go's sorted set.
const MUTATING_OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "UPDATE"];
/// kube's `supportedReinvocationPolicies`.
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
/// kube's `supportedPatchTypes`.
const PATCH_TYPES: &[&str] = &["ApplyConfiguration", "JSONPatch"];

/// Create (and update) validation of either kind.
pub(super) fn validate(kind: &str, obj: &Value) -> Vec<Cause> {
    match kind {
        "MutatingAdmissionPolicy" => validate_policy(obj),
        _ => validate_binding(obj),
    }
}

/// `validateMutatingAdmissionPolicySpec`.
fn validate_policy(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let params = spec.get("paramKind").is_some_and(|v| !v.is_null());
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
            causes.extend(mutating_operations(mc, "spec.matchConstraints"));
        }
    }
    // kube compiles match conditions without the policy's variables.
    let conditions = array_at(spec, "/matchConditions");
    causes.extend(match_conditions(conditions, "spec.matchConditions", &ExpressionCompiler::new(), params));
    let decls = Declarations { params, authorizer: true };
    let mut compiler = ExpressionCompiler::new();
    for (i, v) in array_at(spec, "/variables").iter().enumerate() {
        let path = format!("spec.variables[{i}]");
        let name = str_at(v, "/name");
        if name.trim().is_empty() {
            causes.push(Cause::required(&format!("{path}.name"), "name is not specified"));
        } else if !is_cel_identifier(name) {
            causes.push(Cause::invalid(&format!("{path}.name"), &Value::from(name), "name is not a valid CEL identifier"));
        }
        let expression = str_at(v, "/expression");
        if expression.trim().is_empty() {
            causes.push(Cause::required(&format!("{path}.expression"), "expression is not specified"));
        } else if let Err(e) = compiler.add_variable(name, expression, decls) {
            causes.push(admission_cel::cause(&format!("{path}.expression"), expression, &e));
        }
    }
    let mutations = array_at(spec, "/mutations");
    if mutations.is_empty() {
        causes.push(Cause::required("spec.mutations", "mutations must contain at least one item"));
    }
    for (i, m) in mutations.iter().enumerate() {
        causes.extend(mutation(m, &format!("spec.mutations[{i}]"), &compiler, decls));
    }
    match spec.get("reinvocationPolicy").filter(|v| !v.is_null()) {
        None => causes.push(Cause::required("spec.reinvocationPolicy", "")),
        Some(Value::String(p)) if p.is_empty() => causes.push(Cause::required("spec.reinvocationPolicy", "")),
        Some(p) if !p.as_str().is_some_and(|p| REINVOCATION_POLICIES.contains(&p)) => {
            causes.push(Cause::not_supported("spec.reinvocationPolicy", p, REINVOCATION_POLICIES));
        }
        Some(_) => {}
    }
    causes
}

/// `validateMutation`: the `patchType` union and its expression.
fn mutation(m: &Value, path: &str, compiler: &ExpressionCompiler, decls: Declarations) -> Vec<Cause> {
    let (own, own_ret, other) = match m.get("patchType") {
        None | Some(Value::Null) => return vec![Cause::required(&format!("{path}.patchType"), "")],
        Some(Value::String(t)) if t.is_empty() => return vec![Cause::required(&format!("{path}.patchType"), "")],
        Some(Value::String(t)) if t == "JSONPatch" => ("jsonPatch", ReturnType::JsonPatch, "applyConfiguration"),
        Some(Value::String(t)) if t == "ApplyConfiguration" => {
            ("applyConfiguration", ReturnType::ApplyConfiguration, "jsonPatch")
        }
        Some(other) => return vec![Cause::not_supported(&format!("{path}.patchType"), other, PATCH_TYPES)],
    };
    let kind = str_at(m, "/patchType");
    let mut causes = Vec::new();
    match m.get(own).filter(|v| !v.is_null()) {
        None => causes.push(Cause::required(
            &format!("{path}.{own}"),
            &format!("must be specified when patchType is {kind}"),
        )),
        Some(body) => {
            let field = format!("{path}.{own}.expression");
            let expression = str_at(body, "/expression").trim();
            if expression.is_empty() {
                causes.push(Cause::required(&field, ""));
            } else {
                causes.extend(admission_cel::check(compiler, &field, expression, own_ret, decls));
            }
        }
    }
    if m.get(other).is_some_and(|v| !v.is_null()) {
        causes.push(Cause::invalid(
            &format!("{path}.{other}"),
            &Value::from(format!("{{{other}}}")),
            &format!("must not be specified when patchType is {kind}"),
        ));
    }
    causes
}

/// kube refuses operations a mutation cannot apply to, on each rule of `resourceRules` (the
/// field path names no index, as kube's does not).
fn mutating_operations(mr: &Value, path: &str) -> Vec<Cause> {
    let field = format!("{path}.resourceRules.operations");
    array_at(mr, "/resourceRules")
        .iter()
        .flat_map(|rule| array_at(rule, "/operations"))
        .filter(|op| !op.as_str().is_some_and(|o| MUTATING_OPERATIONS.contains(&o)))
        .map(|op| Cause::not_supported(&field, op, MUTATING_OPERATIONS))
        .collect()
}

/// `validateMutatingAdmissionPolicyBindingSpec`.
fn validate_binding(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let policy = str_at(spec, "/policyName");
    if policy.is_empty() {
        causes.push(Cause::required("spec.policyName", ""));
    } else {
        causes.extend(is_dns1123_subdomain(policy).iter().map(|m| Cause::invalid("spec.policyName", &Value::from(policy), m)));
    }
    if let Some(pr) = spec.get("paramRef").filter(|v| !v.is_null()) {
        causes.extend(param_ref(pr, "spec.paramRef"));
    }
    if let Some(mr) = spec.get("matchResources").filter(|v| !v.is_null()) {
        causes.extend(match_resources(mr, "spec.matchResources"));
        causes.extend(mutating_operations(mr, "spec.matchResources"));
    }
    causes
}

// What follows is kube's shared validation of policy fields, as the validating policy's module
// has it (private there).

/// CEL's `IDENT ::= [_a-zA-Z][_a-zA-Z0-9]* - RESERVED`.
fn is_cel_identifier(name: &str) -> bool {
    const RESERVED: &[&str] = &[
        "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import",
        "let", "loop", "package", "namespace", "return", "var", "void", "while",
    ];
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED.contains(&name)
}

/// `validateParamKind`.
fn param_kind(pk: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let api_version = str_at(pk, "/apiVersion");
    let field = format!("{path}.apiVersion");
    if api_version.is_empty() {
        causes.push(Cause::required(&field, ""));
    } else if api_version.matches('/').count() > 1 {
        let detail = format!("unexpected GroupVersion string: {api_version}");
        causes.push(Cause::invalid(&field, &Value::from(api_version), &detail));
    } else if api_version != "/" {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let errs = if group.is_empty() { Vec::new() } else { is_dns1123_subdomain(group) };
        if !errs.is_empty() {
            causes.push(Cause::invalid(&field, &Value::from(group), &errs.join(",")));
        }
        if version.is_empty() {
            causes.push(Cause::invalid(&field, &Value::from(api_version), "version must be specified"));
        } else {
            let errs = is_dns1035_label(version);
            if !errs.is_empty() {
                causes.push(Cause::invalid(&field, &Value::from(version), &errs.join(",")));
            }
        }
    }
    let kind = str_at(pk, "/kind");
    if kind.is_empty() {
        causes.push(Cause::required(&format!("{path}.kind"), ""));
    } else {
        let errs = is_dns1035_label(&kind.to_lowercase());
        if !errs.is_empty() {
            let detail = format!("may have mixed case, but should otherwise match: {}", errs.join(","));
            causes.push(Cause::invalid(&format!("{path}.kind"), &Value::from(kind), &detail));
        }
    }
    causes
}

/// `validateMatchResources` (the match policy and selectors kube defaults are optional here).
fn match_resources(mr: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    enum_field(mr, "matchPolicy", path, MATCH_POLICIES, &mut causes);
    for key in ["namespaceSelector", "objectSelector"] {
        if let Some(sel) = mr.get(key).filter(|v| !v.is_null()) {
            causes.extend(label_selector(sel, &format!("{path}.{key}"), false));
        }
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in array_at(mr, &format!("/{key}")).iter().enumerate() {
            let rule_path = format!("{path}.{key}[{i}]");
            let mut seen = HashSet::new();
            for (j, name) in strings(rule, "resourceNames").iter().enumerate() {
                let field = format!("{rule_path}.resourceNames[{j}]");
                let shown = Value::from(name.as_str());
                causes.extend(NameRule::PathSegment.validate(name, false).iter().map(|m| Cause::invalid(&field, &shown, m)));
                if !seen.insert(name.clone()) {
                    causes.push(Cause::duplicate(&field, &shown));
                }
            }
            causes.extend(rule_with_operations(rule, &rule_path));
        }
    }
    causes
}

/// `validateParamRef`.
fn param_ref(pr: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = str_at(pr, "/name");
    let selector = pr.get("selector").filter(|v| !v.is_null());
    let exclusive = "name and selector are mutually exclusive";
    if !name.is_empty() {
        let shown = Value::from(name);
        let field = format!("{path}.name");
        causes.extend(NameRule::PathSegment.validate(name, false).iter().map(|m| Cause::invalid(&field, &shown, m)));
        if selector.is_some() {
            causes.push(Cause::forbidden(&field, exclusive));
        }
    }
    if let Some(sel) = selector {
        causes.extend(label_selector(sel, &format!("{path}.selector"), false));
        if !name.is_empty() {
            causes.push(Cause::forbidden(&format!("{path}.selector"), exclusive));
        }
    }
    if name.is_empty() && selector.is_none() {
        causes.push(Cause::required(path, "one of name or selector must be specified"));
    }
    let action = str_at(pr, "/parameterNotFoundAction");
    let field = format!("{path}.parameterNotFoundAction");
    if action.is_empty() {
        causes.push(Cause::required(&field, ""));
    } else if action != "Deny" && action != "Allow" {
        causes.push(Cause::not_supported(&field, &Value::from(action), &["Deny", "Allow"]));
    }
    causes
}

#[cfg(test)]
#[path = "mutating_policy_tests.rs"]
mod tests;
