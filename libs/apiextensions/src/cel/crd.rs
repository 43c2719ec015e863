//! The checks CRD validation makes on `x-kubernetes-validations` (kube's
//! `ValidateCustomResourceDefinitionOpenAPISchema` CEL part): each rule compiles, its
//! estimated cost (times how many times it can run per object) is within
//! `StaticEstimatedCostLimit`, and the schema's total is within `StaticEstimatedCRDCostLimit`.

use kapi_apimachinery::Cause;
use serde_json::Value;

use super::compile::{compile_rule, cost_error_message, RuleSpec};
use super::runtime::child;
use super::types::{decl_of, MAX_REQUEST_SIZE_BYTES};
use crate::gofmt::go_json_string as go_string;
use crate::schema::{AdditionalProperties, Schema};

/// kube's `StaticEstimatedCostLimit`.
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// kube's `StaticEstimatedCRDCostLimit`.
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

/// The internal `ValidationRule` as kube prints it in an `Invalid value` (JSON of the internal
/// struct, which has no json tags).
fn rule_value(r: &RuleSpec) -> String {
    let opt = |o: &Option<String>| o.as_deref().map_or("null".to_string(), go_string);
    format!(
        "{{\"Rule\":{},\"Message\":{},\"MessageExpression\":{},\"Reason\":{},\"FieldPath\":{},\"OptionalOldSelf\":{}}}",
        go_string(&r.rule),
        go_string(&r.message),
        go_string(&r.message_expression),
        opt(&r.reason),
        go_string(&r.field_path),
        r.optional_old_self.map_or("null".to_string(), |b| b.to_string())
    )
}

fn invalid_rule(path: &str, r: &RuleSpec, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("{path}: Invalid value: {}: {detail}", rule_value(r)),
        field: path.into(),
    }
}

struct Walk {
    suppress_cost: bool,
    causes: Vec<Cause>,
    total: u64,
    most_expensive: Vec<(String, u64)>,
}

impl Walk {
    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        self.most_expensive.push((path, cost));
        self.most_expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
        self.most_expensive.truncate(4);
    }

    fn node(&mut self, s: &Schema, path: &str, cardinality: Option<u64>, resource_root: bool) {
        for (k, p) in &s.properties {
            self.node(p, &format!("{path}.properties[{k}]"), cardinality, p.x_kubernetes_embedded_resource);
        }
        if let Some(AdditionalProperties::Schema(ap)) = &s.additional_properties {
            let c = cardinality.zip(s.max_properties).map(|(c, m)| c.saturating_mul(m.max(0) as u64));
            self.node(ap, &format!("{path}.additionalProperties"), c, ap.x_kubernetes_embedded_resource);
        }
        if let Some(it) = s.items.as_deref() {
            let c = cardinality.zip(s.max_items).map(|(c, m)| c.saturating_mul(m.max(0) as u64));
            self.node(it, &format!("{path}.items"), c, it.x_kubernetes_embedded_resource);
        }
        let specs = super::rule_specs(s);
        if specs.is_empty() {
            return;
        }
        let Some(decl) = decl_of(s, resource_root) else { return };
        let card = cardinality.unwrap_or(MAX_REQUEST_SIZE_BYTES / (decl.min_size + 1));
        for (i, spec) in specs.iter().enumerate() {
            let rpath = format!("{path}.x-kubernetes-validations[{i}]");
            let c = compile_rule(spec, &decl);
            let cost = if c.max_cost == 0 { 0 } else { c.max_cost.saturating_mul(card) };
            let rule_path = child(&rpath, "rule");
            if !self.suppress_cost && cost > STATIC_ESTIMATED_COST_LIMIT {
                let msg = cost_error_message("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT);
                self.causes.push(Cause::forbidden(&rule_path, &msg));
            }
            self.observe(rule_path.clone(), cost);
            if let Some(e) = &c.error {
                self.causes.push(invalid_rule(&rule_path, spec, e));
            }
            let mpath = child(&rpath, "messageExpression");
            if let Some(e) = &c.message_error {
                self.causes.push(invalid_rule(&mpath, spec, e));
            } else if c.message_program.is_some() {
                if !self.suppress_cost && c.message_max_cost > STATIC_ESTIMATED_COST_LIMIT {
                    let msg = cost_error_message(
                        "estimated messageExpression cost",
                        c.message_max_cost,
                        STATIC_ESTIMATED_COST_LIMIT,
                    );
                    self.causes.push(Cause::forbidden(&mpath, &msg));
                }
                self.observe(mpath, c.message_max_cost);
            }
        }
    }
}

/// Compiles every rule of a CRD version's `openAPIV3Schema` (already known to be structural)
/// and returns kube's causes: compile errors, per-rule cost over budget (unless
/// `suppress_cost`, set on updates that leave the version's schema unchanged), and the total
/// over budget. `path` is where the schema sits (`spec.validation.openAPIV3Schema`).
pub fn validate_crd_schema(schema: &Value, path: &str, suppress_cost: bool) -> Vec<Cause> {
    let Ok(s) = Schema::parse(schema) else { return Vec::new() };
    let mut w = Walk { suppress_cost, causes: Vec::new(), total: 0, most_expensive: Vec::new() };
    w.node(&s, path, Some(1), true);
    if w.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
        for (p, _) in &w.most_expensive {
            w.causes.push(Cause::forbidden(
                p,
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        let msg = cost_error_message(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            w.total,
            STATIC_ESTIMATED_CRD_COST_LIMIT,
        );
        w.causes.push(Cause::forbidden(path, &msg));
    }
    w.causes
}
