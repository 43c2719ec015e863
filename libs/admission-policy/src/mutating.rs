//! The `MutatingAdmissionPolicy` admission plugin (kube's `policy/mutating` over
//! `policy/generic`): the matching policies' bindings and params become invocations, each
//! runs its mutations in order on the object as the previous ones left it (JSON Patch or apply
//! configuration), and `reinvocationPolicy: IfNeeded` invocations run again in the chain's
//! second round when a later mutation changed the object. Errors follow each policy's failure
//! policy; those that remain refuse the request with kube's 403.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apiextensions::cel::{Activation, CelAuthorizer, EvalError, Evaluator, Input, RUNTIME_CEL_COST_BUDGET};
use kapi_apimachinery::{ApiError, Cause, GroupResource, StatusReason};
use kapi_registry::rest::RestStore;
use serde_json::Value;

use crate::compiled::{CompiledMutatingPolicy, FailurePolicy, Mutation, PatchType};
use crate::decisions::CachingAuthorizer;
use crate::matching::{self, MatchInput, Matched};
use crate::params;
use crate::reinvocation::ReinvokeState;
use crate::request;
use crate::resolver::ParamResolver;
use crate::source::{self, gvk_string, present, text, Caches, Compiled};
use crate::{patching, validator};

/// kube's MutatingAdmissionPolicy plugin.
pub struct MutatingAdmissionPolicy {
    rest: RestStore,
    resolver: Arc<dyn ParamResolver>,
    authorizer: Option<Arc<dyn CelAuthorizer>>,
    compiled: Compiled<CompiledMutatingPolicy>,
}

/// kube's `PolicyError`: what refuses the request unless the policy ignores failures.
struct PolicyError {
    policy: String,
    binding: Option<String>,
    message: String,
    /// kube sets `Invalid` for evaluation errors, nothing for configuration errors.
    invalid: bool,
    failure: FailurePolicy,
}

impl PolicyError {
    fn text(&self) -> String {
        match &self.binding {
            Some(b) => format!("policy '{}' with binding '{b}' denied request: {}", self.policy, self.message),
            None => format!("policy {:?} denied request: {}", self.policy, self.message),
        }
    }
}

/// One policy, binding and param to run.
struct Invocation {
    policy: String,
    binding: String,
    compiled: Arc<CompiledMutatingPolicy>,
    matched: Matched,
    param: Option<Value>,
}

impl Invocation {
    /// kube's invocation key: policy, binding and param.
    fn key(&self) -> String {
        let p = |k: &str| self.param.as_ref().and_then(|p| p.pointer(k)).and_then(Value::as_str).unwrap_or_default();
        format!("{}/{}/{}/{}", self.policy, self.binding, p("/metadata/namespace"), p("/metadata/name"))
    }
}

/// Why a mutation did not apply.
enum MutationError {
    /// The request fails with this status, whatever the failure policy.
    Status(ApiError),
    /// A policy error (kube's `addConfigError`).
    Policy(String),
}

impl MutatingAdmissionPolicy {
    /// The plugin over the policies, bindings, namespaces and params cached by `rest`, as
    /// [`crate::ValidatingAdmissionPolicy::new`]; `resolver` also merges apply configurations.
    pub fn new(rest: RestStore, resolver: Arc<dyn ParamResolver>, authorizer: Option<Arc<dyn CelAuthorizer>>) -> Self {
        MutatingAdmissionPolicy { rest, resolver, authorizer, compiled: Compiled::default() }
    }

    /// kube's generic dispatcher: the invocations of the matching policies and bindings, and
    /// the configuration errors met on the way.
    fn invocations(
        &self,
        input: &MatchInput<'_>,
        caches: &Caches<'_>,
        errors: &mut Vec<PolicyError>,
    ) -> Vec<Invocation> {
        let policies = caches.list_all("mutatingadmissionpolicies");
        self.compiled.forget_missing(&policies);
        let mut bindings: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
        for (_, b) in caches.list_all("mutatingadmissionpolicybindings") {
            bindings.entry(text(&b, "/spec/policyName").to_owned()).or_default().push(b);
        }
        let mut out = Vec::new();
        for (revision, policy) in &policies {
            let name = text(policy, "/metadata/name").to_owned();
            let Some(bindings) = bindings.get(&name) else { continue };
            let failure = FailurePolicy::of(policy.get("spec").unwrap_or(&Value::Null));
            let config = |binding: Option<&str>, e: &str| {
                let message = match binding {
                    None => format!("failed to configure policy: {e}"),
                    Some(_) => format!("failed to configure binding: {e}"),
                };
                PolicyError {
                    policy: name.clone(),
                    binding: binding.map(str::to_owned),
                    message,
                    invalid: false,
                    failure: failure.clone(),
                }
            };
            let matched = match present(policy, "/spec/matchConstraints") {
                None => Err("policy contained no match constraints, a required field".to_owned()),
                Some(mc) => matching::matches(mc, input),
            };
            let matched = match matched {
                Err(e) => {
                    errors.push(config(None, &e));
                    continue;
                }
                Ok(None) => continue,
                Ok(Some(m)) => m,
            };
            let param_kind = present(policy, "/spec/paramKind");
            let source = param_kind.map(|pk| self.resolver.param_source(text(pk, "/apiVersion"), text(pk, "/kind")));
            if let (Some(pk), Some(None)) = (param_kind, &source) {
                errors.push(config(
                    None,
                    &format!("failed to find resource referenced by paramKind: '{}'", gvk_string(pk)),
                ));
                continue;
            }
            let compiled = self.compiled.get(policy, *revision, CompiledMutatingPolicy::compile);
            for binding in bindings {
                let binding_name = text(binding, "/metadata/name").to_owned();
                if let Some(mr) = present(binding, "/spec/matchResources") {
                    match matching::matches(mr, input) {
                        Err(e) => {
                            errors.push(config(Some(&binding_name), &e));
                            continue;
                        }
                        Ok(None) => continue,
                        Ok(Some(_)) => {}
                    }
                }
                let namespace = matching::request_namespace(input.attrs);
                let source = source.as_ref().and_then(Option::as_ref);
                let found = params::collect(
                    param_kind,
                    source,
                    present(binding, "/spec/paramRef"),
                    namespace,
                    caches,
                    self.resolver.as_ref(),
                );
                match found {
                    Err(e) => errors.push(config(Some(&binding_name), &e)),
                    Ok(params) => out.extend(params.into_iter().map(|param| Invocation {
                        policy: name.clone(),
                        binding: binding_name.clone(),
                        compiled: compiled.clone(),
                        matched: matched.clone(),
                        param,
                    })),
                }
            }
        }
        out
    }

    /// kube's `dispatchInvocations`: runs the invocations on `attrs.object`.
    fn run(
        &self,
        attrs: &mut Attributes,
        invocations: &[Invocation],
        caches: &Caches<'_>,
        errors: &mut Vec<PolicyError>,
    ) -> Result<(), ApiError> {
        let mut state = ReinvokeState::load(attrs);
        let reinvoke = attrs.reinvocation.is_reinvoke();
        if reinvoke && state.changed_since_last(attrs.object.as_ref()) {
            state.require_reinvoking();
        }
        let own_namespace = attrs.kind.group.is_empty() && attrs.kind.version == "v1" && attrs.kind.name == "Namespace";
        let namespace_object = match matching::request_namespace(attrs) {
            "" => None,
            _ if own_namespace => None,
            ns => match caches.namespace_shared(ns) {
                Some(n) => invocations
                    .iter()
                    .any(|i| i.compiled.reads.has("namespaceObject"))
                    .then(|| request::namespace_object(&n)),
                None => {
                    let gr = GroupResource { group: String::new(), resource: "namespaces".into() };
                    return Err(ApiError::not_found(&gr, ns));
                }
            },
        };
        let reads_authorizer = invocations.iter().any(|i| i.compiled.reads.has("authorizer"));
        let authorizer = self.authorizer.as_ref().filter(|_| reads_authorizer).map(|a| {
            let caching: Arc<dyn CelAuthorizer> = Arc::new(CachingAuthorizer::new(a.clone()));
            request::authorizer_input(attrs, caching)
        });
        for inv in invocations {
            let c = &inv.compiled;
            let mut object = self.versioned(attrs.object.as_ref(), &attrs.kind, &inv.matched.kind)?;
            let old_object = self.versioned(attrs.old_object.as_ref(), &attrs.kind, &inv.matched.kind)?;
            let request = c.reads.has("request").then(|| request::for_match(attrs, &inv.matched));
            let base = Input {
                object: None,
                old_object: old_object.as_ref(),
                params: inv.param.as_ref(),
                request: request.as_ref(),
                namespace_object: None,
                authorizer: authorizer.clone(),
                claims: None,
                user: None,
            };
            if !c.match_conditions.is_empty() {
                let activation =
                    Arc::new(Activation::with_reads(&Input { object: object.as_ref(), ..base.clone() }, c.reads));
                match validator::match_conditions(&c.match_conditions, &c.failure_policy, &c.variables, activation) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        errors.push(self.error(inv, e));
                        continue;
                    }
                }
            }
            let key = inv.key();
            if reinvoke && !state.should_reinvoke(&key) {
                continue;
            }
            let before = object.clone();
            for mutation in &c.mutations {
                let Some(current) = object.as_ref() else { continue };
                let Some(mutation) = mutation else {
                    return Err(ApiError::internal(format!(
                        "expected {} compiled evaluators for policy {}, got {}",
                        c.mutations.len(),
                        inv.policy,
                        c.mutations.iter().flatten().count()
                    )));
                };
                let input =
                    Input { object: Some(current), namespace_object: namespace_object.as_ref(), ..base.clone() };
                let activation = Arc::new(Activation::with_reads(&input, c.reads));
                match self.mutate(mutation, c, activation, current, &inv.matched) {
                    Ok(next) => object = Some(next),
                    Err(MutationError::Status(e)) => return Err(e),
                    Err(MutationError::Policy(m)) => errors.push(self.error(inv, m)),
                }
            }
            if object != before {
                state.require_reinvoking();
                attrs.reinvocation.request();
                attrs.object = self.versioned(object.as_ref(), &inv.matched.kind, &attrs.kind)?;
            }
            if c.reinvoke_if_needed {
                state.invoked(key);
            }
        }
        state.store(attrs);
        Ok(())
    }

    fn error(&self, inv: &Invocation, message: String) -> PolicyError {
        let failure = inv.compiled.failure_policy.clone();
        PolicyError { policy: inv.policy.clone(), binding: Some(inv.binding.clone()), message, invalid: true, failure }
    }

    /// `object` in the version of `to` (an equivalent version the policy matched).
    fn versioned(
        &self,
        object: Option<&Value>,
        from: &kapi_admission::attributes::Gvx,
        to: &kapi_admission::attributes::Gvx,
    ) -> Result<Option<Value>, ApiError> {
        match object {
            Some(o) if from != to => self.resolver.convert(o, from, to).map(Some).map_err(ApiError::internal),
            o => Ok(o.cloned()),
        }
    }

    /// One mutation on `object` (kube's `dispatchOne` and patchers).
    fn mutate(
        &self,
        m: &Mutation,
        c: &CompiledMutatingPolicy,
        activation: Arc<Activation>,
        object: &Value,
        matched: &Matched,
    ) -> Result<Value, MutationError> {
        let expr = m.compiled.as_ref().map_err(|e| MutationError::Policy(e.detail.clone()))?;
        let mut ev = Evaluator::new(activation, c.variables.clone(), RUNTIME_CEL_COST_BUDGET);
        let out = ev.evaluate(expr).map_err(|e| match e {
            EvalError::Failed(m) => MutationError::Policy(m),
            e @ EvalError::OutOfBudget => MutationError::Policy(e.to_string()),
        })?;
        match m.patch_type {
            PatchType::JsonPatch => {
                let ops = out.json_patches().map_err(MutationError::Policy)?;
                patching::json_patch(object, &ops).map_err(MutationError::Policy)
            }
            PatchType::ApplyConfiguration => {
                let mut patch = out.apply_configuration().map_err(MutationError::Policy)?;
                if let (Some(p), Some(o)) = (patch.as_object_mut(), object.as_object()) {
                    for k in ["apiVersion", "kind"] {
                        if let Some(v) = o.get(k) {
                            p.insert(k.into(), v.clone());
                        }
                    }
                }
                match self.resolver.apply_configuration(&matched.kind, object, &patch) {
                    None => {
                        let k = &matched.kind;
                        let message = format!("Resource kind {}/{}, Kind={} not found. There can be a delay between when CustomResourceDefinitions are created and when they are available.", k.group, k.version, k.name);
                        Err(MutationError::Status(ApiError::service_unavailable(message)))
                    }
                    Some(r) => r.map_err(|e| MutationError::Policy(format!("error applying patch: {e}"))),
                }
            }
        }
    }

    fn dispatch(&self, attrs: &mut Attributes) -> Result<(), ApiError> {
        if source::exempt(attrs) {
            return Ok(());
        }
        let caches = Caches(&self.rest);
        let mut errors = Vec::new();
        let invocations = {
            let namespace_of = |name: &str| caches.namespace(name);
            let input = MatchInput { attrs, namespace: &namespace_of, resolver: self.resolver.as_ref() };
            self.invocations(&input, &caches, &mut errors)
        };
        if !invocations.is_empty() {
            self.run(attrs, &invocations, &caches, &mut errors)?;
        }
        let failing: Vec<&PolicyError> = errors.iter().filter(|e| !e.failure.ignores()).collect();
        let Some(first) = failing.first() else { return Ok(()) };
        // kube's answer: NewForbidden's 403 and details, its message replaced by the first
        // error, every error a cause
        let mut err = attrs.forbidden("admission request denied by policy");
        err.message = first.text();
        if first.invalid {
            err.reason = StatusReason::Invalid;
        }
        if let Some(details) = err.details.as_mut() {
            details.causes = failing
                .iter()
                .map(|e| Cause { reason: String::new(), message: e.text(), field: String::new() })
                .collect();
        }
        Err(err)
    }
}

#[async_trait]
impl AdmissionPlugin for MutatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "MutatingAdmissionPolicy"
    }

    /// There is no object to mutate on delete.
    fn handles(&self, operation: Operation) -> bool {
        !matches!(operation, Operation::Delete)
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        // as the validating plugin: evaluation off the worker's queue where the runtime allows
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if multi_thread && Caches(&self.rest).any("mutatingadmissionpolicybindings") {
            tokio::task::block_in_place(|| self.dispatch(attrs))
        } else {
            self.dispatch(attrs)
        }
    }
}
