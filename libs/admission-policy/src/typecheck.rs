//! kube's `status.typeChecking` of a ValidatingAdmissionPolicy (kube's `TypeChecker`): each
//! validation's expression and message expression compiled once per kind the policy matches
//! (at most ten, rules with wildcards skipped), with `object`, `oldObject` and `params` typed
//! by the kinds' schemas, so that a field the kind does not have is reported before any
//! request meets it. A pure function: the server's status controller writes its result.

use std::collections::BTreeSet;

use kapi_apiextensions::cel::{Declarations, ExpressionCompiler, ReturnType};
use serde_json::{json, Value};

/// kube's `maxTypesToCheck`.
const MAX_TYPES: usize = 10;

/// The kinds and schemas type checking needs, which the server knows (built-in kinds and
/// served CRDs).
pub trait SchemaResolver {
    /// The kinds a group/version/resource serves (kube's `RESTMapper.KindsFor`).
    fn kinds_for(&self, group: &str, version: &str, resource: &str) -> Vec<String>;
    /// The OpenAPI v3 schema of a kind, structural, references resolved; None when unknown.
    fn schema(&self, group: &str, version: &str, kind: &str) -> Option<Value>;
}

type Gvk = (String, String, String);

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// kube's `typesToCheck`: the kinds of the rules' exact groups, versions and resources.
fn types_to_check(policy: &Value, schemas: &dyn SchemaResolver) -> Vec<Gvk> {
    let rules = policy.pointer("/spec/matchConstraints/resourceRules").and_then(Value::as_array);
    let mut found = BTreeSet::new();
    let mut count = 0;
    for rule in rules.into_iter().flatten() {
        let (mut groups, mut versions) = (strings(rule, "apiGroups"), strings(rule, "apiVersions"));
        if groups.iter().chain(&versions).any(|s| s.contains('*')) {
            continue;
        }
        let mut resources: Vec<String> =
            strings(rule, "resources").into_iter().filter(|r| !r.contains(['*', '/'])).collect();
        groups.sort();
        versions.sort();
        resources.sort();
        for g in &groups {
            for v in &versions {
                for r in &resources {
                    for kind in schemas.kinds_for(g, v, r) {
                        found.insert((g.clone(), v.clone(), kind));
                        count += 1;
                        if count == MAX_TYPES {
                            return found.into_iter().collect();
                        }
                    }
                }
            }
        }
    }
    found.into_iter().collect()
}

/// kube's `GroupVersionKind` `%v`.
fn gvk_string((g, v, k): &Gvk) -> String {
    format!("{g}/{v}, Kind={k}")
}

/// `status.typeChecking` of `policy`: `{"expressionWarnings": [{"fieldRef", "warning"}]}`,
/// `{}` when every expression checks against every matched kind.
pub fn type_checking(policy: &Value, schemas: &dyn SchemaResolver) -> Value {
    let spec = policy.get("spec").unwrap_or(&Value::Null);
    let param_kind = spec.get("paramKind").filter(|p| !p.is_null());
    let params_schema = param_kind.and_then(|pk| {
        let api_version = pk.get("apiVersion").and_then(Value::as_str)?;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        schemas.schema(group, version, pk.get("kind").and_then(Value::as_str)?)
    });
    let decls = Declarations { params: param_kind.is_some(), authorizer: true };
    let compilers: Vec<(String, ExpressionCompiler)> = types_to_check(policy, schemas)
        .into_iter()
        .filter_map(|gvk| {
            let schema = schemas.schema(&gvk.0, &gvk.1, &gvk.2)?;
            let mut compiler = ExpressionCompiler::with_schemas(Some(&schema), params_schema.as_ref());
            for v in spec.get("variables").and_then(Value::as_array).into_iter().flatten() {
                let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
                let _ = compiler.add_variable(text("name"), text("expression"), decls);
            }
            Some((gvk_string(&gvk), compiler))
        })
        .collect();
    let check = |expression: &str| -> Option<String> {
        let results: Vec<String> = compilers
            .iter()
            .filter_map(|(gvk, compiler)| {
                let err = compiler.compile(expression, ReturnType::Any, decls).err()?;
                Some(match err.internal {
                    true => format!("{gvk}: type checking error: {}\n", err.detail),
                    false => {
                        format!("{gvk}: {}\n", err.detail.strip_prefix("compilation failed: ").unwrap_or(&err.detail))
                    }
                })
            })
            .collect();
        (!results.is_empty()).then(|| results.join("\n"))
    };
    let mut warnings = Vec::new();
    for (i, v) in spec.get("validations").and_then(Value::as_array).into_iter().flatten().enumerate() {
        for field in ["expression", "messageExpression"] {
            let Some(expression) = v.get(field).and_then(Value::as_str).filter(|e| !e.is_empty()) else { continue };
            if let Some(warning) = check(expression) {
                warnings.push(json!({"fieldRef": format!("spec.validations[{i}].{field}"), "warning": warning}));
            }
        }
    }
    if warnings.is_empty() {
        json!({})
    } else {
        json!({"expressionWarnings": warnings})
    }
}
