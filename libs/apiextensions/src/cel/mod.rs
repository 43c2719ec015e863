//! CEL `x-kubernetes-validations`, as kube's apiextensions-apiserver runs them.
//!
//! - [`environment`]: the one CEL environment (standard library, strings/lists/math
//!   extensions, kube's regex, lists, url, quantity, ip, cidr, format and sets libraries),
//!   shared by CRD rules and admission expressions.
//! - [`CelValidator`]: every rule of a structural schema compiled once per CRD version,
//!   evaluated on create ([`CelValidator::validate`]) and update
//!   ([`CelValidator::validate_update`], with `oldSelf` and ratcheting).
//! - [`validate_crd_schema`]: the compile and cost checks CRD validation reports.
//! - [`ExpressionCompiler`], [`Evaluator`]: admission expressions (ValidatingAdmissionPolicy,
//!   match conditions) with kube's admission variables and the authorizer library.
//!
//! The cel crate parses and interprets; type checking and cost estimation are kapi's own
//! ([`check`]), following cel-go's model.

mod activation;
mod authz;
mod check;
mod compile;
mod crd;
mod expression;
mod formats;
mod funcs;
mod infer;
mod library;
mod mutation;
mod net;
mod runtime;
mod time;
mod types;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_expression;
#[cfg(test)]
mod tests_lib;
#[cfg(test)]
mod tests_time;

use std::collections::BTreeMap;

use kapi_apimachinery::Cause;
use serde_json::Value;

use crate::schema::{AdditionalProperties, Schema, Structural};

pub use activation::{Activation, AuthorizerInput, EvalError, Evaluator, Input, Output};
pub use authz::{AuthzAttributes, AuthzDecision, AuthzUser, CelAuthorizer, RequestResource};
pub use compile::{CompiledRule, RuleSpec};
pub use crd::validate_crd_schema;
pub use expression::{CompileError, Declarations, Expression, ExpressionCompiler, Reads, ReturnType, Variable};
pub use funcs::environment;
pub use types::is_identifier;
pub use runtime::{PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET};

/// The compiled rules of one schema node and of the nodes below it that have rules.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub rules: Vec<CompiledRule>,
    pub decl: Option<types::Decl>,
    pub properties: BTreeMap<String, Node>,
    pub items: Option<Box<Node>>,
    pub additional: Option<Box<Node>>,
}

fn has_rules(s: &Schema) -> bool {
    s.x_kubernetes_validations.as_ref().and_then(Value::as_array).is_some_and(|a| !a.is_empty())
        || s.properties.values().any(has_rules)
        || s.items.as_deref().is_some_and(has_rules)
        || matches!(&s.additional_properties, Some(AdditionalProperties::Schema(ap)) if has_rules(ap))
}

pub(crate) fn rule_specs(s: &Schema) -> Vec<RuleSpec> {
    s.x_kubernetes_validations
        .as_ref()
        .and_then(Value::as_array)
        .map_or(Vec::new(), |a| a.iter().map(RuleSpec::from_json).collect())
}

fn build(s: &Schema, resource_root: bool) -> Node {
    let mut node = Node::default();
    let specs = rule_specs(s);
    if !specs.is_empty() {
        node.decl = types::decl_of(s, resource_root);
        if let Some(d) = &node.decl {
            node.rules = specs.iter().map(|r| compile::compile_rule(r, d)).collect();
        }
    }
    for (k, p) in s.properties.iter().filter(|(_, p)| has_rules(p)) {
        node.properties.insert(k.clone(), build(p, p.x_kubernetes_embedded_resource));
    }
    if let Some(it) = s.items.as_deref().filter(|i| has_rules(i)) {
        node.items = Some(Box::new(build(it, it.x_kubernetes_embedded_resource)));
    }
    if let Some(AdditionalProperties::Schema(ap)) = &s.additional_properties {
        if has_rules(ap) {
            node.additional = Some(Box::new(build(ap, ap.x_kubernetes_embedded_resource)));
        }
    }
    node
}

/// Every `x-kubernetes-validations` rule of one CRD version, compiled once when the version is
/// served and shared (read-only, `Send + Sync`) by all requests.
#[derive(Debug)]
pub struct CelValidator {
    root: Node,
    schema: Structural,
}

impl CelValidator {
    /// Compiles the rules of `schema`. Rules that fail to compile are kept with their error
    /// (CRD validation refuses them; a stored CRD that predates a check still serves).
    pub fn new(schema: &Structural) -> CelValidator {
        CelValidator { root: build(schema.schema(), true), schema: schema.clone() }
    }

    /// Whether any rule is declared (callers can skip the walk otherwise).
    pub fn is_empty(&self) -> bool {
        !has_rules(self.schema.schema())
    }

    /// Validates a created object: rules without `oldSelf`, and those with
    /// `optionalOldSelf: true` (seeing `oldSelf` as `optional.none()`).
    pub fn validate(&self, obj: &Value) -> Vec<Cause> {
        self.run(obj, None)
    }

    /// Validates an update: transition rules where old values correlate; errors of other rules
    /// on values unchanged from `old` are ratcheted away.
    pub fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        self.run(new, Some(old))
    }

    fn run(&self, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut run = runtime::Run { budget: RUNTIME_CEL_COST_BUDGET, causes: Vec::new() };
        let ratchet = old.is_some_and(|o| o == obj);
        run.node(&self.root, self.schema.schema(), "", obj, old, ratchet);
        run.causes
    }
}
