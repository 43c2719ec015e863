//! `x-kubernetes-validations` through the custom-resource strategy: rules compiled once with
//! the schema, evaluated on create and (with `oldSelf`) on update.

use std::sync::Arc;

use kapi_apiextensions::cel::CelValidator;
use kapi_apiextensions::schema::Structural;
use kapi_registry::strategy::Strategy;
use serde_json::json;

use crate::custom::CustomStrategy;

fn strategy() -> Option<CustomStrategy> {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"replicas": {"type": "integer"}, "mode": {"type": "string"}},
        "x-kubernetes-validations": [
            {"rule": "self.replicas <= 10", "message": "at most 10 replicas"},
            {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable", "reason": "FieldValueForbidden", "fieldPath": ".mode"}
        ]}}});
    let structural = Arc::new(Structural::new(&schema).ok()?);
    let cel = Arc::new(CelValidator::new(&structural));
    let spec = kapi_registry::catalog::find("", "v1", "configmaps")?;
    Some(CustomStrategy { spec, schema: Some(structural), selectable: Vec::new(), cel: Some(cel) })
}

fn obj(replicas: i64, mode: &str) -> serde_json::Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"},
        "spec": {"replicas": replicas, "mode": mode}})
}

#[test]
fn strategy_runs_cel_rules() {
    let Some(s) = strategy() else { panic!("strategy") };
    assert!(s.validate(&obj(3, "a")).is_empty());
    let m: Vec<String> = s.validate(&obj(11, "a")).into_iter().map(|c| c.message).collect();
    assert_eq!(m, vec!["spec: Invalid value: at most 10 replicas"]);
    let m: Vec<String> = s.validate_update(&obj(3, "b"), &obj(3, "a")).into_iter().map(|c| c.message).collect();
    assert_eq!(m, vec!["spec.mode: Forbidden: mode is immutable"]);
    // an unchanged invalid value is ratcheted
    assert!(s.validate_update(&obj(11, "a"), &obj(11, "a")).is_empty());
}
