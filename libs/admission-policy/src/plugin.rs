//! The `ValidatingAdmissionPolicy` admission plugin (kube's `policy/validating` dispatcher
//! over `policy/generic`): on every write it checks the policies and bindings in the watch
//! caches, so a change takes effect on every replica as soon as its cache has it; the bound
//! policies are paired with their bindings and compiled once per change of either cache
//! ([`Bound`]), compiled policies are kept by uid and revision, so each version compiles once.
//!
//! A write pays for what its policies read: the object is converted for CEL only when an
//! expression reads it, the AdmissionRequest and the Namespace are built only when one reads
//! them, and evaluation stays on the async worker unless a policy's worst case is long
//! ([`crate::compiled::SLOW_COST`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apiextensions::cel::{Activation, AuthorizerInput, CelAuthorizer, Input, Reads};
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_registry::rest::RestStore;
use serde_json::Value;

use crate::compiled::{CompiledPolicy, FailurePolicy};
use crate::decisions::{AuditCollector, CachingAuthorizer, Denial, Dispatch};
use crate::matching::{self, MatchInput, Matched};
use crate::params;
use crate::request;
use crate::resolver::ParamResolver;
use crate::source::{self, fingerprint, gvk_string, present, text, Caches, Compiled, Fingerprint};
use crate::validator;

/// kube's ValidatingAdmissionPolicy plugin.
pub struct ValidatingAdmissionPolicy {
    rest: RestStore,
    resolver: Arc<dyn ParamResolver>,
    authorizer: Option<Arc<dyn CelAuthorizer>>,
    compiled: Compiled<CompiledPolicy>,
    bound: Mutex<Arc<Bound>>,
}

/// The policies that have bindings, compiled and paired with them, as of one state of the
/// policy and binding caches; rebuilt when either changes.
#[derive(Default)]
struct Bound {
    fingerprint: Option<(Fingerprint, Fingerprint)>,
    /// In kube's informer order (kapi's: the policies' and bindings' names).
    policies: Vec<BoundPolicy>,
    /// Whether any policy's worst case is long ([`CompiledPolicy::slow`]).
    slow: bool,
    /// What any policy reads (the authorizer is set up per request only if one asks).
    reads: Reads,
}

struct BoundPolicy {
    policy: Arc<Value>,
    compiled: Arc<CompiledPolicy>,
    bindings: Vec<Arc<Value>>,
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
        let bound = Mutex::default();
        ValidatingAdmissionPolicy { rest, resolver, authorizer, compiled: Compiled::default(), bound }
    }

    /// The bound policies now: the last ones if neither cache changed since.
    fn bound(&self) -> Arc<Bound> {
        let caches = Caches(&self.rest);
        let policies = caches.list_all("validatingadmissionpolicies");
        let bindings = caches.list_all("validatingadmissionpolicybindings");
        let now = (fingerprint(&policies), fingerprint(&bindings));
        let mut bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        if bound.fingerprint == Some(now) {
            return bound.clone();
        }
        self.compiled.forget_missing(&policies);
        let mut by_policy: BTreeMap<&str, Vec<Arc<Value>>> = BTreeMap::new();
        for (_, b) in &bindings {
            by_policy.entry(text(b, "/spec/policyName")).or_default().push(b.clone());
        }
        let mut next = Bound { fingerprint: Some(now), ..Bound::default() };
        for (revision, policy) in &policies {
            let Some(bindings) = by_policy.remove(text(policy, "/metadata/name")) else { continue };
            let compiled = self.compiled.get(policy, *revision, CompiledPolicy::compile);
            next.slow |= compiled.slow;
            next.reads = next.reads.union(compiled.reads);
            next.policies.push(BoundPolicy { policy: policy.clone(), compiled, bindings });
        }
        *bound = Arc::new(next);
        bound.clone()
    }

    fn dispatch(&self, bound: &Bound, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        let caches = Caches(&self.rest);
        let mut dispatch = Dispatch::default();
        // one cache of authorization decisions per request, as kube's caching authorizer
        let authorizer = self.authorizer.as_ref().filter(|_| bound.reads.has("authorizer")).map(|a| {
            let caching: Arc<dyn CelAuthorizer> = Arc::new(CachingAuthorizer::new(a.clone()));
            request::authorizer_input(attrs, caching)
        });
        let namespace_of = |name: &str| caches.namespace(name);
        let input = MatchInput { attrs, namespace: &namespace_of, resolver: self.resolver.as_ref() };
        for p in &bound.policies {
            let scope = Scope { input: &input, caches: &caches, authorizer: authorizer.as_ref() };
            self.policy(p, &scope, &mut dispatch, outcome)?;
        }
        dispatch.finish(attrs, outcome)
    }

    fn policy(
        &self,
        bound: &BoundPolicy,
        scope: &Scope<'_>,
        dispatch: &mut Dispatch,
        outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        let (input, caches) = (scope.input, scope.caches);
        let (policy, bindings, compiled) = (bound.policy.as_ref(), &bound.bindings, &bound.compiled);
        let reads = compiled.reads;
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
            // kube looks the namespace up whether or not an expression reads it
            let namespace_object = match namespace {
                "" => None,
                _ if own_namespace => None,
                ns => match caches.namespace_shared(ns) {
                    Some(n) => reads.has("namespaceObject").then(|| request::namespace_object(&n)),
                    None => {
                        let gr = GroupResource { group: String::new(), resource: "namespaces".into() };
                        return Err(ApiError::not_found(&gr, ns));
                    }
                },
            };
            let request = reads.has("request").then(|| request::for_match(attrs, &matched));
            for param in &params {
                let input = Input {
                    object: object.as_deref(),
                    old_object: old_object.as_deref(),
                    params: param.as_ref(),
                    request: request.as_ref(),
                    namespace_object: namespace_object.as_ref(),
                    authorizer: scope.authorizer.cloned(),
                    claims: None,
                    user: None,
                };
                let activation = Arc::new(Activation::with_reads(&input, reads));
                let without_namespace =
                    || Arc::new(Activation::with_reads(&Input { namespace_object: None, ..input.clone() }, reads));
                let result = validator::validate(compiled, activation, without_namespace);
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

    /// The object and old object in the matched kind's version (the request's own, not copied,
    /// when it is that version).
    fn versioned<'a>(&self, attrs: &'a Attributes, matched: &Matched) -> Result<Versioned<'a>, String> {
        if matched.kind == attrs.kind {
            return Ok((attrs.object.as_ref().map(Cow::Borrowed), attrs.old_object.as_ref().map(Cow::Borrowed)));
        }
        let convert = |o: &Option<Value>| {
            o.as_ref().map(|o| self.resolver.convert(o, &attrs.kind, &matched.kind).map(Cow::Owned)).transpose()
        };
        Ok((convert(&attrs.object)?, convert(&attrs.old_object)?))
    }
}

/// An object and an old object, borrowed or converted.
type Versioned<'a> = (Option<Cow<'a, Value>>, Option<Cow<'a, Value>>);

#[async_trait]
impl AdmissionPlugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    fn handles(&self, _operation: Operation) -> bool {
        true
    }

    async fn validate(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        if source::exempt(attrs) {
            return Ok(());
        }
        let bound = self.bound();
        if bound.policies.is_empty() {
            return Ok(());
        }
        // A policy whose worst case nears kube's budget (about a second of CPU) is evaluated
        // off the worker's queue where the runtime allows it, so that other requests keep being
        // served; cheap ones run in place, where handing the worker's other tasks to another
        // thread (block_in_place) would cost more than the evaluation.
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if bound.slow && multi_thread {
            tokio::task::block_in_place(|| self.dispatch(&bound, attrs, outcome))
        } else {
            self.dispatch(&bound, attrs, outcome)
        }
    }
}
