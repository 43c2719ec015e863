//! Whether a webhook is called for a request (kube's `ShouldCallHook`): its namespace
//! selector, object selector and rules, then its match conditions.

use std::sync::Arc;

use kapi_admission::{Attributes, Operation};
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
    /// kube's rules.Matcher.
    pub fn matches(&self, attrs: &Attributes) -> bool {
        let scope = match self.scope.as_deref() {
            None => true,
            Some("Namespaced") => !is_namespace_resource(attrs) && !attrs.namespace.is_empty(),
            Some("Cluster") => is_namespace_resource(attrs) || attrs.namespace.is_empty(),
            Some(_) => false,
        };
        let operation = self.operations.iter().any(|op| op == "*" || op == attrs.operation.as_str());
        let resource = self.resources.iter().any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == attrs.resource.name) && (sub == "*" || sub == attrs.subresource)
        });
        scope
            && operation
            && exact_or_wildcard(&self.api_groups, &attrs.resource.group)
            && exact_or_wildcard(&self.api_versions, &attrs.resource.version)
            && resource
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

/// Whether `hook` is called for `attrs`; an error refuses the request.
///
/// kube's order: selectors first, but their errors only count for webhooks whose rules match.
/// With `matchPolicy: Equivalent`, kube also matches the same resource under other versions
/// and converts the object; kapi serves each built-in resource under one version, and a custom
/// resource's other versions are matched here only when a rule names the request's version.
pub fn should_call(rest: &RestStore, hook: &Hook, attrs: &Attributes, authorizer: Option<&Arc<dyn CelAuthorizer>>) -> Result<bool, ApiError> {
    let namespace = namespace_matches(rest, hook, attrs);
    if matches!(namespace, Ok(false)) {
        return Ok(false);
    }
    let object = object_matches(hook, attrs);
    if matches!(object, Ok(false)) {
        return Ok(false);
    }
    if !hook.rules.iter().any(|r| r.matches(attrs)) {
        return Ok(false);
    }
    namespace?;
    object?;
    if hook.conditions.is_empty() {
        return Ok(true);
    }
    let request = crate::review::admission_request(&uuid::Uuid::new_v4().to_string(), attrs);
    match hook.conditions.evaluate(attrs, &request, authorizer, hook.ignore_failures) {
        Verdict::Call => Ok(true),
        Verdict::Skip => Ok(false),
        Verdict::Refuse(e) => Err(ApiError::forbidden_for(&attrs.group_resource(), &attrs.name, &e)),
    }
}
