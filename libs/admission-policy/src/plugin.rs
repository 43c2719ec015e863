//! The `ValidatingAdmissionPolicy` admission plugin (kube's `policy/validating` dispatcher
//! over `policy/generic`): on every write it reads the policies and bindings from the watch
//! caches, so a change takes effect on every replica as soon as its cache has it; compiled
//! policies are kept by uid and revision, so each version compiles once.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apiextensions::cel::{Activation, AuthorizerInput, CelAuthorizer, Input};
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_registry::catalog;
use kapi_registry::rest::RestStore;
use serde_json::Value;

use crate::compiled::{CompiledPolicy, FailurePolicy};
use crate::decisions::{AuditCollector, CachingAuthorizer, Denial, Dispatch};
use crate::matching::{self, MatchInput, Matched};
use crate::params::{self, CacheReader};
use crate::request;
use crate::resolver::ParamResolver;
use crate::validator;

const GROUP: &str = "admissionregistration.k8s.io";

/// Resources no API-defined policy applies to: the policies' own configuration (a policy
/// could otherwise lock itself in) and kube-apiserver's reviews that are never stored.
const EXEMPT: &[(&str, &str)] = &[
    (GROUP, "validatingadmissionpolicies"),
    (GROUP, "validatingadmissionpolicybindings"),
    (GROUP, "mutatingadmissionpolicies"),
    (GROUP, "mutatingadmissionpolicybindings"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
];

/// kube's ValidatingAdmissionPolicy plugin.
pub struct ValidatingAdmissionPolicy {
    rest: RestStore,
    resolver: Arc<dyn ParamResolver>,
    authorizer: Option<Arc<dyn CelAuthorizer>>,
    compiled: Mutex<HashMap<String, (u64, Arc<CompiledPolicy>)>>,
}

/// The watch caches of one [`RestStore`].
struct Caches<'a>(&'a RestStore);

impl Caches<'_> {
    fn list_all(&self, resource: &str) -> Vec<(u64, Arc<Value>)> {
        let Some(spec) = catalog::find(GROUP, "v1", resource) else { return Vec::new() };
        let prefix = spec.key_prefix();
        let Some(cache) = self.0.caches().cache(&prefix) else { return Vec::new() };
        cache.list(&prefix).0.into_iter().map(|o| (o.revision, o.object)).collect()
    }

    fn namespace(&self, name: &str) -> Option<Value> {
        let prefix = catalog::find("", "v1", "namespaces")?.key_prefix();
        self.get(&prefix, &format!("{prefix}{name}"))
    }
}

impl CacheReader for Caches<'_> {
    fn has_cache(&self, prefix: &str) -> bool {
        self.0.caches().cache(prefix).is_some()
    }

    fn get(&self, prefix: &str, key: &str) -> Option<Value> {
        self.0.caches().cache(prefix)?.get(key).map(|o| (*o.object).clone())
    }

    fn list(&self, prefix: &str, key_prefix: &str) -> Vec<Value> {
        let Some(cache) = self.0.caches().cache(prefix) else { return Vec::new() };
        cache.list(key_prefix).0.into_iter().map(|o| (*o.object).clone()).collect()
    }
}

/// What every policy of one request reads.
struct Scope<'a> {
    input: &'a MatchInput<'a>,
    caches: &'a Caches<'a>,
    authorizer: Option<&'a AuthorizerInput>,
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn present<'a>(v: &'a Value, pointer: &str) -> Option<&'a Value> {
    v.pointer(pointer).filter(|x| !x.is_null())
}

/// kube's `schema.GroupVersionKind` `%v`: `group/version, Kind=kind`.
fn gvk_string(param_kind: &Value) -> String {
    let api_version = text(param_kind, "/apiVersion");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={}", text(param_kind, "/kind"))
}

impl ValidatingAdmissionPolicy {
    /// The plugin over the policies, bindings, namespaces and params cached by `rest`;
    /// `resolver` finds param kinds (built-in or custom) and equivalent versions, `authorizer`
    /// backs `authorizer` in expressions (None: expressions that use it fail at evaluation).
    pub fn new(rest: RestStore, resolver: Arc<dyn ParamResolver>, authorizer: Option<Arc<dyn CelAuthorizer>>) -> Self {
        ValidatingAdmissionPolicy { rest, resolver, authorizer, compiled: Mutex::new(HashMap::new()) }
    }

    /// The compiled form of `policy` at `revision`, compiled now if this version is new.
    fn compiled(&self, policy: &Value, revision: u64) -> Arc<CompiledPolicy> {
        let uid = text(policy, "/metadata/uid").to_owned();
        let mut cache = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((rev, c)) = cache.get(&uid) {
            if *rev == revision {
                return c.clone();
            }
        }
        let compiled = Arc::new(CompiledPolicy::compile(policy));
        cache.insert(uid, (revision, compiled.clone()));
        compiled
    }

    /// Drops compiled policies that are gone.
    fn forget_missing(&self, policies: &[(u64, Arc<Value>)]) {
        let mut cache = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() > policies.len() {
            cache.retain(|uid, _| policies.iter().any(|(_, p)| text(p, "/metadata/uid") == uid));
        }
    }

    /// Whether any binding exists (without one, no policy applies).
    fn has_bindings(&self) -> bool {
        let Some(spec) = catalog::find(GROUP, "v1", "validatingadmissionpolicybindings") else { return false };
        let prefix = spec.key_prefix();
        self.rest.caches().cache(&prefix).is_some_and(|c| !c.list(&prefix).0.is_empty())
    }

    fn dispatch(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        let exempt = EXEMPT.iter().any(|(g, r)| attrs.resource.group == *g && attrs.resource.name == *r);
        if exempt {
            return Ok(());
        }
        let caches = Caches(&self.rest);
        let policies = caches.list_all("validatingadmissionpolicies");
        self.forget_missing(&policies);
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
        let compiled = self.compiled(policy, revision);
        let mut annotations = AuditCollector::default();
        let attrs = input.attrs;
        for binding in bindings {
            let binding_name = text(binding, "/metadata/name").to_owned();
            let config = |dispatch: &mut Dispatch, e: &str| dispatch.config_error(&failure, &name, Some(&binding_name), e);
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
            let own_namespace = attrs.kind.group.is_empty() && attrs.kind.version == "v1" && attrs.kind.name == "Namespace";
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
                let without_namespace = || Arc::new(Activation::new(&Input { namespace_object: None, ..input.clone() }));
                let result = validator::validate(&compiled, activation, without_namespace);
                let denial = Denial { policy: &name, binding: &binding_name, actions: binding.pointer("/spec/validationActions") };
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
        let convert = |o: &Option<Value>| o.as_ref().map(|o| self.resolver.convert(o, &attrs.kind, &matched.kind)).transpose();
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
        if multi_thread && self.has_bindings() {
            tokio::task::block_in_place(|| self.dispatch(attrs, outcome))
        } else {
            self.dispatch(attrs, outcome)
        }
    }
}
