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

use kapi_apiextensions::cel::{Declarations, ExpressionCompiler, ReturnType};
use kapi_apimachinery::validation::is_dns1123_subdomain;
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::admission::{enum_field, match_conditions, FAILURE_POLICIES};
use super::admission_policy::{is_cel_identifier, match_resources, param_kind, param_ref};
use super::{admission_cel, array_at, str_at};

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

#[cfg(test)]
#[path = "mutating_policy_tests.rs"]
mod tests;
