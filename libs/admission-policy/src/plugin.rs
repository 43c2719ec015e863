//! The `ValidatingAdmissionPolicy` admission plugin (kube's `policy/validating` dispatcher
//! over `policy/generic`): on every write it reads the policies and bindings from the watch
//! caches, so a change takes effect on every replica as soon as its cache has it; compiled
//! policies are kept by uid and revision, so each version compiles once.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apiextensions::cel::{Activation, AuthorizerInput, CelAuthorizer, Input};
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_registry::rest::RestStore;
use serde_json::Value;

use crate::compiled::{CompiledPolicy, FailurePolicy};
use crate::decisions::{AuditCollector, CachingAuthorizer, Denial, Dispatch};
use crate::matching::{self, MatchInput, Matched};
use crate::params;
use crate::request;
use crate::resolver::ParamResolver;
use crate::source::{self, gvk_string, present, text, Caches, Compiled};
use crate::validator;

/// kube's ValidatingAdmissionPolicy plugin.
pub struct ValidatingAdmissionPolicy {
    rest: RestStore,
    resolver: Arc<dyn ParamResolver>,
    authorizer: Option<Arc<dyn CelAuthorizer>>,
    compiled: Compiled<CompiledPolicy>,
}

/// What every policy of one request reads.
struct Scope<'a> {
    input: &'a MatchInput<'a>,
    caches: &'a Caches<'a>,
    authorizer: Option<&'a AuthorizerInput>,
}

impl ValidatingAdmissionPolicy {
    /// The plugin over the policies, bindings, namespaces and params cached by `rest`;
    /// `resolver` finds param kinds (built-in or custom) and equivalent versions, `authorizer`
    /// backs `authorizer` in expressions (None: expressions that use it fail at evaluation).
    pub fn new(rest: RestStore, resolver: Arc<dyn ParamResolver>, authorizer: Option<Arc<dyn CelAuthorizer>>) -> Self {
        ValidatingAdmissionPolicy { rest, resolver, authorizer, compiled: Compiled::default() }
    }

    fn dispatch(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        if source::exempt(attrs) {
            return Ok(());
        }
        let caches = Caches(&self.rest);
        let policies = caches.list_all("validatingadmissionpolicies");
        self.compiled.forget_missing(&policies);
        let mut bindings: BTreeMap<String, Vec<Arc<Value>>> = BTreeMap::new();
        for (_, b) in caches.list_all("validatingadmissionpolicybindings") {
            bindings.entry(text(&b, "/spec/policyName").to_owned()).or_default().push(b);
        }
        let mut dispatch = Dispatch::default();
        // one cache of authorization decisions per request, as kube's caching authorizer
        let authorizer = self.authorizer.as_ref().map(|a| {
            let caching: Arc<dyn CelAuthorizer> = Arc::new(CachingAuthorizer::new(a.clone()));
            request::authorizer_input(attrs, caching)
        });
        let namespace_of = |name: &str| caches.namespace(name);
        let input = MatchInput { attrs, namespace: &namespace_of, resolver: self.resolver.as_ref() };
        // kube's order is its informer's; kapi's is the policies' and bindings' names
        for (revision, policy) in &policies {
            let name = text(policy, "/metadata/name");
            let Some(bindings) = bindings.get(name) else { continue };
            let scope = Scope { input: &input, caches: &caches, authorizer: authorizer.as_ref() };
            self.policy(policy, *revision, bindings, &scope, &mut dispatch, outcome)?;
        }
        dispatch.finish(attrs, outcome)
    }

    fn policy(
        &self,
        policy: &Value,
        revision: u64,
        bindings: &[Arc<Value>],
        scope: &Scope<'_>,
        dispatch: &mut Dispatch,
        outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        let (input, caches) = (scope.input, scope.caches);
        let name = text(policy, "/metadata/name").to_owned();
        let failure = FailurePolicy::of(policy.get("spec").unwrap_or(&Value::Null));
        let param_kind = present(policy, "/spec/paramKind");
        let source = param_kind.map(|pk| self.resolver.param_source(text(pk, "/apiVersion"), text(pk, "/kind")));
        let matched = match present(policy, "/spec/matchConstraints") {
            None => Err("policy contained no match constraints, a required field".to_owned()),
            Some(mc) => matching::matches(mc, input),
        };
        let matched = match matched {
            Err(e) => {
                dispatch.config_error(&failure, &name, None, &e);
                return Ok(());
            }
            Ok(None) => return Ok(()),
            Ok(Some(m)) => m,
        };
        if let (Some(pk), Some(None)) = (param_kind, &source) {
            let e = format!("failed to find resource referenced by paramKind: '{}'", gvk_string(pk));
            dispatch.config_error(&failure, &name, None, &e);
            return Ok(());
        }
        let compiled = self.compiled.get(policy, revision, CompiledPolicy::compile);
        let mut annotations = AuditCollector::default();
        let attrs = input.attrs;
        for binding in bindings {
            let binding_name = text(binding, "/metadata/name").to_owned();
            let config =
                |dispatch: &mut Dispatch, e: &str| dispatch.config_error(&failure, &name, Some(&binding_name), e);
            if let Some(mr) = present(binding, "/spec/matchResources") {
                match matching::matches(mr, input) {
                    Err(e) => {
                        config(dispatch, &e);
                        continue;
                    }
                    Ok(None) => continue,
                    Ok(Some(_)) => {}
                }
            }
            let namespace = matching::request_namespace(attrs);
            let params = params::collect(
                param_kind,
                source.as_ref().and_then(Option::as_ref),
                present(binding, "/spec/paramRef"),
                namespace,
                caches,
                self.resolver.as_ref(),
            );
            let params = match params {
                Ok(p) => p,
                Err(e) => {
                    config(dispatch, &e);
                    continue;
                }
            };
            if params.is_empty() {
                continue;
            }
            let (object, old_object) = match self.versioned(attrs, &matched) {
                Ok(v) => v,
                Err(e) => {
                    config(dispatch, &format!("failed to convert object version: {e}"));
                    continue;
                }
            };
            // kube: a Namespace has no namespace object of its own
            let own_namespace =
                attrs.kind.group.is_empty() && attrs.kind.version == "v1" && attrs.kind.name == "Namespace";
            let namespace_object = match namespace {
                "" => None,
                _ if own_namespace => None,
                ns => match caches.namespace(ns) {
                    Some(n) => Some(request::namespace_object(&n)),
                    None => {
                        let gr = GroupResource { group: String::new(), resource: "namespaces".into() };
                        return Err(ApiError::not_found(&gr, ns));
                    }
                },
            };
            let request = request::for_match(attrs, &matched);
            for param in &params {
                let input = Input {
                    object: object.as_ref(),
                    old_object: old_object.as_ref(),
                    params: param.as_ref(),
                    request: Some(&request),
                    namespace_object: namespace_object.as_ref(),
                    authorizer: scope.authorizer.cloned(),
                };
                let activation = Arc::new(Activation::new(&input));
                let without_namespace =
                    || Arc::new(Activation::new(&Input { namespace_object: None, ..input.clone() }));
                let result = validator::validate(&compiled, activation, without_namespace);
                let denial = Denial {
                    policy: &name,
                    binding: &binding_name,
                    actions: binding.pointer("/spec/validationActions"),
                };
                dispatch.record(&denial, result, &mut annotations, outcome);
            }
        }
        annotations.publish(&name, outcome);
        Ok(())
    }

    /// The object and old object in the matched kind's version.
    fn versioned(&self, attrs: &Attributes, matched: &Matched) -> Result<(Option<Value>, Option<Value>), String> {
        if matched.kind == attrs.kind {
            return Ok((attrs.object.clone(), attrs.old_object.clone()));
        }
        let convert =
            |o: &Option<Value>| o.as_ref().map(|o| self.resolver.convert(o, &attrs.kind, &matched.kind)).transpose();
        Ok((convert(&attrs.object)?, convert(&attrs.old_object)?))
    }
}

#[async_trait]
impl AdmissionPlugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    fn handles(&self, _operation: Operation) -> bool {
        true
    }

    async fn validate(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        // Evaluation may run up to kube's budget (about a second of CPU): off the worker's
        // queue where the runtime allows it, so that other requests keep being served.
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if multi_thread && Caches(&self.rest).any("validatingadmissionpolicybindings") {
            tokio::task::block_in_place(|| self.dispatch(attrs, outcome))
        } else {
            self.dispatch(attrs, outcome)
        }
    }
}
