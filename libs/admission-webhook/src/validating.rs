//! ValidatingAdmissionWebhook: every matching webhook is called at once; the request goes on
//! only if all allow it.

use std::sync::Arc;

use async_trait::async_trait;
use kapi_admission::{AdmissionObserver, AdmissionPlugin, Attributes, EquivalentResources, Operation, Outcome, WebhookRejection};
use kapi_apiextensions::cel::CelAuthorizer;
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use kapi_webhook::Client;

use crate::call::{self, CallFailure};
use crate::hooks::HookKind;
use crate::plugin::Webhooks;
use crate::matching::{self, Equivalents, Invocation};

/// kube's audit annotation prefix for a validating webhook that failed open.
const FAILED_OPEN_PREFIX: &str = "failed-open.validating.webhook.admission.k8s.io/";

/// The plugin.
pub struct ValidatingWebhooks {
    webhooks: Webhooks,
}

impl ValidatingWebhooks {
    /// The plugin over the configurations in `rest`'s watch cache, calling through `client`;
    /// match conditions check with `authorizer` (without one, `authorizer` checks fail);
    /// `equivalents` serves `matchPolicy: Equivalent` (without it, only exact matches call).
    pub fn new(
        rest: RestStore,
        client: Client,
        authorizer: Option<Arc<dyn CelAuthorizer>>,
        equivalents: Option<Arc<dyn EquivalentResources>>,
    ) -> Self {
        ValidatingWebhooks { webhooks: Webhooks::new(HookKind::Validating, rest, client, authorizer, equivalents) }
    }

    /// The plugin reporting each call to `observer` (kube's webhook metrics).
    pub fn with_observer(mut self, observer: Arc<dyn AdmissionObserver>) -> Self {
        self.webhooks.observer = Some(observer);
        self
    }
}

#[async_trait]
impl AdmissionPlugin for ValidatingWebhooks {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    fn handles(&self, operation: Operation) -> bool {
        self.webhooks.handles(operation)
    }

    async fn validate(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        if matching::exempt(attrs) {
            return Ok(());
        }
        let hooks = self.webhooks.source.hooks();
        let equivalents = Equivalents::new(self.webhooks.equivalents.as_deref());
        // The request in each version a webhook asked for (kube's versioned attributes).
        let mut versions: Vec<(Invocation, Attributes)> = Vec::new();
        let mut relevant = Vec::new();
        for hook in hooks.iter() {
            let Some(invocation) = matching::invocation(&self.webhooks.rest, hook, attrs, &equivalents)? else { continue };
            if invocation != Invocation::Exact && !versions.iter().any(|(i, _)| *i == invocation) {
                if let Some(versioned) = equivalents.versioned(attrs, &invocation).await? {
                    versions.push((invocation.clone(), versioned));
                }
            }
            let seen = versions.iter().find(|(i, _)| *i == invocation).map_or(attrs, |(_, v)| v);
            if matching::conditions_allow(hook, seen, attrs, self.webhooks.authorizer.as_ref())? {
                relevant.push((hook.clone(), invocation));
            }
        }
        if relevant.is_empty() {
            return Ok(());
        }
        // kube calls them in parallel: the request waits for the slowest, not for the sum. Each
        // version's review is serialized once.
        let exact = call::Reviews::new(attrs, attrs);
        let versioned: Vec<(Invocation, call::Reviews<'_>)> = versions.iter().map(|(i, v)| (i.clone(), call::Reviews::new(v, attrs))).collect();
        let reviews_for = |invocation: &Invocation| versioned.iter().find(|(i, _)| i == invocation).map_or(&exact, |(_, r)| r);
        let calls = relevant.iter().map(|(hook, invocation)| async {
            let started = std::time::Instant::now();
            let result = call::call(&self.webhooks.client, hook, reviews_for(invocation), false).await;
            (result, started.elapsed())
        });
        let results = futures_util::future::join_all(calls).await;
        let mut first_error = None;
        for (index, ((hook, _), (result, elapsed))) in relevant.iter().zip(results).enumerate() {
            let observe = |rejection| call::observe(self.webhooks.observer.as_ref(), hook, "validating", attrs, rejection, elapsed);
            let error = match result {
                Ok(answer) => {
                    call::record(hook, &answer, outcome);
                    if answer.allowed {
                        observe(None);
                        continue;
                    }
                    let e = call::denied(hook, answer.result.as_ref());
                    observe(Some((WebhookRejection::Denied, e.code)));
                    e
                }
                Err(CallFailure::Calling(reason)) if hook.ignore_failures => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing open: {reason}");
                    let _ = outcome.annotate(format!("{FAILED_OPEN_PREFIX}round_0_index_{index}"), hook.name.clone());
                    observe(None);
                    continue;
                }
                Err(CallFailure::Calling(reason)) => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing closed: {reason}");
                    let e = ApiError::internal(reason);
                    observe(Some((WebhookRejection::CallFailed, e.code)));
                    e
                }
                Err(CallFailure::Rejected(e)) => {
                    observe(Some((WebhookRejection::Internal, e.code)));
                    e
                }
            };
            first_error.get_or_insert(error);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
