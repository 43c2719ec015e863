//! CEL expressions: CRD `x-kubernetes-validations` rules and admission expressions
//! (ValidatingAdmissionPolicy, match conditions), through parsing, kapi's type checker and
//! cost estimator, then evaluation.

use std::sync::Arc;

use kapi_apiextensions::cel::{
    validate_crd_schema, Activation, Declarations, Evaluator, ExpressionCompiler, Input, ReturnType,
    RUNTIME_CEL_COST_BUDGET,
};
use serde_json::{json, Value};

/// Expressions estimated above this are not evaluated: kube refuses them before they run.
const MAX_EVALUATED_COST: u64 = 1_000_000;

/// One expression. Asserts: compile errors carry kube's texts; an expression that compiles
/// also compiles in parentheses, to the same type and cost (parentheses are not in the AST);
/// as a CRD rule on a typed schema, the compile and cost checks report causes with kube's
/// paths; evaluation on an object within the runtime budget returns a value or an error.
pub fn cel(data: &[u8]) {
    let Some(expr) = crate::text(data) else { return };
    let compiler = ExpressionCompiler::new();
    let decls = Declarations { params: true, authorizer: true };
    let compiled = match compiler.compile(expr, ReturnType::Any, decls) {
        Ok(c) => c,
        Err(e) => {
            assert!(
                e.detail.starts_with("compilation failed: ") || e.detail.starts_with("must evaluate to"),
                "unexpected compile error text: {}",
                e.detail
            );
            crd_rule(expr);
            return;
        }
    };
    let wrapped = format!("({expr}\n)");
    match compiler.compile(&wrapped, ReturnType::Any, decls) {
        Ok(w) => {
            assert_eq!(w.output_type(), compiled.output_type(), "parentheses changed the type of {expr:?}");
            assert_eq!(w.estimated_cost(), compiled.estimated_cost(), "parentheses changed the cost of {expr:?}");
        }
        Err(e) => panic!("{expr:?} compiles but not in parentheses: {}", e.detail),
    }
    crd_rule(expr);
    if compiled.estimated_cost() > MAX_EVALUATED_COST || compiled.reads().has("authorizer") {
        return;
    }
    let object = sample_object();
    let params = json!({"limit": 3, "names": ["a", "b"]});
    let input = Input { object: Some(&object), old_object: Some(&object), params: Some(&params), ..Input::default() };
    let mut evaluator = Evaluator::new(Arc::new(Activation::new(&input)), compiler.variables(), RUNTIME_CEL_COST_BUDGET);
    let _ = evaluator.evaluate(&compiled);
}

/// The expression as a CRD validation rule on a typed schema: `self` is the object below.
fn crd_rule(rule: &str) {
    let schema = json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": rule}],
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [{"rule": rule, "messageExpression": rule}],
                "properties": {
                    "replicas": {"type": "integer"},
                    "name": {"type": "string", "maxLength": 63},
                    "ports": {"type": "array", "maxItems": 10, "items": {"type": "integer"}, "x-kubernetes-validations": [{"rule": rule}]},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "quantity": {"x-kubernetes-int-or-string": true}
                }
            }
        }
    });
    for cause in validate_crd_schema(&schema, "spec.validation.openAPIV3Schema", false) {
        assert!(cause.field.starts_with("spec.validation.openAPIV3Schema"), "cause at {:?}: {}", cause.field, cause.message);
    }
}

fn sample_object() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"replicas": 3, "name": "web", "ports": [80, 443], "labels": {"tier": "front"}, "quantity": "500m"}
    })
}
