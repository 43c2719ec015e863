//! Namespace writes (kube's `ValidateNamespace`): the labels must parse, and making `enforce`
//! stricter dry-runs the new level against the pods already there, so the administrator sees
//! which would now be refused. Existing pods are never touched; the answer is only warnings.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use kapi_admission::{Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use serde_json::Value;

use super::api::{self, Level, LevelVersion, Policy};
use super::checks::{self, go_quote};
use super::PodSecurity;
use crate::lookup;

/// kube checks at most this many existing pods ...
const MAX_PODS_TO_CHECK: usize = 3000;
/// ... and for at most this long, so a label change in a huge namespace stays quick.
const POD_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

impl PodSecurity {
    pub(super) fn validate_namespace(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        if !attrs.subresource.is_empty() {
            return Ok(());
        }
        let Some(ns) = attrs.object.as_ref() else { return Err(ApiError::bad_request("failed to decode namespace")) };
        let name = ns.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(&attrs.name).to_owned();
        let labels = api::labels_of(ns);
        let (new, new_errors) = api::policy_to_evaluate(&labels, self.config.defaults);
        let invalid = |errors: &[api::LabelError]| ApiError::invalid("", "Namespace", &name, errors.iter().map(|e| e.cause()).collect());
        // kube's request namespace of a namespace write is the name in the URL: none on create.
        let request_namespace = if attrs.operation == Operation::Update { attrs.name.as_str() } else { attrs.namespace.as_str() };
        match attrs.operation {
            Operation::Create => {
                if !new_errors.is_empty() {
                    return Err(invalid(&new_errors));
                }
                if self.config.exempt_namespace(request_namespace) {
                    if let Some(w) = self.exempt_namespace_warning(&name, &new, &labels) {
                        outcome.warn(w);
                    }
                }
                Ok(())
            }
            Operation::Update => {
                let old_labels = attrs.old_object.as_ref().map(api::labels_of).unwrap_or_default();
                let (old, old_errors) = api::policy_to_evaluate(&old_labels, self.config.defaults);
                // Labels that were already invalid in the same way do not block other changes.
                if !new_errors.is_empty() && (old_errors.is_empty() || new_errors != old_errors) {
                    return Err(invalid(&new_errors));
                }
                let relaxed = new.enforce.version == old.enforce.version && new.enforce.level <= old.enforce.level;
                if new.enforce == old.enforce || new.enforce.level == Level::Privileged || relaxed {
                    return Ok(());
                }
                if self.config.exempt_namespace(request_namespace) {
                    if let Some(w) = self.exempt_namespace_warning(&name, &new, &labels) {
                        outcome.warn(w);
                    }
                    return Ok(());
                }
                for w in self.evaluate_pods_in_namespace(&name, new.enforce) {
                    outcome.warn(w);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// kube's warning that an exempt namespace's labels will be ignored, naming the modes
    /// that were set and are not privileged (None when nothing would be enforced anyway).
    fn exempt_namespace_warning(&self, namespace: &str, policy: &Policy, labels: &BTreeMap<String, String>) -> Option<String> {
        if policy.fully_privileged() || policy.equivalent(&self.config.defaults) {
            return None;
        }
        let modes = [
            ("enforce", policy.enforce, api::ENFORCE_LABEL, api::ENFORCE_VERSION_LABEL),
            ("audit", policy.audit, api::AUDIT_LABEL, api::AUDIT_VERSION_LABEL),
            ("warn", policy.warn, api::WARN_LABEL, api::WARN_VERSION_LABEL),
        ];
        let shown: Vec<String> = modes
            .iter()
            .filter(|(_, lv, level, version)| {
                lv.level != Level::Privileged && (labels.contains_key(*level) || labels.contains_key(*version))
            })
            .map(|(mode, lv, _, _)| format!("{mode}={lv}"))
            .collect();
        Some(format!(
            "namespace {} is exempt from Pod Security, and the policy ({}) will be ignored",
            go_quote(namespace),
            shown.join(", ")
        ))
    }

    /// kube's `EvaluatePodsInNamespace`: the existing pods checked against the new enforce
    /// level (one pod per controller first, exempt runtime classes skipped, at most
    /// [`MAX_PODS_TO_CHECK`] within [`POD_CHECK_TIMEOUT`]); pods with the same violations are
    /// reported once, under the first name, with how many others share them.
    fn evaluate_pods_in_namespace(&self, namespace: &str, enforce: LevelVersion) -> Vec<String> {
        let deadline = Instant::now() + POD_CHECK_TIMEOUT;
        let pods = match lookup::spec("", "v1", "pods") {
            Ok(spec) => lookup::list(&self.rest, spec, Some(namespace)),
            Err(_) => return vec!["failed to list pods while checking new PodSecurity enforce level".to_owned()],
        };
        let pods = self.prioritize(pods.iter().map(|p| p.as_ref()).collect());
        let total = pods.len();
        let mut checked = total.min(MAX_PODS_TO_CHECK);
        let mut order: Vec<String> = Vec::new();
        let mut counts: BTreeMap<String, (String, usize)> = BTreeMap::new();
        let empty = Value::Object(Default::default());
        for (i, pod) in pods.iter().take(MAX_PODS_TO_CHECK).enumerate() {
            let violations = checks::evaluate(enforce, pod.get("metadata").unwrap_or(&empty), pod.get("spec").unwrap_or(&empty));
            if !violations.is_empty() {
                let warning = checks::reasons(&violations);
                let pod_name = lookup::str_at(pod, "/metadata/name").to_owned();
                match counts.get_mut(&warning) {
                    None => {
                        order.push(warning.clone());
                        counts.insert(warning, (pod_name, 1));
                    }
                    Some((first, count)) => {
                        if pod_name < *first {
                            *first = pod_name;
                        }
                        *count += 1;
                    }
                }
            }
            if Instant::now() >= deadline {
                checked = i + 1;
                break;
            }
        }
        let mut warnings = Vec::new();
        if checked < total {
            warnings.push(format!("new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"));
        }
        if !order.is_empty() {
            warnings.push(format!(
                "existing pods in namespace {} violate the new PodSecurity enforce level {}",
                go_quote(namespace),
                go_quote(&enforce.to_string())
            ));
        }
        let mut pod_warnings: Vec<String> = order
            .into_iter()
            .map(|w| {
                let (first, count) = &counts[&w];
                match count {
                    1 => format!("{first}: {w}"),
                    2 => format!("{first} (and 1 other pod): {w}"),
                    n => format!("{first} (and {} other pods): {w}", n - 1),
                }
            })
            .collect();
        pod_warnings.sort();
        warnings.extend(pod_warnings);
        warnings
    }

    /// kube's `prioritizePods`: pods of exempt runtime classes are left out; the first pod of
    /// each controller comes before the other replicas, which likely share its violations.
    fn prioritize<'a>(&self, pods: Vec<&'a Value>) -> Vec<&'a Value> {
        let mut first = Vec::new();
        let mut replicas = Vec::new();
        let mut controllers = HashSet::new();
        for pod in pods {
            if self.config.exempt_runtime_class(pod.pointer("/spec/runtimeClassName").and_then(Value::as_str)) {
                continue;
            }
            let controller = pod
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|refs| refs.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true)))
                .map(|r| lookup::str_at(r, "/uid").to_owned());
            match controller {
                Some(uid) if controllers.contains(&uid) => replicas.push(pod),
                Some(uid) => {
                    controllers.insert(uid);
                    first.push(pod);
                }
                None => first.push(pod),
            }
        }
        first.extend(replicas);
        first
    }
}
