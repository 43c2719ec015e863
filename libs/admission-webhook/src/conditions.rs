//! A webhook's `matchConditions`: CEL expressions over `object`, `oldObject`, `request` and
//! `authorizer`, in the environment CRD rules and admission policies use; the webhook is called
//! only when none is false. Errors follow the webhook's failurePolicy: Fail refuses the
//! request, Ignore skips the webhook (kube's matchconditions matcher).

use std::sync::Arc;

use kapi_admission::Attributes;
use kapi_apiextensions::cel::{
    Activation, AuthorizerInput, AuthzUser, CelAuthorizer, CompileError, Declarations, EvalError, Evaluator, Expression, ExpressionCompiler,
    Input, RequestResource, ReturnType,
};
use serde_json::Value;

/// kube's `RuntimeCELCostBudgetMatchConditions`: the budget of one webhook's conditions.
const BUDGET: i64 = 2_500_000;

/// The compiled conditions of one webhook.
pub struct MatchConditions {
    conditions: Vec<(String, Result<Expression, CompileError>)>,
}

/// What the conditions decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Call the webhook.
    Call,
    /// Do not call it.
    Skip,
    /// Refuse the request (an error under failurePolicy Fail).
    Refuse(String),
}

impl MatchConditions {
    /// Compiles `matchConditions`; an expression that does not compile (validation refused it
    /// when the configuration was written) counts as an evaluation error.
    pub fn compile(conditions: Option<&Value>) -> MatchConditions {
        let compiler = ExpressionCompiler::new();
        let decls = Declarations { params: false, authorizer: true };
        let conditions = conditions
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|c| {
                        let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                        (text("name"), compiler.compile(&text("expression"), ReturnType::Bool, decls))
                    })
                    .collect()
            })
            .unwrap_or_default();
        MatchConditions { conditions }
    }

    /// Whether any condition is set (the request's CEL form is built only then).
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Evaluates the conditions on `attrs`, whose AdmissionRequest form is `request`.
    pub fn evaluate(&self, attrs: &Attributes, request: &Value, authorizer: Option<&Arc<dyn CelAuthorizer>>, ignore_failures: bool) -> Verdict {
        if self.conditions.is_empty() {
            return Verdict::Call;
        }
        let authorizer = authorizer.map(|authorizer| AuthorizerInput {
            authorizer: authorizer.clone(),
            user: AuthzUser { name: attrs.user.name.clone(), uid: attrs.user.uid.clone(), groups: attrs.user.groups.clone(), extra: attrs.user.extra.clone() },
            request_resource: RequestResource {
                group: attrs.resource.group.clone(),
                resource: attrs.resource.name.clone(),
                subresource: attrs.subresource.clone(),
                namespace: attrs.namespace.clone(),
                name: attrs.name.clone(),
            },
        });
        let input = Input { object: attrs.object.as_ref(), old_object: attrs.old_object.as_ref(), request: Some(request), authorizer, ..Input::default() };
        let mut evaluator = Evaluator::new(Arc::new(Activation::new(&input)), Arc::from(Vec::new()), BUDGET);
        let mut errors = Vec::new();
        for (_, compiled) in &self.conditions {
            let expression = match compiled {
                Ok(expression) => expression,
                Err(e) => {
                    errors.push(e.detail.clone());
                    continue;
                }
            };
            match evaluator.evaluate(expression) {
                Ok(result) if result.as_bool() == Some(false) => return Verdict::Skip,
                Ok(_) => {}
                // Out of budget ends the evaluation: an error whatever the other results.
                Err(e @ EvalError::OutOfBudget) => return fail(ignore_failures, e.to_string()),
                Err(EvalError::Failed(e)) => errors.push(e),
            }
        }
        match errors.len() {
            0 => Verdict::Call,
            1 => fail(ignore_failures, errors.remove(0)),
            _ => fail(ignore_failures, format!("[{}]", errors.join(", "))),
        }
    }
}

fn fail(ignore_failures: bool, error: String) -> Verdict {
    if ignore_failures {
        Verdict::Skip
    } else {
        Verdict::Refuse(error)
    }
}
