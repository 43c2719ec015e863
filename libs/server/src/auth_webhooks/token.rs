//! Webhook token authentication (`--authentication-token-webhook-config-file`): a bearer token
//! no built-in authenticator knows is sent to the webhook as a TokenReview, and the webhook's
//! answer is cached for `--authentication-token-webhook-cache-ttl`, successes and refusals
//! alike (a failed call is not cached: the next request asks again).

use std::time::Duration;

use kapi_auth::{TokenAuthenticator, TokenOutcome, UserInfo};
use kapi_webhook::{Client, ClientConfig};
use serde_json::{json, Value};

use super::cache::TtlCache;

/// The `--authentication-token-webhook-*` flags, read.
#[derive(Debug, Clone)]
pub struct TokenWebhookOptions {
    /// The webhook, from its kubeconfig.
    pub config: ClientConfig,
    /// `--authentication-token-webhook-version`: `v1` or kube's default `v1beta1`.
    pub version: String,
    /// `--authentication-token-webhook-cache-ttl` (kube's 2m).
    pub cache_ttl: Duration,
}

impl TokenWebhookOptions {
    /// The options from the three flags, with kube's checks.
    pub fn from_flags(config_file: &std::path::Path, version: &str, cache_ttl: Duration) -> Result<Self, String> {
        if !matches!(version, "v1" | "v1beta1") {
            return Err(format!(
                "--authentication-token-webhook-version: unsupported version {version:?}, supported versions are \"v1\", \"v1beta1\""
            ));
        }
        let config = ClientConfig::from_kubeconfig(config_file).map_err(|e| format!("--authentication-token-webhook-config-file: {e}"))?;
        Ok(TokenWebhookOptions { config, version: version.to_owned(), cache_ttl })
    }
}

/// kube's webhook call timeout for token reviews.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The authenticator.
pub struct WebhookTokenAuthenticator {
    client: Client,
    options: TokenWebhookOptions,
    /// The API audiences: a review that names none is valid for these.
    implicit_audiences: Vec<String>,
    cache: TtlCache<TokenOutcome>,
}

impl WebhookTokenAuthenticator {
    /// The authenticator calling `options.config` through `client`.
    pub fn new(client: Client, options: TokenWebhookOptions, implicit_audiences: Vec<String>) -> Self {
        WebhookTokenAuthenticator { client, options, implicit_audiences, cache: TtlCache::default() }
    }

    fn cache_key(token: &str, audiences: &[String]) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}/{}", audiences.join(","))
    }

    async fn review(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        let key = Self::cache_key(token, audiences);
        if let Some(cached) = self.cache.get(&key) {
            return cached;
        }
        let mut spec = json!({"token": token});
        if !audiences.is_empty() {
            spec["audiences"] = json!(audiences);
        }
        let review = json!({"apiVersion": format!("authentication.k8s.io/{}", self.options.version), "kind": "TokenReview", "spec": spec});
        let answer = match super::post_review(&self.client, &self.options.config, &review, TIMEOUT).await {
            Ok(answer) => answer,
            // Not cached: the webhook may be back for the next request.
            Err(e) => return TokenOutcome::Rejected(format!("Post webhook token authenticator: {e}")),
        };
        let outcome = self.outcome(answer.get("status").unwrap_or(&Value::Null), audiences);
        self.cache.put(key, outcome.clone(), self.options.cache_ttl);
        outcome
    }

    /// The review's status as kube's webhook authenticator reads it.
    fn outcome(&self, status: &Value, wanted: &[String]) -> TokenOutcome {
        if status.get("authenticated").and_then(Value::as_bool) != Some(true) {
            return match status.get("error").and_then(Value::as_str).filter(|e| !e.is_empty()) {
                Some(error) => TokenOutcome::Rejected(error.to_owned()),
                None => TokenOutcome::NotApplicable,
            };
        }
        let answered: Vec<String> = status
            .get("audiences")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let audiences = if wanted.is_empty() {
            Vec::new()
        } else {
            let valid_for = if answered.is_empty() { &self.implicit_audiences } else { &answered };
            let both = kapi_auth::token::intersect_audiences(valid_for, wanted);
            if both.is_empty() {
                return TokenOutcome::NotApplicable;
            }
            both
        };
        let user = status.get("user").unwrap_or(&Value::Null);
        let text = |k: &str| user.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let groups =
            user.get("groups").and_then(Value::as_array).map(|g| g.iter().filter_map(Value::as_str).map(str::to_owned).collect()).unwrap_or_default();
        let extra = user
            .get("extra")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        (k.clone(), v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect()).unwrap_or_default())
                    })
                    .collect()
            })
            .unwrap_or_default();
        TokenOutcome::Authenticated { user: UserInfo { name: text("username"), uid: text("uid"), groups, extra }, audiences }
    }
}

impl TokenAuthenticator for WebhookTokenAuthenticator {
    /// For synchronous callers: the cached answer, or the call made on this thread (tokio's
    /// `block_in_place` hands the worker's other tasks to another thread meanwhile).
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        if let Some(cached) = self.cache.get(&Self::cache_key(token, audiences)) {
            return cached;
        }
        super::wait_in_place(self.review(token, audiences))
            .unwrap_or_else(|| TokenOutcome::Rejected("webhook token authentication needs the multi-threaded runtime".into()))
    }

    fn authenticate_token_async<'a>(&'a self, token: &'a str, audiences: &'a [String]) -> kapi_auth::authn::Pending<'a, TokenOutcome> {
        Box::pin(self.review(token, audiences))
    }
}
