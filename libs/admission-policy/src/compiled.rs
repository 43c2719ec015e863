//! A ValidatingAdmissionPolicy compiled once (kube's `compilePolicy`): its variables, match
//! conditions, validations with their message expressions, and audit annotations. An
//! expression that fails to compile stays with its error, which fails only what uses it.

use std::sync::Arc;

use kapi_apiextensions::cel::{CompileError, Declarations, Expression, ExpressionCompiler, ReturnType, Variable};
use serde_json::Value;

/// kube's `failurePolicy` (Fail when absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FailurePolicy {
    Fail,
    Ignore,
    /// A value kube does not know (validation refuses it; an old object may hold one).
    Unknown(String),
}

impl FailurePolicy {
    pub(crate) fn of(spec: &Value) -> Self {
        match spec.get("failurePolicy").and_then(Value::as_str) {
            None | Some("Fail") => FailurePolicy::Fail,
            Some("Ignore") => FailurePolicy::Ignore,
            Some(other) => FailurePolicy::Unknown(other.to_owned()),
        }
    }

    /// Whether an error admits the request (kube's `policyDecisionActionForError`).
    pub(crate) fn ignores(&self) -> bool {
        *self == FailurePolicy::Ignore
    }
}

/// `spec.validations[i]`.
#[derive(Debug)]
pub(crate) struct Validation {
    pub expression: String,
    pub compiled: Result<Expression, CompileError>,
    pub message: String,
    pub reason: Option<String>,
    pub message_expression: Option<Result<Expression, CompileError>>,
}

/// `spec.matchConditions[i]`.
#[derive(Debug)]
pub(crate) struct MatchCondition {
    pub compiled: Result<Expression, CompileError>,
}

/// `spec.auditAnnotations[i]`.
#[derive(Debug)]
pub(crate) struct AuditAnnotation {
    pub key: String,
    pub value_expression: String,
    pub compiled: Result<Expression, CompileError>,
}

/// One policy, compiled.
#[derive(Debug)]
pub(crate) struct CompiledPolicy {
    pub failure_policy: FailurePolicy,
    pub variables: Arc<[Variable]>,
    pub match_conditions: Vec<MatchCondition>,
    pub validations: Vec<Validation>,
    pub audit_annotations: Vec<AuditAnnotation>,
}

/// The variables and match conditions both kinds of policy have, compiled with `decls`; the
/// compiler, which knows the variables, compiles the rest.
pub(crate) fn compile_common(spec: &Value, decls: Declarations) -> (ExpressionCompiler, Vec<MatchCondition>) {
    let mut compiler = ExpressionCompiler::new();
    for v in items(spec, "variables") {
        // an error is kept with the variable and reported where it is read
        let _ = compiler.add_variable(text(v, "name"), text(v, "expression"), decls);
    }
    let match_conditions = items(spec, "matchConditions")
        .iter()
        .map(|c| MatchCondition { compiled: compiler.compile(text(c, "expression"), ReturnType::Bool, decls) })
        .collect();
    (compiler, match_conditions)
}

pub(crate) fn items<'a>(spec: &'a Value, key: &str) -> &'a [Value] {
    spec.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

pub(crate) fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl CompiledPolicy {
    /// Compiles `policy` (a ValidatingAdmissionPolicy object).
    pub(crate) fn compile(policy: &Value) -> CompiledPolicy {
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        let params = spec.get("paramKind").is_some_and(|p| !p.is_null());
        // kube: validations, match conditions, variables and audit annotations may check with
        // the authorizer; message expressions may not
        let full = Declarations { params, authorizer: true };
        let messages = Declarations { params, authorizer: false };
        let (compiler, match_conditions) = compile_common(spec, full);
        let validations = items(spec, "validations")
            .iter()
            .map(|v| {
                let message_expression = Some(text(v, "messageExpression"))
                    .filter(|m| !m.is_empty())
                    .map(|m| compiler.compile(m, ReturnType::String, messages));
                Validation {
                    expression: text(v, "expression").to_owned(),
                    compiled: compiler.compile(text(v, "expression"), ReturnType::Bool, full),
                    message: text(v, "message").to_owned(),
                    reason: v.get("reason").and_then(Value::as_str).map(str::to_owned),
                    message_expression,
                }
            })
            .collect();
        let audit_annotations = items(spec, "auditAnnotations")
            .iter()
            .map(|a| AuditAnnotation {
                key: text(a, "key").to_owned(),
                value_expression: text(a, "valueExpression").to_owned(),
                compiled: compiler.compile(text(a, "valueExpression"), ReturnType::StringOrNull, full),
            })
            .collect();
        CompiledPolicy {
            failure_policy: FailurePolicy::of(spec),
            variables: compiler.variables(),
            match_conditions,
            validations,
            audit_annotations,
        }
    }
}

/// `spec.mutations[i].patchType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    JsonPatch,
    ApplyConfiguration,
}

/// `spec.mutations[i]`; None where kube compiles no patcher (an unknown patch type, a missing
/// expression object).
#[derive(Debug)]
pub(crate) struct Mutation {
    pub patch_type: PatchType,
    pub compiled: Result<Expression, CompileError>,
}

/// One MutatingAdmissionPolicy, compiled (kube's mutating `compilePolicy`).
#[derive(Debug)]
pub(crate) struct CompiledMutatingPolicy {
    pub failure_policy: FailurePolicy,
    pub variables: Arc<[Variable]>,
    pub match_conditions: Vec<MatchCondition>,
    pub mutations: Vec<Option<Mutation>>,
    /// `reinvocationPolicy: IfNeeded`.
    pub reinvoke_if_needed: bool,
}

impl CompiledMutatingPolicy {
    /// Compiles `policy` (a MutatingAdmissionPolicy object).
    pub(crate) fn compile(policy: &Value) -> CompiledMutatingPolicy {
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        let params = spec.get("paramKind").is_some_and(|p| !p.is_null());
        let decls = Declarations { params, authorizer: true };
        let (compiler, match_conditions) = compile_common(spec, decls);
        let mutations = items(spec, "mutations")
            .iter()
            .map(|m| {
                let (patch_type, ret, field) = match text(m, "patchType") {
                    "JSONPatch" => (PatchType::JsonPatch, ReturnType::JsonPatch, "jsonPatch"),
                    "ApplyConfiguration" => {
                        (PatchType::ApplyConfiguration, ReturnType::ApplyConfiguration, "applyConfiguration")
                    }
                    _ => return None,
                };
                let expression = m.get(field).filter(|e| e.is_object())?;
                Some(Mutation { patch_type, compiled: compiler.compile(text(expression, "expression"), ret, decls) })
            })
            .collect();
        CompiledMutatingPolicy {
            failure_policy: FailurePolicy::of(spec),
            variables: compiler.variables(),
            match_conditions,
            mutations,
            reinvoke_if_needed: text(spec, "reinvocationPolicy") == "IfNeeded",
        }
    }
}
