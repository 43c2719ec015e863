//! kube-apiserver's webhook authentication and authorization: a TokenReview webhook decides
//! bearer tokens no built-in authenticator knows ([`token::WebhookTokenAuthenticator`]), and
//! SubjectAccessReview webhooks decide requests in the authorizer chain
//! ([`authorizer::WebhookAuthorizer`]), configured by the legacy flags or an
//! AuthorizationConfiguration file ([`authorization_config`]). Both cache answers for kube's
//! TTLs ([`cache::TtlCache`]) and retry a failed call with kube's backoff.

pub mod authorization_config;
pub mod authorizer;
pub mod cache;
pub mod token;

use std::time::Duration;

use kapi_webhook::{CallError, Client, ClientConfig};
use serde_json::Value;

/// Runs `work` to completion on this thread for a synchronous caller (CEL's authorizer library,
/// escalation checks), tokio's `block_in_place` handing the worker's other tasks to another
/// thread meanwhile; None outside a multi-threaded runtime, where that is impossible.
pub(crate) fn wait_in_place<T>(work: impl std::future::Future<Output = T>) -> Option<T> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            Some(tokio::task::block_in_place(|| handle.block_on(work)))
        }
        _ => None,
    }
}

/// kube's webhook retry backoff (`DefaultRequestRetryBackoff`: 500 ms, ×1.5, 5 steps), cut
/// short by the call's own timeout.
const RETRY_DELAYS: [Duration; 4] =
    [Duration::from_millis(500), Duration::from_millis(750), Duration::from_millis(1125), Duration::from_millis(1688)];

/// POSTs a review to the webhook, retrying transport failures and 5xx answers with kube's
/// backoff until `timeout` is spent.
pub(crate) async fn post_review(client: &Client, config: &ClientConfig, review: &Value, timeout: Duration) -> Result<Value, CallError> {
    let body = bytes::Bytes::from(serde_json::to_vec(review).unwrap_or_default());
    let deadline = tokio::time::Instant::now() + timeout;
    let mut attempt = 0;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let result = client.post_json(config, body.clone(), left.max(Duration::from_millis(1))).await;
        let retriable = match &result {
            Err(CallError::Status { code, .. }) => *code >= 500,
            Err(e) => !e.is_timeout(),
            Ok(_) => false,
        };
        match RETRY_DELAYS.get(attempt) {
            Some(delay) if retriable && tokio::time::Instant::now() + *delay < deadline => {
                tokio::time::sleep(*delay).await;
                attempt += 1;
            }
            _ => return result,
        }
    }
}
