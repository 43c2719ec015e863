//! The bound service-account token authenticator: kube's `JWTTokenAuthenticator` with its
//! bound-token validator (`pkg/serviceaccount/jwt.go`, `claims.go`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::claims::ServiceAccountClaims;
use crate::user::{service_account_groups, service_account_user};
use super::jws;
use super::keys::VerificationKey;
use crate::token::{aggregate, go_quoted_list, intersect_audiences, TokenAuthenticator, TokenOutcome};
use crate::user::UserInfo;

/// Clock skew tolerated on `exp`, `nbf` and `iat`, and how long after its deletion began a
/// bound object still counts as present: go-jose's `DefaultLeeway`, which kube's validator uses.
pub const LEEWAY_SECONDS: i64 = 60;

/// Extra key: the pod a token is bound to.
pub const POD_NAME_KEY: &str = "authentication.kubernetes.io/pod-name";
/// Extra key: that pod's UID.
pub const POD_UID_KEY: &str = "authentication.kubernetes.io/pod-uid";
/// Extra key: the node the token is bound to, or its pod runs on.
pub const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
/// Extra key: that node's UID.
pub const NODE_UID_KEY: &str = "authentication.kubernetes.io/node-uid";
/// Extra key: `JTI=<jti>`, which ties audit events to the issuing TokenRequest.
pub const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

/// What the validator needs to know about an object a token names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectState {
    /// `metadata.uid`; a different UID means the object was deleted and recreated.
    pub uid: String,
    /// `metadata.deletionTimestamp`, seconds since the epoch, when deletion has begun.
    pub deleting_since: Option<i64>,
}

/// The server's view of the objects tokens are bound to; `None` when the object does not
/// exist. Implementations read an in-memory cache: this runs on every request.
pub trait BoundObjects: Send + Sync {
    /// The service account `namespace/name`.
    fn service_account(&self, namespace: &str, name: &str) -> Option<ObjectState>;
    /// The pod `namespace/name`.
    fn pod(&self, namespace: &str, name: &str) -> Option<ObjectState>;
    /// The secret `namespace/name`.
    fn secret(&self, namespace: &str, name: &str) -> Option<ObjectState>;
    /// The node `name`.
    fn node(&self, name: &str) -> Option<ObjectState>;
}

/// Authenticates kube's bound service-account tokens (TokenRequest, projected volumes).
///
/// A token whose unverified `iss` is not one of ours is not applicable, so that other token
/// authenticators (OIDC) can try it; any later failure is a rejection whose reason goes to the
/// log. Checks, in kube's order: signature (by `kid` when the token names one, else every key),
/// issuer, audiences, time (with [`LEEWAY_SECONDS`]), then that the service account and the
/// bound pod, secret or node still exist with the same UID and are not being deleted for longer
/// than the leeway.
///
/// Legacy secret-based tokens (issuer `kubernetes/serviceaccount`, no expiry, checked against
/// the token Secret) are not supported: kube stopped creating them in 1.24. Unless that issuer
/// is configured they are simply not applicable here.
pub struct ServiceAccountTokenAuthenticator {
    issuers: Vec<String>,
    keys: Vec<VerificationKey>,
    implicit_audiences: Vec<String>,
    objects: Arc<dyn BoundObjects>,
}

impl std::fmt::Debug for ServiceAccountTokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokenAuthenticator")
            .field("issuers", &self.issuers)
            .field("keys", &self.keys.iter().map(VerificationKey::kid).collect::<Vec<_>>())
            .field("implicit_audiences", &self.implicit_audiences)
            .finish_non_exhaustive()
    }
}

fn seconds_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Whether an object whose deletion began at `deleting_since` counts as deleted at `now`.
fn deleted(state: &ObjectState, now: i64) -> bool {
    state.deleting_since.is_some_and(|t| t < now - LEEWAY_SECONDS)
}

impl ServiceAccountTokenAuthenticator {
    /// Accepts tokens from any of `issuers` (every `--service-account-issuer`) signed by any of
    /// `keys` (every `--service-account-key-file` key, plus the signing key's public half).
    /// `implicit_audiences` are the API audiences: the audiences requested when the caller
    /// names none, and those assumed for a token without `aud`.
    pub fn new(
        issuers: Vec<String>,
        keys: Vec<VerificationKey>,
        implicit_audiences: Vec<String>,
        objects: Arc<dyn BoundObjects>,
    ) -> Self {
        ServiceAccountTokenAuthenticator { issuers, keys, implicit_audiences, objects }
    }

    /// The verification keys, e.g. for the JWKS.
    pub fn keys(&self) -> &[VerificationKey] {
        &self.keys
    }

    /// [`TokenAuthenticator::authenticate_token`] at a given time (seconds since the epoch).
    pub fn authenticate_at(&self, token: &str, audiences: &[String], now: i64) -> TokenOutcome {
        if !jws::unverified_issuer(token).is_some_and(|iss| self.issuers.contains(&iss)) {
            return TokenOutcome::NotApplicable;
        }
        let Some(jws) = jws::parse(token) else {
            return TokenOutcome::NotApplicable;
        };
        match self.verify(&jws, audiences, now) {
            Ok((user, audiences)) => TokenOutcome::Authenticated { user, audiences },
            Err(reason) => TokenOutcome::Rejected(reason),
        }
    }

    fn verify(&self, jws: &jws::Jws<'_>, requested: &[String], now: i64) -> Result<(UserInfo, Vec<String>), String> {
        let candidates: Vec<&VerificationKey> =
            self.keys.iter().filter(|k| jws.kid.is_empty() || k.kid() == jws.kid).collect();
        if candidates.is_empty() {
            return Err("invalid signature, no keys found".into());
        }
        let mut errors = Vec::new();
        let mut claims = None;
        for key in candidates {
            match key.verify(&jws.alg, jws.signing_input.as_bytes(), &jws.signature) {
                Ok(()) => {
                    claims =
                        Some(serde_json::from_slice::<ServiceAccountClaims>(&jws.payload).map_err(|e| e.to_string()));
                    break;
                }
                Err(e) => errors.push(e),
            }
        }
        let claims = match claims {
            Some(parsed) => parsed?,
            None => return Err(aggregate(errors).unwrap_or_default()),
        };
        if !self.issuers.contains(&claims.iss) {
            return Err(format!("token issuer {:?} is invalid", claims.iss));
        }
        // A token without audiences is only valid for the API audiences.
        let token_audiences = if claims.aud.is_empty() { self.implicit_audiences.clone() } else { claims.aud.clone() };
        let requested = if requested.is_empty() { self.implicit_audiences.as_slice() } else { requested };
        let accepted = intersect_audiences(&token_audiences, requested);
        if accepted.is_empty() && !self.implicit_audiences.is_empty() {
            return Err(format!(
                "token audiences {} is invalid for the target audiences {}",
                go_quoted_list(&token_audiences),
                go_quoted_list(requested)
            ));
        }
        let user = self.validate(&claims, now)?;
        Ok((user, accepted))
    }

    /// kube's bound-token validator: time, then the objects the token names.
    fn validate(&self, claims: &ServiceAccountClaims, now: i64) -> Result<UserInfo, String> {
        if claims.nbf.is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
            return Err("service account token is not valid yet".into());
        }
        if claims.exp.is_some_and(|exp| now - LEEWAY_SECONDS > exp) {
            return Err("service account token has expired".into());
        }
        if claims.iat.is_some_and(|iat| now + LEEWAY_SECONDS < iat) {
            return Err("service account token is issued in the future".into());
        }

        let k8s = &claims.kubernetes;
        let namespace = k8s.namespace.as_str();
        let sa = &k8s.serviceaccount;
        let invalidated = || "service account token has been invalidated".to_owned();

        let Some(account) = self.objects.service_account(namespace, &sa.name) else {
            return Err(format!("serviceaccounts {:?} not found", sa.name));
        };
        if account.uid != sa.uid {
            return Err(format!("service account UID ({}) does not match claim ({})", account.uid, sa.uid));
        }
        if deleted(&account, now) {
            return Err(format!("service account {namespace}/{} has been deleted", sa.name));
        }

        if let Some(secret_ref) = &k8s.secret {
            let secret = self.objects.secret(namespace, &secret_ref.name).ok_or_else(invalidated)?;
            if secret.uid != secret_ref.uid {
                return Err(format!(
                    "secret UID ({}) does not match service account secret ref claim ({})",
                    secret.uid, secret_ref.uid
                ));
            }
            if deleted(&secret, now) {
                return Err(invalidated());
            }
        }

        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        if let Some(pod_ref) = &k8s.pod {
            let pod = self.objects.pod(namespace, &pod_ref.name).ok_or_else(invalidated)?;
            if pod.uid != pod_ref.uid {
                return Err(format!(
                    "pod UID ({}) does not match service account pod ref claim ({})",
                    pod.uid, pod_ref.uid
                ));
            }
            if deleted(&pod, now) {
                return Err(invalidated());
            }
            if !pod_ref.name.is_empty() && !pod_ref.uid.is_empty() {
                extra.insert(POD_NAME_KEY.into(), vec![pod_ref.name.clone()]);
                extra.insert(POD_UID_KEY.into(), vec![pod_ref.uid.clone()]);
            }
        }

        if let Some(node_ref) = &k8s.node {
            // A pod-bound token only reports its pod's node; a node-bound token dies with it.
            if k8s.pod.is_none() {
                let node = self.objects.node(&node_ref.name).ok_or_else(invalidated)?;
                if node.uid != node_ref.uid {
                    return Err(format!(
                        "node UID ({}) does not match service account node ref claim ({})",
                        node.uid, node_ref.uid
                    ));
                }
                if deleted(&node, now) {
                    return Err(invalidated());
                }
            }
            if !node_ref.name.is_empty() {
                extra.insert(NODE_NAME_KEY.into(), vec![node_ref.name.clone()]);
                if !node_ref.uid.is_empty() {
                    extra.insert(NODE_UID_KEY.into(), vec![node_ref.uid.clone()]);
                }
            }
        }

        if !claims.jti.is_empty() {
            extra.insert(CREDENTIAL_ID_KEY.into(), vec![format!("JTI={}", claims.jti)]);
        }
        Ok(UserInfo {
            name: service_account_user(namespace, &sa.name),
            uid: sa.uid.clone(),
            groups: service_account_groups(namespace),
            extra,
        })
    }
}

impl TokenAuthenticator for ServiceAccountTokenAuthenticator {
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        self.authenticate_at(token, audiences, seconds_now())
    }
}
