//! Calling one webhook: the dry-run rules, the AdmissionReview round trip and kube's error
//! classes (a failed call, which the failurePolicy may ignore, or a refusal, which it may not).

use bytes::Bytes;
use kapi_admission::Attributes;
use kapi_apimachinery::{ApiError, StatusReason};
use kapi_webhook::Client;
use serde_json::Value;

use crate::hooks::Hook;
use crate::review::{self, Answer};

/// Why a call gave no usable answer.
pub enum CallFailure {
    /// kube's ErrCallingWebhook: the webhook could not be reached, answered late or answered
    /// nonsense. `failurePolicy: Ignore` lets the request through; Fail refuses it with 500.
    Calling(String),
    /// A refusal that no failurePolicy changes (a webhook that does not support dry run).
    Rejected(ApiError),
}

impl CallFailure {
    fn calling(hook: &Hook, reason: impl std::fmt::Display) -> CallFailure {
        CallFailure::Calling(format!("failed calling webhook {:?}: {reason}", hook.name))
    }
}

/// The uid written where each call's own goes: reviews are serialized once per request and
/// version, and only the uid differs between the webhooks called with them.
const UID_PLACEHOLDER: &str = "00000000-0000-0000-0000-000000000000";

/// The serialized AdmissionReviews of one request, made on first use per review version and
/// shared by every webhook called with the same object (validating webhooks, in parallel).
pub struct Reviews<'a> {
    attrs: &'a Attributes,
    requested: &'a Attributes,
    rendered: [std::sync::OnceLock<Result<(String, usize), String>>; 2],
}

impl<'a> Reviews<'a> {
    /// The reviews of `attrs`, the request `requested` as seen in the version a webhook's
    /// rules name (the same attributes unless it matched an equivalent resource).
    pub fn new(attrs: &'a Attributes, requested: &'a Attributes) -> Self {
        Reviews { attrs, requested, rendered: Default::default() }
    }

    /// The body of a call in `version` with request uid `uid`.
    fn body(&self, version: &'static str, uid: &str) -> Result<Bytes, String> {
        let slot = usize::from(version != "v1");
        let rendered = self.rendered[slot].get_or_init(|| {
            let text = serde_json::to_string(&review::request(version, UID_PLACEHOLDER, self.attrs, self.requested)).map_err(|e| e.to_string())?;
            // `uid` is the request's first field: its first occurrence is the request's.
            let at = text.find(UID_PLACEHOLDER).ok_or("the review has no uid")?;
            Ok((text, at))
        });
        let (text, at) = rendered.as_ref().map_err(Clone::clone)?;
        let mut body = String::with_capacity(text.len());
        body.push_str(&text[..*at]);
        body.push_str(uid);
        body.push_str(&text[at + UID_PLACEHOLDER.len()..]);
        Ok(Bytes::from(body))
    }
}

/// Calls `hook` with the review of `attrs` and checks its answer.
pub async fn call(client: &Client, hook: &Hook, reviews: &Reviews<'_>, mutating: bool) -> Result<Answer, CallFailure> {
    let attrs = reviews.attrs;
    if attrs.dry_run {
        match hook.side_effects.as_deref() {
            None => return Err(CallFailure::calling(hook, "Webhook SideEffects is nil")),
            Some("None" | "NoneOnDryRun") => {}
            Some(_) => return Err(CallFailure::Rejected(ApiError::bad_request(format!("admission webhook {:?} does not support dry run", hook.name)))),
        }
    }
    let Some(version) = review::version_for(&hook.review_versions) else {
        return Err(CallFailure::calling(
            hook,
            format!("could not create admission objects: webhook does not accept known AdmissionReview versions {:?}", hook.review_versions),
        ));
    };
    let config = hook.client.as_ref().map_err(|e| CallFailure::calling(hook, format!("could not get REST client: {e}")))?;
    let uid = uuid::Uuid::new_v4().to_string();
    let body = reviews.body(version, &uid).map_err(|e| CallFailure::calling(hook, format!("could not create admission objects: {e}")))?;
    // kube's span of one webhook call; the call's `traceparent` names it.
    let span = if mutating { "Call mutating webhook" } else { "Call validating webhook" };
    let answer = kapi_otel::traced(span, || call_attributes(hook, attrs, &uid), client.post_json(config, body, hook.timeout))
        .await
        .map_err(|e| CallFailure::calling(hook, format!("failed to call webhook: {e}")))?;
    review::verify(version, &uid, mutating, &answer).map_err(|e| CallFailure::calling(hook, format!("received invalid webhook response: {e}")))
}

/// The attributes kube gives a webhook call's span.
fn call_attributes(hook: &Hook, attrs: &Attributes, uid: &str) -> Vec<kapi_otel::KeyValue> {
    use kapi_otel::KeyValue;
    let resource = &attrs.resource;
    vec![
        KeyValue::new("configuration", hook.configuration.clone()),
        KeyValue::new("webhook", hook.name.clone()),
        KeyValue::new("resource", format!("{}/{}, Resource={}", resource.group, resource.version, resource.name)),
        KeyValue::new("subresource", attrs.subresource.clone()),
        KeyValue::new("operation", attrs.operation.as_str()),
        KeyValue::new("UID", uid.to_owned()),
    ]
}

/// kube's `ToStatusErr`: a webhook's refusal, with its status code (at least 400), reason and
/// message after `admission webhook "<name>" denied the request`.
pub fn denied(hook: &Hook, result: Option<&Value>) -> ApiError {
    let mut err = result.map(ApiError::from_status).unwrap_or_else(|| ApiError::new(0, StatusReason::Unknown, ""));
    if err.code < 400 {
        err.code = 400;
    }
    let denied_by = format!("admission webhook {:?} denied the request", hook.name);
    let reason = result.and_then(|r| r.get("reason")).and_then(Value::as_str).unwrap_or_default();
    err.message = if !err.message.is_empty() {
        format!("{denied_by}: {}", err.message)
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    err
}

/// Reports one call to the server's metrics, if it observes (kube's webhook duration and
/// rejection series); `rejection` is why and with which code the call refused the request.
pub fn observe(
    observer: Option<&std::sync::Arc<dyn kapi_admission::AdmissionObserver>>,
    hook: &Hook,
    kind: &'static str,
    attrs: &Attributes,
    rejection: Option<(kapi_admission::WebhookRejection, u16)>,
    elapsed: std::time::Duration,
) {
    if let Some(observer) = observer {
        observer.webhook(&hook.name, kind, attrs.operation, rejection, elapsed);
    }
}

/// kube adds a webhook's audit annotations under `<webhook name>/<key>`; its warnings go to the
/// client.
pub fn record(hook: &Hook, answer: &Answer, outcome: &mut kapi_admission::Outcome) {
    for (key, value) in &answer.audit_annotations {
        if let Err(e) = outcome.annotate(format!("{}/{key}", hook.name), value.clone()) {
            tracing::warn!(webhook = %hook.name, "{e}");
        }
    }
    for warning in &answer.warnings {
        outcome.warn(warning.clone());
    }
}
