//! One policy evaluated for one binding and param (kube's `validator.Validate`): match
//! conditions, then every validation with its message, then the audit annotations, each set
//! with its own cost budget as kube gives it. Errors become decisions by the failure policy.

use std::sync::Arc;

use kapi_apiextensions::cel::{
    Activation, CompileError, EvalError, Evaluator, Expression, Output, Variable, RUNTIME_CEL_COST_BUDGET,
};

use crate::compiled::{CompiledPolicy, FailurePolicy, MatchCondition};

/// kube's `RuntimeCELCostBudgetMatchConditions`.
const MATCH_CONDITIONS_BUDGET: i64 = 2_500_000;
/// kube's `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// kube's `PolicyDecision`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Whether the decision refuses (kube's `ActionDeny`); errors refuse under `Fail`.
    pub deny: bool,
    pub message: String,
    /// kube's status reason (`Invalid` when a failed validation has none).
    pub reason: Option<String>,
}

/// kube's audit annotation actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AuditAction {
    Publish(String),
    Error(String),
    Exclude,
}

/// kube's `ValidateResult`.
#[derive(Debug, Default)]
pub(crate) struct ValidateResult {
    pub decisions: Vec<Decision>,
    pub audit: Vec<(String, AuditAction)>,
}

fn error_decision(f: &FailurePolicy, message: String) -> Decision {
    Decision { deny: !f.ignores(), message, reason: None }
}

/// An expression's outcome as kube's `EvaluationResult`: a compile error reads
/// `compilation error: ...`.
fn evaluate(
    ev: &mut Evaluator,
    compiled: &Result<Expression, CompileError>,
) -> Result<Result<Output, String>, EvalError> {
    match compiled {
        Err(e) => Ok(Err(format!("compilation error: {}", e.detail))),
        Ok(expr) => match ev.evaluate(expr) {
            Ok(out) => Ok(Ok(out)),
            Err(EvalError::Failed(m)) => Ok(Err(m)),
            Err(EvalError::OutOfBudget) => Err(EvalError::OutOfBudget),
        },
    }
}

/// Evaluates every expression of a set, as kube's `ForInput`: out of budget, none counts.
fn for_input<'a>(
    ev: &mut Evaluator,
    exprs: impl Iterator<Item = Option<&'a Result<Expression, CompileError>>>,
) -> Result<Vec<Option<Result<Output, String>>>, EvalError> {
    exprs.map(|e| e.map(|c| evaluate(ev, c)).transpose()).collect()
}

/// kube's match condition matcher: Ok(true) to go on; an error by the failure policy.
pub(crate) fn match_conditions(
    conditions: &[MatchCondition],
    f: &FailurePolicy,
    variables: &Arc<[Variable]>,
    activation: Arc<Activation>,
) -> Result<bool, String> {
    let fail_or_skip = |message: String| if f.ignores() { Ok(false) } else { Err(message) };
    let mut ev = Evaluator::new(activation, variables.clone(), MATCH_CONDITIONS_BUDGET);
    let results = match for_input(&mut ev, conditions.iter().map(|c| Some(&c.compiled))) {
        Ok(r) => r,
        Err(e) => return fail_or_skip(e.to_string()),
    };
    let mut errors = Vec::new();
    for r in results.into_iter().flatten() {
        match r {
            Ok(out) if out.as_bool() == Some(false) => return Ok(false),
            Ok(_) => {}
            Err(m) => errors.push(m),
        }
    }
    match errors.len() {
        0 => Ok(true),
        // kube's aggregate error text
        1 => fail_or_skip(errors.remove(0)),
        _ => fail_or_skip(format!("[{}]", errors.join(", "))),
    }
}

/// The message of a failed validation: its message expression's string if usable, its
/// message, or the expression.
fn failure_message(v: &crate::compiled::Validation, message: Option<&Result<Output, String>>) -> String {
    let from_expression = message
        .and_then(|m| m.as_ref().ok())
        .and_then(Output::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'));
    match from_expression {
        Some(m) => m.to_owned(),
        None if !v.message.trim().is_empty() => v.message.trim().to_owned(),
        None => format!("failed expression: {}", v.expression.trim()),
    }
}

/// Evaluates `policy` on `activation`; `without_namespace` gives the activation match
/// conditions run on (kube gives them no `namespaceObject`).
pub(crate) fn validate(
    policy: &CompiledPolicy,
    activation: Arc<Activation>,
    without_namespace: impl FnOnce() -> Arc<Activation>,
) -> ValidateResult {
    let f = &policy.failure_policy;
    let single = |message: String| ValidateResult { decisions: vec![error_decision(f, message)], audit: Vec::new() };
    if !policy.match_conditions.is_empty() {
        match match_conditions(&policy.match_conditions, f, &policy.variables, without_namespace()) {
            Ok(true) => {}
            Ok(false) => return ValidateResult::default(),
            Err(message) => return single(message),
        }
    }
    let mut ev = Evaluator::new(activation.clone(), policy.variables.clone(), RUNTIME_CEL_COST_BUDGET);
    let results = match for_input(&mut ev, policy.validations.iter().map(|v| Some(&v.compiled))) {
        Ok(r) => r,
        Err(e) => return single(e.to_string()),
    };
    let mut messages_ev = Evaluator::new(activation.clone(), policy.variables.clone(), ev.remaining());
    let messages = for_input(&mut messages_ev, policy.validations.iter().map(|v| v.message_expression.as_ref()));
    let mut decisions = Vec::with_capacity(results.len());
    for (i, (v, result)) in policy.validations.iter().zip(results).enumerate() {
        let decision = match (result, &messages) {
            (Some(Err(m)), _) => error_decision(f, m),
            (_, Err(e)) => error_decision(f, format!("failed messageExpression: {e}")),
            (Some(Ok(out)), Ok(messages)) if out.as_bool() != Some(true) => Decision {
                deny: true,
                message: failure_message(v, messages.get(i).and_then(Option::as_ref)),
                reason: Some(v.reason.clone().unwrap_or_else(|| "Invalid".into())),
            },
            _ => Decision { deny: false, message: String::new(), reason: None },
        };
        decisions.push(decision);
    }
    let mut audit_ev = Evaluator::new(activation, policy.variables.clone(), RUNTIME_CEL_COST_BUDGET);
    let audits = match for_input(&mut audit_ev, policy.audit_annotations.iter().map(|a| Some(&a.compiled))) {
        Ok(r) => r,
        Err(e) => return single(e.to_string()),
    };
    let audit = policy
        .audit_annotations
        .iter()
        .zip(audits)
        .map(|(a, r)| {
            let action = match r {
                Some(Err(_)) if f.ignores() => AuditAction::Exclude,
                Some(Err(m)) => AuditAction::Error(m),
                Some(Ok(out)) if out.is_null() => AuditAction::Exclude,
                Some(Ok(out)) => match out.as_str().map(str::trim) {
                    Some("") => AuditAction::Exclude,
                    Some(s) => AuditAction::Publish(s.to_owned()),
                    None => AuditAction::Error(format!(
                        "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                        a.value_expression,
                        out.type_name()
                    )),
                },
                None => AuditAction::Exclude,
            };
            (a.key.clone(), action)
        })
        .collect();
    ValidateResult { decisions, audit }
}
