//! A ValidatingAdmissionPolicy compiled once (kube's `compilePolicy`): its variables, match
//! conditions, validations with their message expressions, and audit annotations. An
//! expression that fails to compile stays with its error, which fails only what uses it.

use std::sync::Arc;

use kapi_apiextensions::cel::{
    CompileError, Declarations, Expression, ExpressionCompiler, Reads, ReturnType, Variable,
};
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
    /// What its expressions read, so that only that is built and converted per request.
    pub reads: Reads,
    /// Whether its worst case is long enough to run off the async worker ([`SLOW_COST`]).
    pub slow: bool,
}

/// The worst-case cost (the checker's estimate with every input at its largest) from which a
/// policy's evaluation leaves the async worker: about a millisecond, if kube's budget of ten
/// million is about a second. Cheaper policies (most: field checks without comprehensions) run
/// in place, where moving the worker's other tasks to another thread would cost more than
/// the evaluation itself.
pub(crate) const SLOW_COST: u64 = 10_000;

/// The reads and summed worst-case cost of a policy's expressions, variables included.
pub(crate) fn footprint<'a>(
    variables: &'a [Variable],
    exprs: impl Iterator<Item = &'a Result<Expression, CompileError>>,
) -> (Reads, u64) {
    let compiled = variables.iter().map(Variable::result).chain(exprs).filter_map(|r| r.as_ref().ok());
    compiled.fold((Reads::default(), 0), |(reads, cost), e| {
        (reads.union(e.reads()), cost.saturating_add(e.estimated_cost()))
    })
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
        let validations: Vec<Validation> = items(spec, "validations")
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
        let audit_annotations: Vec<AuditAnnotation> = items(spec, "auditAnnotations")
            .iter()
            .map(|a| AuditAnnotation {
                key: text(a, "key").to_owned(),
                value_expression: text(a, "valueExpression").to_owned(),
                compiled: compiler.compile(text(a, "valueExpression"), ReturnType::StringOrNull, full),
            })
            .collect();
        let variables = compiler.variables();
        let exprs = match_conditions.iter().map(|m| &m.compiled).chain(validations.iter().flat_map(|v: &Validation| {
            std::iter::once(&v.compiled).chain(v.message_expression.as_ref())
        }));
        let exprs = exprs.chain(audit_annotations.iter().map(|a| &a.compiled));
        let (reads, cost) = footprint(&variables, exprs);
        CompiledPolicy {
            failure_policy: FailurePolicy::of(spec),
            variables,
            match_conditions,
            validations,
            audit_annotations,
            reads,
            slow: cost >= SLOW_COST,
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
    /// What its expressions read.
    pub reads: Reads,
}

impl CompiledMutatingPolicy {
    /// Compiles `policy` (a MutatingAdmissionPolicy object).
    pub(crate) fn compile(policy: &Value) -> CompiledMutatingPolicy {
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        let params = spec.get("paramKind").is_some_and(|p| !p.is_null());
        let decls = Declarations { params, authorizer: true };
        let (compiler, match_conditions) = compile_common(spec, decls);
        let mutations: Vec<Option<Mutation>> = items(spec, "mutations")
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
        let variables = compiler.variables();
        let exprs = match_conditions.iter().map(|m| &m.compiled);
        let exprs = exprs.chain(mutations.iter().flatten().map(|m: &Mutation| &m.compiled));
        let (reads, _) = footprint(&variables, exprs);
        CompiledMutatingPolicy {
            failure_policy: FailurePolicy::of(spec),
            variables,
            match_conditions,
            mutations,
            reinvoke_if_needed: text(spec, "reinvocationPolicy") == "IfNeeded",
            reads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(validations: Value, extra: Value) -> CompiledPolicy {
        let mut spec = json!({"validations": validations});
        if let Value::Object(m) = extra {
            for (k, v) in m {
                spec[k] = v;
            }
        }
        CompiledPolicy::compile(&json!({"spec": spec}))
    }

    #[test]
    fn a_field_check_reads_only_the_object_and_is_not_slow() {
        let p = policy(json!([{"expression": "!has(object.data) || object.data.size() <= 16"}]), json!({}));
        assert!(!p.slow);
        assert!(p.reads.has("object"));
        for other in ["oldObject", "params", "request", "namespaceObject", "authorizer"] {
            assert!(!p.reads.has(other), "{other}");
        }
        // cheap enough to run unpriced (apiextensions' CHEAP)
        let cost = p.validations[0].compiled.as_ref().unwrap().estimated_cost();
        assert!(cost <= 1_000, "{cost}");
    }

    #[test]
    fn reads_gather_variables_messages_and_match_conditions() {
        let p = policy(
            json!([{"expression": "variables.v", "messageExpression": "string(request.name)"}]),
            json!({"variables": [{"name": "v", "expression": "namespaceObject.metadata.name == 'x'"}],
                   "matchConditions": [{"name": "m", "expression": "authorizer.requestResource.check('get').allowed()"}]}),
        );
        for read in ["request", "namespaceObject", "authorizer"] {
            assert!(p.reads.has(read), "{read}");
        }
        assert!(!p.reads.has("object") && !p.reads.has("params"));
    }

    #[test]
    fn a_comprehension_over_the_object_is_slow() {
        let p = policy(json!([{"expression": "object.spec.containers.all(c, c.image != 'x')"}]), json!({}));
        assert!(p.slow);
    }
}
