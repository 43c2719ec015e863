//! PodSecurity (kube's `plugin/pkg/admission/security/podsecurity` over
//! `k8s.io/pod-security-admission`): the Pod Security Standards a namespace's
//! `pod-security.kubernetes.io/*` labels choose, applied to the pods written into it.
//!
//! - **Pods** (creates, and updates that change an image or add an ephemeral container) are
//!   refused when they violate the namespace's `enforce` policy, with kube's 403 naming every
//!   violation; the `audit` policy's violations become the audit annotation
//!   `pod-security.kubernetes.io/audit-violations`, the `warn` policy's a warning.
//! - **Workloads** (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs,
//!   ReplicationControllers, PodTemplates) are never refused, since their pods will be: their
//!   template is checked against `audit` and `warn` only, so the user learns early.
//! - **Namespaces** must carry valid labels (422 otherwise); raising `enforce` warns about the
//!   existing pods that would now be refused ([`namespace`]).
//!
//! Defaults for unlabelled namespaces and the exempt users, namespaces and runtime classes come
//! from the plugin's configuration ([`config`]). Invalid labels fail as kube fails them: an
//! unknown enforce level enforces restricted, unknown audit and warn levels are ignored, and
//! the parse error is noted in the `pod-security.kubernetes.io/error` audit annotation.
//! The checks themselves are in [`checks`].

pub mod api;
pub mod checks;
pub mod config;
mod namespace;

use std::collections::BTreeMap;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use kapi_registry::strategy::CatalogStrategy;
use serde_json::Value;

use self::api::{LabelError, LevelVersion, Policy, PREFIX};
use self::checks::go_quote;
use self::config::Config;
use crate::lookup;

/// Pod subresources that cannot change what a pod runs as (kube ignores them; any other pod
/// subresource carries a Pod and is evaluated, so that a new one fails safe).
const IGNORED_POD_SUBRESOURCES: &[&str] = &["exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"];

/// The plugin.
pub struct PodSecurity {
    rest: RestStore,
    config: Config,
}

impl PodSecurity {
    /// The plugin over `rest`'s namespace and pod caches, configured by the `PodSecurity`
    /// entry of `--admission-control-config-file` (None: kube's privileged defaults). An
    /// invalid configuration is an error start-up should stop with.
    pub fn new(rest: RestStore, configuration: Option<&Value>) -> Result<Self, String> {
        Ok(PodSecurity { rest, config: Config::from_value(configuration)? })
    }

    /// The labels of `namespace`: from the cache, else from the store (kube's lister, then
    /// client).
    async fn namespace_labels(&self, namespace: &str) -> Result<BTreeMap<String, String>, ApiError> {
        let spec = lookup::spec("", "v1", "namespaces")?;
        if let Some(ns) = lookup::get(&self.rest, spec, None, namespace) {
            return Ok(api::labels_of(&ns));
        }
        let ns = self.rest.get(&CatalogStrategy(spec), None, namespace).await?;
        Ok(api::labels_of(&ns))
    }

    /// The policy of the request's namespace; None (with kube's audit annotation) when the
    /// namespace cannot be read.
    async fn policy(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(Policy, Vec<LabelError>), String> {
        match self.namespace_labels(&attrs.namespace).await {
            Ok(labels) => Ok(api::policy_to_evaluate(&labels, self.config.defaults)),
            Err(e) => {
                let failed = format!("failed to lookup namespace {}", go_quote(&attrs.namespace));
                annotate(outcome, "error", format!("{failed}: {}", e.message));
                Err(failed)
            }
        }
    }

    /// Exempt users and namespaces skip evaluation, noted in the audit annotation.
    fn exempt(&self, attrs: &Attributes, outcome: &mut Outcome) -> bool {
        let reason = if self.config.exempt_namespace(&attrs.namespace) {
            "namespace"
        } else if self.config.exempt_user(&attrs.user.name) {
            "user"
        } else {
            return false;
        };
        annotate(outcome, "exempt", reason);
        true
    }

    async fn validate_pod(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        if IGNORED_POD_SUBRESOURCES.contains(&attrs.subresource.as_str()) || self.exempt(attrs, outcome) {
            return Ok(());
        }
        let (policy, errors) = self.policy(attrs, outcome).await.map_err(ApiError::internal)?;
        if errors.is_empty() && policy.fully_privileged() {
            annotate(outcome, "enforce-policy", LevelVersion::PRIVILEGED.to_string());
            return Ok(());
        }
        let Some(pod) = attrs.object.as_ref() else { return Err(ApiError::bad_request("failed to decode pod")) };
        if attrs.operation == Operation::Update {
            let Some(old) = attrs.old_object.as_ref() else { return Err(ApiError::bad_request("failed to decode old pod")) };
            if !significant_update(pod, old) {
                return Ok(());
            }
        }
        let empty = Value::Object(Default::default());
        let metadata = pod.get("metadata").unwrap_or(&empty);
        let spec = pod.get("spec").unwrap_or(&empty);
        self.evaluate(attrs, outcome, policy, &errors, metadata, spec, true)
    }

    async fn validate_workload(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        if !attrs.subresource.is_empty() || self.exempt(attrs, outcome) {
            return Ok(());
        }
        let Ok((policy, errors)) = self.policy(attrs, outcome).await else { return Ok(()) };
        if errors.is_empty() && policy.warn.level == api::Level::Privileged && policy.audit.level == api::Level::Privileged {
            return Ok(());
        }
        let Some(template) = attrs.object.as_ref().and_then(|o| pod_template(&attrs.resource.group, &attrs.resource.name, o)) else {
            return Ok(());
        };
        let empty = Value::Object(Default::default());
        let metadata = template.get("metadata").filter(|m| !m.is_null()).unwrap_or(&empty);
        let spec = template.get("spec").filter(|s| !s.is_null()).unwrap_or(&empty);
        self.evaluate(attrs, outcome, policy, &errors, metadata, spec, false)
    }

    /// kube's `EvaluatePod`: enforce (pods only), then audit, then warn (only when not
    /// refused), each level and version evaluated once.
    #[allow(clippy::too_many_arguments)]
    fn evaluate(
        &self,
        attrs: &Attributes,
        outcome: &mut Outcome,
        policy: Policy,
        errors: &[LabelError],
        metadata: &Value,
        spec: &Value,
        enforce: bool,
    ) -> Result<(), ApiError> {
        if self.config.exempt_runtime_class(spec.get("runtimeClassName").and_then(Value::as_str)) {
            annotate(outcome, "exempt", "runtimeClass");
            return Ok(());
        }
        if !errors.is_empty() {
            annotate(outcome, "error", format!("Failed to parse policy: {}", api::aggregate(errors)));
        }
        let mut cached: Vec<(LevelVersion, Vec<checks::Violation>)> = Vec::new();
        let mut results = |lv: LevelVersion| -> Vec<checks::Violation> {
            if let Some((_, v)) = cached.iter().find(|(c, _)| *c == lv) {
                return v.clone();
            }
            let v = checks::evaluate(lv, metadata, spec);
            cached.push((lv, v.clone()));
            v
        };
        let mut refusal = None;
        if enforce {
            annotate(outcome, "enforce-policy", policy.enforce.to_string());
            let violations = results(policy.enforce);
            if !violations.is_empty() {
                let reason = format!("violates PodSecurity {}: {}", go_quote(&policy.enforce.to_string()), checks::detail(&violations));
                refusal = Some(attrs.forbidden(&reason));
            }
        }
        let audit = results(policy.audit);
        if !audit.is_empty() {
            annotate(outcome, "audit-violations", would_violate(policy.audit, &audit));
        }
        if refusal.is_none() {
            let warn = results(policy.warn);
            if !warn.is_empty() {
                outcome.warn(would_violate(policy.warn, &warn));
            }
        }
        refusal.map_or(Ok(()), Err)
    }
}

/// `would violate PodSecurity "baseline:latest": ...`, kube's warning and audit text.
fn would_violate(lv: LevelVersion, violations: &[checks::Violation]) -> String {
    format!("would violate PodSecurity {}: {}", go_quote(&lv.to_string()), checks::detail(violations))
}

/// Adds kube's `pod-security.kubernetes.io/<key>` audit annotation. Each key is set once per
/// request, so a conflict cannot happen.
fn annotate(outcome: &mut Outcome, key: &str, value: impl Into<String>) {
    let _ = outcome.annotate(format!("{PREFIX}{key}"), value);
}

/// The pod template of a workload kube checks (None: not one, or a ReplicationController
/// without a template).
fn pod_template<'a>(group: &str, resource: &str, obj: &'a Value) -> Option<&'a Value> {
    static EMPTY: Value = Value::Null;
    let template = match (group, resource) {
        ("", "podtemplates") => obj.get("template"),
        ("", "replicationcontrollers") => return obj.pointer("/spec/template").filter(|t| !t.is_null()),
        ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets") | ("batch", "jobs") => obj.pointer("/spec/template"),
        ("batch", "cronjobs") => obj.pointer("/spec/jobTemplate/spec/template"),
        _ => return None,
    };
    // The other kinds' templates are not pointers in kube: a missing one is an empty pod.
    Some(template.unwrap_or(&EMPTY))
}

/// Whether the kinds of `resource` carry a pod template kube checks.
fn is_workload(group: &str, resource: &str) -> bool {
    matches!(
        (group, resource),
        ("", "podtemplates" | "replicationcontrollers")
            | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
            | ("batch", "jobs" | "cronjobs")
    )
}

/// kube's `isSignificantPodUpdate`: only images and ephemeral containers can change what an
/// existing pod runs, so other updates (labels, status, scheduling) are not evaluated again.
fn significant_update(pod: &Value, old: &Value) -> bool {
    let list =
        |p: &Value, key: &str| -> Vec<Value> { p.pointer(&format!("/spec/{key}")).and_then(Value::as_array).cloned().unwrap_or_default() };
    let image = |c: &Value| c.get("image").and_then(Value::as_str).unwrap_or("").to_owned();
    for key in ["containers", "initContainers"] {
        let (new, old) = (list(pod, key), list(old, key));
        if new.len() != old.len() || new.iter().zip(&old).any(|(n, o)| image(n) != image(o)) {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(pod, "ephemeralContainers").iter().any(|c| match old_ephemeral.iter().find(|o| o.get("name") == c.get("name")) {
        None => true,
        Some(o) => image(o) != image(c),
    })
}

#[async_trait]
impl AdmissionPlugin for PodSecurity {
    fn name(&self) -> &'static str {
        "PodSecurity"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn validate(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        let (group, resource) = (attrs.resource.group.as_str(), attrs.resource.name.as_str());
        match (group, resource) {
            ("", "namespaces") => self.validate_namespace(attrs, outcome),
            ("", "pods") => self.validate_pod(attrs, outcome).await,
            _ if is_workload(group, resource) => self.validate_workload(attrs, outcome).await,
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_image_changes_and_new_ephemeral_containers_are_significant() {
        let pod =
            json!({"spec": {"containers": [{"name": "a", "image": "nginx"}], "ephemeralContainers": [{"name": "d", "image": "busybox"}]}});
        let mut relabelled = pod.clone();
        relabelled["metadata"] = json!({"labels": {"x": "y"}});
        relabelled["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "1"}});
        assert!(!significant_update(&relabelled, &pod));
        let mut image = pod.clone();
        image["spec"]["containers"][0]["image"] = json!("nginx:2");
        assert!(significant_update(&image, &pod));
        let mut debug = pod.clone();
        debug["spec"]["ephemeralContainers"].as_array_mut().unwrap().push(json!({"name": "e", "image": "busybox"}));
        assert!(significant_update(&debug, &pod));
        let mut init = pod.clone();
        init["spec"]["initContainers"] = json!([{"name": "i", "image": "x"}]);
        assert!(significant_update(&init, &pod));
    }

    #[test]
    fn workload_templates_are_found_where_kube_looks() {
        let t = json!({"spec": {"containers": []}});
        let deploy = json!({"spec": {"template": t}});
        assert_eq!(pod_template("apps", "deployments", &deploy), Some(&t));
        let cron = json!({"spec": {"jobTemplate": {"spec": {"template": t}}}});
        assert_eq!(pod_template("batch", "cronjobs", &cron), Some(&t));
        assert_eq!(pod_template("", "podtemplates", &json!({"template": t})), Some(&t));
        assert_eq!(pod_template("", "replicationcontrollers", &json!({"spec": {}})), None);
        assert_eq!(pod_template("apps", "replicasets", &json!({"spec": {}})), Some(&Value::Null));
        assert_eq!(pod_template("", "services", &deploy), None);
    }
}
