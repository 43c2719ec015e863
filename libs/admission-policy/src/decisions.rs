//! From decisions to the request's fate (the second half of kube's validating dispatcher):
//! `validationActions` send a failure to the 403/422 answer (`Deny`), a `Warning` header
//! (`Warn`) or the audit event (`Audit`); audit annotations are collected per policy; a
//! configuration error follows the policy's failure policy.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use kapi_admission::{Attributes, Outcome};
use kapi_apiextensions::cel::{AuthzAttributes, AuthzDecision, CelAuthorizer};
use kapi_apimachinery::status::{Cause, StatusReason};
use kapi_apimachinery::ApiError;
use serde_json::{json, Value};

use crate::compiled::FailurePolicy;
use crate::validator::{AuditAction, Decision, ValidateResult};

/// kube's `maxAuditAnnotationValueLength`.
const MAX_AUDIT_VALUE: usize = 10 * 1024;
/// kube's `maxValidationFailures`.
const MAX_VALIDATION_FAILURES: usize = 50;
/// The audit annotation of `Audit` failures.
const VALIDATION_FAILURE: &str = "validation.policy.admission.k8s.io/validation_failure";

/// The policy and binding a result belongs to.
pub(crate) struct Denial<'a> {
    pub policy: &'a str,
    pub binding: &'a str,
    /// `spec.validationActions`.
    pub actions: Option<&'a Value>,
}

/// A refusal, with where it came from.
struct Denied {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: Option<String>,
}

/// What a request's policies decided so far.
#[derive(Default)]
pub(crate) struct Dispatch {
    denied: Vec<Denied>,
    failures: Vec<Value>,
}

/// kube's audit annotation collector of one policy: the same value from several bindings
/// once, distinct values joined.
#[derive(Default)]
pub(crate) struct AuditCollector {
    annotations: BTreeMap<String, Vec<String>>,
}

impl AuditCollector {
    fn add(&mut self, key: &str, value: String) {
        let values = self.annotations.entry(key.to_owned()).or_default();
        if !values.contains(&value) {
            values.push(value);
        }
    }

    /// Adds the annotations as `<policy>/<key>` (a conflicting value is dropped, as kube logs
    /// and drops it).
    pub(crate) fn publish(self, policy: &str, outcome: &mut Outcome) {
        for (key, values) in self.annotations {
            if let Err(e) = outcome.annotate(format!("{policy}/{key}"), values.join(", ")) {
                tracing::warn!(policy, error = %e, "audit annotation not set");
            }
        }
    }
}

/// Go's `json.Marshal` escapes for HTML.
fn go_json(v: &Value) -> String {
    kapi_apimachinery::go_json::escape_html(&v.to_string())
}

/// The first `max` bytes of `s`, at a character boundary.
fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// kube's `reasonToCode`.
fn status_of(reason: &str) -> (u16, StatusReason) {
    match reason {
        "Forbidden" => (403, StatusReason::Forbidden),
        "Unauthorized" => (401, StatusReason::Unauthorized),
        "RequestEntityTooLarge" => (413, StatusReason::RequestEntityTooLarge),
        _ => (422, StatusReason::Invalid),
    }
}

impl Dispatch {
    /// A policy or binding that cannot be used (kube's `addConfigError`).
    pub(crate) fn config_error(&mut self, f: &FailurePolicy, policy: &str, binding: Option<&str>, error: &str) {
        let message = match (f, binding) {
            (FailurePolicy::Ignore, _) => return,
            (FailurePolicy::Unknown(p), _) => format!("unrecognized failure policy: '{p}'"),
            (FailurePolicy::Fail, None) => format!("failed to configure policy: {error}"),
            (FailurePolicy::Fail, Some(_)) => format!("failed to configure binding: {error}"),
        };
        self.denied.push(Denied { policy: policy.into(), binding: binding.map(str::to_owned), message, reason: None });
    }

    /// The decisions and audit annotations of one evaluation, by the binding's actions.
    pub(crate) fn record(
        &mut self,
        at: &Denial<'_>,
        result: ValidateResult,
        annotations: &mut AuditCollector,
        outcome: &mut Outcome,
    ) {
        let actions: Vec<&str> = at
            .actions
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (i, d) in result.decisions.into_iter().enumerate().filter(|(_, d)| d.deny) {
            for action in &actions {
                match *action {
                    "Deny" => self.deny(at, &d),
                    "Audit" => self.failures.push(json!({
                        "message": d.message,
                        "policy": at.policy,
                        "binding": at.binding,
                        "expressionIndex": i,
                        "validationActions": actions,
                    })),
                    "Warn" => outcome.warn(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                        at.policy, at.binding, d.message
                    )),
                    _ => {}
                }
            }
        }
        for (key, action) in result.audit {
            match action {
                AuditAction::Publish(value) => annotations.add(&key, truncate(&value, MAX_AUDIT_VALUE)),
                // an annotation that fails under `Fail` refuses the request, whatever the actions
                AuditAction::Error(message) => self.deny(at, &Decision { deny: true, message, reason: None }),
                AuditAction::Exclude => {}
            }
        }
    }

    fn deny(&mut self, at: &Denial<'_>, d: &Decision) {
        self.denied.push(Denied {
            policy: at.policy.into(),
            binding: Some(at.binding.into()),
            message: d.message.clone(),
            reason: d.reason.clone(),
        });
    }

    /// Publishes the `Audit` failures and answers with the first refusal, in kube's words:
    /// `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<p>' with binding '<b>'
    /// denied request: <message>`, with the validation's reason and its code (422 `Invalid`
    /// unless the validation names another).
    pub(crate) fn finish(mut self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        if !self.failures.is_empty() {
            self.failures.truncate(MAX_VALIDATION_FAILURES);
            if let Err(e) = outcome.annotate(VALIDATION_FAILURE, go_json(&Value::Array(self.failures))) {
                tracing::warn!(error = %e, "validation failure audit annotation not set");
            }
        }
        let Some(first) = self.denied.into_iter().next() else { return Ok(()) };
        let message = match &first.binding {
            Some(b) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
                first.policy, first.message
            ),
            None => format!("ValidatingAdmissionPolicy '{}' denied request: {}", first.policy, first.message),
        };
        let mut err = attrs.forbidden(&message);
        let (code, reason) = status_of(first.reason.as_deref().unwrap_or("Invalid"));
        err.code = code;
        err.reason = reason;
        if let Some(details) = err.details.as_mut() {
            details.causes.push(Cause { reason: String::new(), message, field: String::new() });
        }
        Err(err)
    }
}

/// kube's caching authorizer: one request asks the same question once.
pub(crate) struct CachingAuthorizer {
    inner: Arc<dyn CelAuthorizer>,
    answers: Mutex<HashMap<AuthzAttributes, AuthzDecision>>,
}

impl CachingAuthorizer {
    pub(crate) fn new(inner: Arc<dyn CelAuthorizer>) -> Self {
        CachingAuthorizer { inner, answers: Mutex::new(HashMap::new()) }
    }
}

impl CelAuthorizer for CachingAuthorizer {
    fn authorize(&self, attrs: &AuthzAttributes) -> AuthzDecision {
        if let Some(d) = self.answers.lock().unwrap_or_else(|e| e.into_inner()).get(attrs) {
            return d.clone();
        }
        let d = self.inner.authorize(attrs);
        self.answers.lock().unwrap_or_else(|e| e.into_inner()).insert(attrs.clone(), d.clone());
        d
    }
}
