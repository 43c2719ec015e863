//! Whether a webhook is called for a request (kube's `ShouldCallHook`): its namespace
//! selector, object selector and rules, then its match conditions.

use std::sync::Arc;

use kapi_admission::attributes::Gvx;
use kapi_admission::{Attributes, EquivalentResources, Operation};
use kapi_apiextensions::cel::CelAuthorizer;
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_registry::catalog;
use kapi_registry::rest::RestStore;
use serde_json::{Map, Value};

use crate::conditions::Verdict;
use crate::hooks::{Hook, Rule};

fn exact_or_wildcard(items: &[String], requested: &str) -> bool {
    items.iter().any(|i| i == "*" || i == requested)
}

fn is_namespace_resource(attrs: &Attributes) -> bool {
    attrs.resource.group.is_empty() && attrs.resource.version == "v1" && attrs.resource.name == "namespaces"
}

impl Rule {
    /// kube's rules.Matcher, for the request as `resource` (its own, or an equivalent).
    pub fn matches(&self, attrs: &Attributes, resource: &Gvx) -> bool {
        let scope = match self.scope.as_deref() {
            None => true,
            Some("Namespaced") => !is_namespace_resource(attrs) && !attrs.namespace.is_empty(),
            Some("Cluster") => is_namespace_resource(attrs) || attrs.namespace.is_empty(),
            Some(_) => false,
        };
        let operation = self.operations.iter().any(|op| op == "*" || op == attrs.operation.as_str());
        let matched = self.resources.iter().any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == resource.name) && (sub == "*" || sub == attrs.subresource)
        });
        scope
            && operation
            && exact_or_wildcard(&self.api_groups, &resource.group)
            && exact_or_wildcard(&self.api_versions, &resource.version)
            && matched
    }
}

/// Webhooks never see writes of the admission configuration itself (kube's
/// `IsExemptAdmissionConfigurationResource`), so that a broken webhook cannot lock its own
/// configuration.
pub fn exempt(attrs: &Attributes) -> bool {
    attrs.kind.group == "admissionregistration.k8s.io"
        && matches!(
            attrs.kind.name.as_str(),
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

fn labels(obj: Option<&Value>) -> Option<&Map<String, Value>> {
    obj.and_then(|o| o.pointer("/metadata/labels")).and_then(Value::as_object)
}

/// The labels of the request's namespace: the object's own for a create or update of a
/// Namespace, else the namespace's from the watch cache (404 when it does not exist, as kube).
fn namespace_labels(rest: &RestStore, attrs: &Attributes) -> Result<Map<String, Value>, ApiError> {
    if attrs.resource.name == "namespaces"
        && attrs.subresource.is_empty()
        && matches!(attrs.operation, Operation::Create | Operation::Update)
    {
        return Ok(labels(attrs.object.as_ref()).cloned().unwrap_or_default());
    }
    let spec = catalog::find("", "v1", "namespaces").ok_or_else(|| ApiError::internal("namespaces are not served"))?;
    let cached = rest.caches().cache(&spec.key_prefix()).and_then(|c| c.get(&format!("{}{}", spec.key_prefix(), attrs.namespace)));
    match cached {
        Some(ns) => Ok(labels(Some(&ns.object)).cloned().unwrap_or_default()),
        None => Err(ApiError::not_found(&GroupResource::new("", "namespaces"), &attrs.namespace)),
    }
}

/// kube's namespace matcher: cluster-scoped objects other than namespaces always match.
fn namespace_matches(rest: &RestStore, hook: &Hook, attrs: &Attributes) -> Result<bool, ApiError> {
    if attrs.namespace.is_empty() && attrs.resource.name != "namespaces" {
        return Ok(true);
    }
    let selector = hook.namespace_selector.as_ref().map_err(ApiError::internal)?;
    if selector.is_empty() {
        return Ok(true);
    }
    Ok(selector.matches(Some(&namespace_labels(rest, attrs)?)))
}

fn object_matches(hook: &Hook, attrs: &Attributes) -> Result<bool, ApiError> {
    let selector = hook.object_selector.as_ref().map_err(ApiError::internal)?;
    if selector.is_empty() {
        return Ok(true);
    }
    let matches = |obj: Option<&Value>| obj.is_some() && selector.matches(labels(obj));
    Ok(matches(attrs.object.as_ref()) || matches(attrs.old_object.as_ref()))
}

/// Which version of the request a webhook is called with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// The request's own resource and version.
    Exact,
    /// An equivalent resource a rule names (`matchPolicy: Equivalent`): its resource and kind.
    Equivalent(Gvx, Gvx),
}

/// Whether `hook`'s selectors and rules pick the request (kube's `ShouldCallHook` before match
/// conditions, which run on the object in the invocation's version); an error refuses it.
///
/// kube's order: selectors first, but their errors only count for webhooks whose rules match.
/// With `matchPolicy: Equivalent`, a webhook whose rules do not name the request's resource is
/// called if they name one of its equivalents (the first, in rule order).
pub fn invocation(rest: &RestStore, hook: &Hook, attrs: &Attributes, equivalents: &Equivalents<'_>) -> Result<Option<Invocation>, ApiError> {
    let namespace = namespace_matches(rest, hook, attrs);
    if matches!(namespace, Ok(false)) {
        return Ok(None);
    }
    let object = object_matches(hook, attrs);
    if matches!(object, Ok(false)) {
        return Ok(None);
    }
    let invocation = if hook.rules.iter().any(|r| r.matches(attrs, &attrs.resource)) {
        Some(Invocation::Exact)
    } else if hook.equivalent {
        let found = hook.rules.iter().find_map(|r| equivalents.list(attrs).iter().find(|(resource, _)| r.matches(attrs, resource)).cloned());
        found.map(|(resource, kind)| Invocation::Equivalent(resource, kind))
    } else {
        None
    };
    if invocation.is_none() {
        return Ok(None);
    }
    namespace?;
    object?;
    Ok(invocation)
}

/// The request's equivalent resources, asked of the server once per request and only when a
/// webhook needs them (a request's resource does not change while webhooks mutate its object).
pub struct Equivalents<'a> {
    source: Option<&'a dyn EquivalentResources>,
    found: std::sync::OnceLock<Vec<(Gvx, Gvx)>>,
}

impl<'a> Equivalents<'a> {
    /// Equivalents from `source` (none without one).
    pub fn new(source: Option<&'a dyn EquivalentResources>) -> Self {
        Equivalents { source, found: std::sync::OnceLock::new() }
    }

    fn list(&self, attrs: &Attributes) -> &[(Gvx, Gvx)] {
        self.found.get_or_init(|| self.source.map(|s| s.equivalents(&attrs.resource, &attrs.subresource)).unwrap_or_default())
    }

    /// `attrs` as a webhook of `invocation` sees them: objects converted to the equivalent's
    /// version, kind and resource its own; None for an exact invocation.
    pub async fn versioned(&self, attrs: &Attributes, invocation: &Invocation) -> Result<Option<Attributes>, ApiError> {
        let Invocation::Equivalent(resource, kind) = invocation else { return Ok(None) };
        let source = self.source.ok_or_else(|| ApiError::internal(format!("unable to convert to {}: no converter", resource.name)))?;
        let mut versioned = attrs.clone();
        for object in [&mut versioned.object, &mut versioned.old_object] {
            if let Some(obj) = object.take() {
                *object = Some(source.convert(obj, &attrs.resource, resource).await?);
            }
        }
        versioned.resource = resource.clone();
        versioned.kind = kind.clone();
        Ok(Some(versioned))
    }

    /// `object`, in the version of equivalent `from`, back in `to`'s (the request's).
    pub async fn back(&self, object: Value, from: &Gvx, to: &Gvx) -> Result<Value, ApiError> {
        let source = self.source.ok_or_else(|| ApiError::internal("no converter"))?;
        source.convert(object, from, to).await
    }
}

/// Whether `hook`'s match conditions let it be called for `attrs` (in the invocation's version;
/// `requested` is the request as made); an error refuses the request.
pub fn conditions_allow(hook: &Hook, attrs: &Attributes, requested: &Attributes, authorizer: Option<&Arc<dyn CelAuthorizer>>) -> Result<bool, ApiError> {
    if hook.conditions.is_empty() {
        return Ok(true);
    }
    let request = crate::review::admission_request(&uuid::Uuid::new_v4().to_string(), attrs, requested);
    match hook.conditions.evaluate(attrs, &request, authorizer, hook.ignore_failures) {
        Verdict::Call => Ok(true),
        Verdict::Skip => Ok(false),
        Verdict::Refuse(e) => Err(ApiError::forbidden_for(&requested.group_resource(), &requested.name, &e)),
    }
}
