//! kube's bound service-account token claims (`pkg/serviceaccount/claims.go`) and the issuer
//! that signs them (the TokenRequest subresource and the kubelet's projected tokens).

use ring::rand::{SecureRandom as _, SystemRandom};
use serde::{Deserialize, Deserializer, Serialize};

use super::jws;
use super::keys::{KeyError, SigningKey};

/// A reference to an object by name and UID, as tokens record them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// `metadata.name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `metadata.uid`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectRef {
    /// A reference to `name` with `uid`.
    pub fn new(name: impl Into<String>, uid: impl Into<String>) -> Self {
        ObjectRef { name: name.into(), uid: uid.into() }
    }
}

/// The object a token is bound to: the token dies with it. kube binds to one object kind; a
/// pod-bound token also records the pod's node (for the extra `node-name`/`node-uid`) without
/// being bound to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum BoundObject {
    /// Only bound to the service account.
    #[default]
    None,
    /// Bound to a pod (the kubelet's projected tokens), with the pod's node if known.
    Pod {
        /// The pod.
        pod: ObjectRef,
        /// The node the pod is scheduled to.
        node: Option<ObjectRef>,
    },
    /// Bound to a secret.
    Secret(ObjectRef),
    /// Bound to a node.
    Node(ObjectRef),
}

/// The private `kubernetes.io` claim. Fields are in alphabetical order because go-jose emits
/// claims as sorted maps; tokens then look byte-for-byte like kube's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The service account's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The node (node-bound tokens, or the node of a pod-bound token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectRef>,
    /// The pod a token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The secret a token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    /// The service account.
    #[serde(default)]
    pub serviceaccount: ObjectRef,
    /// When a token issued with an extended lifetime should have been refreshed (seconds since
    /// the epoch); only used for the stale-token audit annotation.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "numeric_date")]
    pub warnafter: Option<i64>,
}

/// All claims of a bound service-account token, registered and private, in go-jose's
/// (alphabetical) order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceAccountClaims {
    /// Audiences (a single string is accepted when reading, as go-jose does).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "audience")]
    pub aud: Vec<String>,
    /// Expiry, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "numeric_date")]
    pub exp: Option<i64>,
    /// Issued at.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "numeric_date")]
    pub iat: Option<i64>,
    /// Issuer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iss: String,
    /// Token id (a random UUID).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jti: String,
    /// kube's private claims.
    #[serde(rename = "kubernetes.io", default)]
    pub kubernetes: KubernetesClaims,
    /// Not before.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "numeric_date")]
    pub nbf: Option<i64>,
    /// `system:serviceaccount:<namespace>:<name>`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub: String,
}

/// go-jose's `NumericDate`: a JSON number, fractions truncated; `null` is absent.
fn numeric_date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let value = Option::<f64>::deserialize(d)?;
    Ok(value.map(|v| v as i64))
}

/// go-jose's `Audience`: a string or a list of strings.
fn audience<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::One(s)) => vec![s],
        Some(OneOrMany::Many(v)) => v,
    })
}

/// What a token is requested for (the TokenRequest spec, resolved by the server).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IssueRequest {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account.
    pub service_account: ObjectRef,
    /// What the token dies with.
    pub bound_object: BoundObject,
    /// `aud`; the server defaults it to the API audiences.
    pub audiences: Vec<String>,
    /// Lifetime in seconds.
    pub expiration_seconds: i64,
    /// kube's `warnafter` for tokens whose lifetime the server extended: seconds from now.
    pub warn_after_seconds: Option<i64>,
    /// Issue time, seconds since the epoch.
    pub now: i64,
}

/// A signed token and what the TokenRequest response and audit log need about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedToken {
    /// The compact JWS.
    pub token: String,
    /// `status.expirationTimestamp`, seconds since the epoch.
    pub expires_at: i64,
    /// The token id.
    pub jti: String,
    /// `JTI=<jti>`: the `authentication.kubernetes.io/issued-credential-id` audit annotation
    /// and the credential id requests made with the token carry.
    pub credential_id: String,
}

/// Why a token could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// Signing failed.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The claims could not be serialized.
    #[error("encoding claims: {0}")]
    Encode(#[from] serde_json::Error),
    /// The random token id could not be generated.
    #[error("generating token id: {0}")]
    Random(String),
}

/// Signs bound service-account tokens for the first `--service-account-issuer`.
#[derive(Debug)]
pub struct TokenIssuer {
    issuer: String,
    key: SigningKey,
}

/// A random version-4 UUID, the form of kube's `jti`.
fn uuid_v4() -> Result<String, IssueError> {
    let mut b = [0u8; 16];
    SystemRandom::new().fill(&mut b).map_err(|e| IssueError::Random(e.to_string()))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]))
}

impl TokenIssuer {
    /// Issues as `issuer` (the first `--service-account-issuer`), signing with `key`.
    pub fn new(issuer: impl Into<String>, key: SigningKey) -> Self {
        TokenIssuer { issuer: issuer.into(), key }
    }

    /// The issuer URL tokens carry.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The signing key (its public half belongs in the verification keys and the JWKS).
    pub fn signing_key(&self) -> &SigningKey {
        &self.key
    }

    /// The claims kube's `serviceaccount.Claims` builds for `req` with the token id `jti`.
    pub fn claims(&self, req: &IssueRequest, jti: String) -> ServiceAccountClaims {
        let mut kubernetes = KubernetesClaims {
            namespace: req.namespace.clone(),
            serviceaccount: req.service_account.clone(),
            warnafter: req.warn_after_seconds.map(|s| req.now + s),
            ..KubernetesClaims::default()
        };
        match &req.bound_object {
            BoundObject::None => {}
            BoundObject::Pod { pod, node } => {
                kubernetes.pod = Some(pod.clone());
                kubernetes.node = node.clone();
            }
            BoundObject::Secret(secret) => kubernetes.secret = Some(secret.clone()),
            BoundObject::Node(node) => kubernetes.node = Some(node.clone()),
        }
        ServiceAccountClaims {
            aud: req.audiences.clone(),
            exp: Some(req.now + req.expiration_seconds),
            iat: Some(req.now),
            iss: self.issuer.clone(),
            jti,
            kubernetes,
            nbf: Some(req.now),
            sub: crate::user::service_account_user(&req.namespace, &req.service_account.name),
        }
    }

    /// Builds, signs and returns a token for `req`.
    pub fn issue(&self, req: &IssueRequest) -> Result<IssuedToken, IssueError> {
        let jti = uuid_v4()?;
        let claims = self.claims(req, jti.clone());
        let token = jws::sign(&self.key, &serde_json::to_vec(&claims)?)?;
        Ok(IssuedToken {
            token,
            expires_at: req.now + req.expiration_seconds,
            credential_id: format!("JTI={jti}"),
            jti,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_serialize_like_kube() {
        let claims = ServiceAccountClaims {
            aud: vec!["https://kubernetes.default.svc".into()],
            exp: Some(1_514_764_900),
            iat: Some(1_514_764_800),
            iss: "https://issuer".into(),
            jti: "j".into(),
            kubernetes: KubernetesClaims {
                namespace: "myns".into(),
                node: Some(ObjectRef::new("n", "n-uid")),
                pod: Some(ObjectRef::new("mypod", "mypod-uid")),
                secret: None,
                serviceaccount: ObjectRef::new("mysvcacct", "mysvcacct-uid"),
                warnafter: Some(1_514_764_860),
            },
            nbf: Some(1_514_764_800),
            sub: "system:serviceaccount:myns:mysvcacct".into(),
        };
        assert_eq!(
            serde_json::to_string(&claims).unwrap(),
            r#"{"aud":["https://kubernetes.default.svc"],"exp":1514764900,"iat":1514764800,"iss":"https://issuer","jti":"j","kubernetes.io":{"namespace":"myns","node":{"name":"n","uid":"n-uid"},"pod":{"name":"mypod","uid":"mypod-uid"},"serviceaccount":{"name":"mysvcacct","uid":"mysvcacct-uid"},"warnafter":1514764860},"nbf":1514764800,"sub":"system:serviceaccount:myns:mysvcacct"}"#
        );
        let back: ServiceAccountClaims = serde_json::from_str(&serde_json::to_string(&claims).unwrap()).unwrap();
        assert_eq!(back, claims);
    }

    #[test]
    fn claims_parse_like_go_jose() {
        let c: ServiceAccountClaims =
            serde_json::from_str(r#"{"aud":"one","exp":12.9,"nbf":null,"iss":"i","extra":{"x":1}}"#).unwrap();
        assert_eq!((c.aud, c.exp, c.nbf, c.iss.as_str()), (vec!["one".to_owned()], Some(12), None, "i"));
        assert_eq!(c.kubernetes, KubernetesClaims::default());
        assert!(serde_json::from_str::<ServiceAccountClaims>(r#"{"exp":"soon"}"#).is_err());
        assert!(serde_json::from_str::<ServiceAccountClaims>(r#"{"aud":[1]}"#).is_err());
    }

    #[test]
    fn uuids_are_v4() {
        let a = uuid_v4().unwrap();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(a, uuid_v4().unwrap());
    }
}
