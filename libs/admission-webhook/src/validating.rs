//! ValidatingAdmissionWebhook: every matching webhook is called at once; the request goes on
//! only if all allow it.

use std::sync::Arc;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apiextensions::cel::CelAuthorizer;
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use kapi_webhook::Client;

use crate::call::{self, CallFailure};
use crate::hooks::{HookKind, HookSource};
use crate::matching;

/// kube's audit annotation prefix for a validating webhook that failed open.
const FAILED_OPEN_PREFIX: &str = "failed-open.validating.webhook.admission.k8s.io/";

/// The plugin.
pub struct ValidatingWebhooks {
    source: HookSource,
    rest: RestStore,
    client: Client,
    authorizer: Option<Arc<dyn CelAuthorizer>>,
}

impl ValidatingWebhooks {
    /// The plugin over the configurations in `rest`'s watch cache, calling through `client`;
    /// match conditions check with `authorizer` (without one, `authorizer` checks fail).
    pub fn new(rest: RestStore, client: Client, authorizer: Option<Arc<dyn CelAuthorizer>>) -> Self {
        ValidatingWebhooks { source: HookSource::new(rest.clone(), HookKind::Validating), rest, client, authorizer }
    }
}

#[async_trait]
impl AdmissionPlugin for ValidatingWebhooks {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation != Operation::Connect && !self.source.hooks().is_empty()
    }

    async fn validate(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        if matching::exempt(attrs) {
            return Ok(());
        }
        let hooks = self.source.hooks();
        let mut relevant = Vec::new();
        for hook in hooks.iter() {
            if matching::should_call(&self.rest, hook, attrs, self.authorizer.as_ref())? {
                relevant.push(hook.clone());
            }
        }
        if relevant.is_empty() {
            return Ok(());
        }
        // kube calls them in parallel: the request waits for the slowest, not for the sum.
        let reviews = call::Reviews::new(attrs);
        let calls = relevant.iter().map(|hook| call::call(&self.client, hook, &reviews, false));
        let results = futures_util::future::join_all(calls).await;
        let mut first_error = None;
        for (index, (hook, result)) in relevant.iter().zip(results).enumerate() {
            let error = match result {
                Ok(answer) => {
                    call::record(hook, &answer, outcome);
                    if answer.allowed {
                        continue;
                    }
                    call::denied(hook, answer.result.as_ref())
                }
                Err(CallFailure::Calling(reason)) if hook.ignore_failures => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing open: {reason}");
                    let _ = outcome.annotate(format!("{FAILED_OPEN_PREFIX}round_0_index_{index}"), hook.name.clone());
                    continue;
                }
                Err(CallFailure::Calling(reason)) => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing closed: {reason}");
                    ApiError::internal(reason)
                }
                Err(CallFailure::Rejected(e)) => e,
            };
            first_error.get_or_insert(error);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
