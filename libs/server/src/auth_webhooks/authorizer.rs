//! The webhook authorizer: a request the authorizers before it have no opinion on is sent to
//! the webhook as a SubjectAccessReview, unless its `matchConditions` (CEL over the review's
//! spec) say otherwise. Allowed answers are cached for `authorizedTTL`, the others for
//! `unauthorizedTTL`; a webhook that cannot be reached decides by `failurePolicy` (the legacy
//! flags' webhook has no opinion then, as kube's).

use std::sync::Arc;
use std::time::Duration;

use kapi_apiextensions::cel::{Activation, Declarations, EvalError, Evaluator, Expression, ExpressionCompiler, Input, ReturnType};
use kapi_auth::{Attributes, Authorizer, Decision};
use kapi_webhook::{Client, ClientConfig};
use serde_json::{json, Map, Value};

use super::cache::TtlCache;

/// kube's cost budget of one authorizer's match conditions.
const BUDGET: i64 = 2_500_000;

/// What a webhook decides when it cannot be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Let the next authorizer decide.
    NoOpinion,
    /// Forbid.
    Deny,
}

/// One webhook authorizer's settings (an AuthorizationConfiguration entry, or the legacy
/// `--authorization-webhook-*` flags).
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// The authorizer's name, for messages.
    pub name: String,
    /// The webhook.
    pub config: ClientConfig,
    /// `subjectAccessReviewVersion`: `v1` or `v1beta1`.
    pub version: String,
    /// The call's timeout.
    pub timeout: Duration,
    /// How long an allowed answer is kept.
    pub authorized_ttl: Duration,
    /// How long any other answer is kept.
    pub unauthorized_ttl: Duration,
    /// Decision when the webhook cannot be asked.
    pub failure_policy: FailurePolicy,
    /// `matchConditions[].expression`.
    pub match_conditions: Vec<String>,
}

/// The authorizer.
pub struct WebhookAuthorizer {
    client: Client,
    settings: WebhookSettings,
    conditions: Vec<Expression>,
    cache: TtlCache<Decision>,
}

impl WebhookAuthorizer {
    /// The authorizer calling `settings.config` through `client`; conditions that do not
    /// compile are refused here (kube refuses the configuration).
    pub fn new(client: Client, settings: WebhookSettings) -> Result<Self, String> {
        let compiler = ExpressionCompiler::subject_access_review();
        let decls = Declarations { params: false, authorizer: false };
        let mut conditions = Vec::new();
        for (i, expression) in settings.match_conditions.iter().enumerate() {
            match compiler.compile(expression, ReturnType::Bool, decls) {
                Ok(compiled) => conditions.push(compiled),
                Err(e) => return Err(format!("matchConditions[{i}].expression: Invalid value: {expression:?}: {}", e.detail)),
            }
        }
        Ok(WebhookAuthorizer { client, settings, conditions, cache: TtlCache::default() })
    }

    /// The review's spec for `attrs`, in the configured version's field names.
    fn spec(&self, attrs: &Attributes) -> Value {
        let mut spec = Map::new();
        if attrs.resource_request {
            spec.insert(
                "resourceAttributes".into(),
                json!({"namespace": attrs.namespace, "verb": attrs.verb, "group": attrs.api_group, "version": attrs.api_version,
                    "resource": attrs.resource, "subresource": attrs.subresource, "name": attrs.name}),
            );
        } else {
            spec.insert("nonResourceAttributes".into(), json!({"path": attrs.path, "verb": attrs.verb}));
        }
        spec.insert("user".into(), json!(attrs.user.name));
        // v1beta1 names the groups `group`.
        let groups_field = if self.settings.version == "v1beta1" { "group" } else { "groups" };
        spec.insert(groups_field.into(), json!(attrs.user.groups));
        if !attrs.user.uid.is_empty() {
            spec.insert("uid".into(), json!(attrs.user.uid));
        }
        if !attrs.user.extra.is_empty() {
            spec.insert("extra".into(), json!(attrs.user.extra));
        }
        Value::Object(spec)
    }

    /// Whether the conditions let the webhook be asked: Ok(false) when one is false.
    fn matches(&self, spec: &Value) -> Result<bool, String> {
        if self.conditions.is_empty() {
            return Ok(true);
        }
        // The conditions see the v1 form of the spec.
        let mut request = spec.clone();
        if let Some(groups) = request.as_object_mut().and_then(|m| m.remove("group")) {
            request["groups"] = groups;
        }
        let input = Input { request: Some(&request), ..Input::default() };
        let mut evaluator = Evaluator::new(Arc::new(Activation::new(&input)), Arc::from(Vec::new()), BUDGET);
        let mut errors = Vec::new();
        for compiled in &self.conditions {
            match evaluator.evaluate(compiled) {
                Ok(result) if result.as_bool() == Some(false) => return Ok(false),
                Ok(_) => {}
                Err(e @ EvalError::OutOfBudget) => return Err(e.to_string()),
                Err(EvalError::Failed(e)) => errors.push(e),
            }
        }
        match errors.len() {
            0 => Ok(true),
            _ => Err(errors.join(", ")),
        }
    }

    fn on_failure(&self, error: &str) -> Decision {
        tracing::warn!(authorizer = %self.settings.name, "authorization webhook failed: {error}");
        match self.settings.failure_policy {
            FailurePolicy::NoOpinion => Decision::NoOpinion(String::new()),
            FailurePolicy::Deny => Decision::Deny(format!("authorization webhook {} failed", self.settings.name)),
        }
    }

    async fn decide(&self, attrs: &Attributes) -> Decision {
        let spec = self.spec(attrs);
        match self.matches(&spec) {
            Ok(true) => {}
            Ok(false) => return Decision::NoOpinion(String::new()),
            Err(e) => return self.on_failure(&format!("matchConditions: {e}")),
        }
        let key = spec.to_string();
        if let Some(cached) = self.cache.get(&key) {
            return cached;
        }
        let review = json!({"apiVersion": format!("authorization.k8s.io/{}", self.settings.version), "kind": "SubjectAccessReview", "spec": spec});
        let answer = match super::post_review(&self.client, &self.settings.config, &review, self.settings.timeout).await {
            Ok(answer) => answer,
            Err(e) => return self.on_failure(&e.to_string()),
        };
        let status = answer.get("status").unwrap_or(&Value::Null);
        let reason = status.get("reason").and_then(Value::as_str).unwrap_or_default().to_owned();
        if let Some(error) = status.get("evaluationError").and_then(Value::as_str).filter(|e| !e.is_empty()) {
            tracing::debug!(authorizer = %self.settings.name, "authorization webhook evaluation error: {error}");
        }
        let flag = |k: &str| status.get(k).and_then(Value::as_bool) == Some(true);
        let (decision, ttl) = if flag("allowed") {
            (Decision::Allow(reason), self.settings.authorized_ttl)
        } else if flag("denied") {
            (Decision::Deny(reason), self.settings.unauthorized_ttl)
        } else {
            (Decision::NoOpinion(reason), self.settings.unauthorized_ttl)
        };
        self.cache.put(key, decision.clone(), ttl);
        decision
    }
}

impl Authorizer for WebhookAuthorizer {
    /// For synchronous callers (CEL's authorizer library, escalation checks): the call made on
    /// this thread, which tokio's `block_in_place` frees of its other tasks meanwhile.
    fn authorize(&self, attrs: &Attributes) -> Decision {
        super::wait_in_place(self.decide(attrs)).unwrap_or_else(|| self.on_failure("the webhook authorizer needs the multi-threaded runtime"))
    }

    fn authorize_async<'a>(&'a self, attrs: &'a Attributes) -> kapi_auth::authn::Pending<'a, Decision> {
        Box::pin(self.decide(attrs))
    }
}
