//! Service-account tokens on the server side: the bound objects tokens are checked against (read
//! from the watch caches), TokenRequest (`serviceaccounts/<name>/token`), TokenReview and the
//! OIDC discovery documents.

use std::sync::Arc;

use kapi_apimachinery::{ApiError, Cause, GroupResource};
use kapi_auth::serviceaccount::{BoundObject, BoundObjects, IssueRequest, ObjectRef, ObjectState, OpenIdMetadata, TokenIssuer};
use kapi_auth::token::TokenOutcome;
use kapi_auth::TokenAuthenticator;
use kapi_registry::catalog;
use kapi_registry::rest::{object_key, RestStore};
use kapi_registry::strategy::CatalogStrategy;
use kapi_watch::CacheSet;
use serde_json::{json, Value};

/// kube's default and bounds of `spec.expirationSeconds`.
const DEFAULT_EXPIRATION: i64 = 3600;
const MIN_EXPIRATION: i64 = 600;
const MAX_EXPIRATION: i64 = 1 << 32;

/// Bound objects as the watch caches hold them: every token check is a few hash lookups.
pub struct CachedObjects {
    caches: Arc<CacheSet>,
}

impl CachedObjects {
    /// Reads from `caches`.
    pub fn new(caches: Arc<CacheSet>) -> Self {
        CachedObjects { caches }
    }

    fn state(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<ObjectState> {
        let spec = catalog::find("", "v1", resource)?;
        let cached = self.caches.cache(&spec.key_prefix())?.get(&object_key(spec, namespace, name))?;
        Some(object_state(&cached.object))
    }
}

fn object_state(obj: &Value) -> ObjectState {
    let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_owned();
    let deleting_since = obj
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(kapi_apimachinery::time::parse_rfc3339)
        .map(|t| t.unix_timestamp());
    ObjectState { uid, deleting_since }
}

impl BoundObjects for CachedObjects {
    fn service_account(&self, namespace: &str, name: &str) -> Option<ObjectState> {
        self.state("serviceaccounts", Some(namespace), name)
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<ObjectState> {
        self.state("pods", Some(namespace), name)
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<ObjectState> {
        self.state("secrets", Some(namespace), name)
    }

    fn node(&self, name: &str) -> Option<ObjectState> {
        self.state("nodes", None, name)
    }
}

/// What the server needs to issue and review tokens.
pub struct ServiceAccounts {
    /// Signs tokens for the first `--service-account-issuer`.
    pub issuer: TokenIssuer,
    /// `--api-audiences` (the issuers when not given).
    pub api_audiences: Vec<String>,
    /// Every token authenticator (token file, service accounts), for TokenReview.
    pub tokens: Arc<dyn TokenAuthenticator>,
    /// The discovery documents; `None` when the issuer is not an https URL (kube serves none).
    pub metadata: Option<OpenIdMetadata>,
    /// `--service-account-max-token-expiration` in seconds (0: kube's 2^32 bound only).
    pub max_expiration: i64,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn invalid(name: &str, field: &str, value: &Value, detail: &str) -> ApiError {
    ApiError::invalid("authentication.k8s.io", "TokenRequest", name, vec![Cause::invalid(field, value, detail)])
}

async fn get(rest: &RestStore, resource: &str, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
    let spec = catalog::find("", "v1", resource).ok_or_else(|| ApiError::internal(format!("{resource} missing from the catalog")))?;
    rest.get(&CatalogStrategy(spec), ns, name).await
}

fn object_ref(obj: &Value) -> ObjectRef {
    ObjectRef::new(str_at(obj, "/metadata/name"), str_at(obj, "/metadata/uid"))
}

impl ServiceAccounts {
    /// `POST .../serviceaccounts/<name>/token`: a TokenRequest answered with a signed token.
    pub async fn token_request(&self, rest: &RestStore, namespace: &str, name: &str, mut request: Value) -> Result<Value, ApiError> {
        let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
        let expiration = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => DEFAULT_EXPIRATION,
            Some(v) => v.as_i64().ok_or_else(|| invalid(name, "spec.expirationSeconds", v, "must be an integer"))?,
        };
        if expiration < MIN_EXPIRATION {
            return Err(invalid(name, "spec.expirationSeconds", &json!(expiration), "may not specify a duration less than 10 minutes"));
        }
        if expiration > MAX_EXPIRATION {
            return Err(invalid(name, "spec.expirationSeconds", &json!(expiration), "may not specify a duration larger than 2^32 seconds"));
        }
        let expiration = if self.max_expiration > 0 { expiration.min(self.max_expiration) } else { expiration };
        let sa = get(rest, "serviceaccounts", Some(namespace), name).await?;
        let bound = match spec.get("boundObjectRef").filter(|v| !v.is_null()) {
            None => BoundObject::None,
            Some(r) => self.bound_object(rest, namespace, name, r).await?,
        };
        let audiences: Vec<String> = match spec.get("audiences").and_then(Value::as_array) {
            Some(a) if !a.is_empty() => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            _ => self.api_audiences.clone(),
        };
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let issued = self
            .issuer
            .issue(&IssueRequest {
                namespace: namespace.to_owned(),
                service_account: object_ref(&sa),
                bound_object: bound,
                audiences: audiences.clone(),
                expiration_seconds: expiration,
                warn_after_seconds: None,
                now,
            })
            .map_err(|e| ApiError::internal(format!("failed to generate token: {e}")))?;
        let expires = time::OffsetDateTime::from_unix_timestamp(issued.expires_at)
            .map(kapi_apimachinery::time::format_rfc3339)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        request["apiVersion"] = json!("authentication.k8s.io/v1");
        request["kind"] = json!("TokenRequest");
        request["metadata"] = json!({"name": name, "namespace": namespace, "creationTimestamp": kapi_apimachinery::time::now_rfc3339()});
        request["spec"]["audiences"] = json!(audiences);
        request["spec"]["expirationSeconds"] = json!(expiration);
        request["status"] = json!({"token": issued.token, "expirationTimestamp": expires});
        Ok(request)
    }

    /// Resolves `spec.boundObjectRef`, as kube's token REST does: the object must exist, with
    /// the given UID when one is given.
    async fn bound_object(&self, rest: &RestStore, namespace: &str, name: &str, r: &Value) -> Result<BoundObject, ApiError> {
        let kind = str_at(r, "/kind");
        let api_version = str_at(r, "/apiVersion");
        let target = str_at(r, "/name");
        let resource = match (api_version, kind) {
            ("v1" | "", "Pod") => "pods",
            ("v1" | "", "Secret") => "secrets",
            ("v1" | "", "Node") => "nodes",
            _ => {
                return Err(invalid(
                    name,
                    "spec.boundObjectRef.kind",
                    &json!(kind),
                    "supported values: \"Pod\", \"Secret\", \"Node\"",
                ))
            }
        };
        let ns = (resource != "nodes").then_some(namespace);
        let obj = get(rest, resource, ns, target).await?;
        let uid = str_at(&obj, "/metadata/uid");
        let want = str_at(r, "/uid");
        if !want.is_empty() && want != uid {
            return Err(ApiError::conflict(
                &GroupResource::new("", resource),
                target,
                &format!(
                    "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            ));
        }
        Ok(match resource {
            "pods" => {
                let node_name = str_at(&obj, "/spec/nodeName");
                let node = if node_name.is_empty() {
                    None
                } else {
                    Some(match get(rest, "nodes", None, node_name).await {
                        Ok(n) => object_ref(&n),
                        Err(_) => ObjectRef::new(node_name, ""),
                    })
                };
                BoundObject::Pod { pod: object_ref(&obj), node }
            }
            "secrets" => BoundObject::Secret(object_ref(&obj)),
            _ => BoundObject::Node(object_ref(&obj)),
        })
    }

    /// TokenReview's status for `spec.token` and `spec.audiences`.
    pub async fn token_review(&self, review: &Value) -> Value {
        let token = str_at(review, "/spec/token");
        let audiences: Vec<String> = review
            .pointer("/spec/audiences")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let wanted = if audiences.is_empty() { self.api_audiences.clone() } else { audiences };
        match self.tokens.authenticate_token_async(token, &wanted).await {
            TokenOutcome::Authenticated { user, audiences } => {
                let user = kapi_auth::authn::add_authenticated_group(user);
                json!({"authenticated": true, "user": crate::handlers::reviews::user_info_json(&user), "audiences": audiences})
            }
            TokenOutcome::NotApplicable => json!({"user": {}}),
            TokenOutcome::Rejected(reason) => json!({"user": {}, "error": reason}),
        }
    }
}
