//! Issue → verify round trips and every rejection path of the service-account authenticator.

use std::collections::HashMap;
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use super::*;
use crate::token::{TokenAuthenticator, TokenOutcome};

const RSA_A: &str = include_str!("../../tests/fixtures/rsa-a.pkcs8.pem");
const RSA_B: &str = include_str!("../../tests/fixtures/rsa-b.pkcs8.pem");
const EC_A: &str = include_str!("../../tests/fixtures/ec-a.sec1.pem");
const OPENSSL_TOKEN: &str = include_str!("../../tests/fixtures/rsa-a.openssl-token.jwt");

const ISSUER: &str = "https://kubernetes.default.svc";
const NOW: i64 = 1_700_000_000;

#[derive(Default)]
struct Objects {
    service_accounts: HashMap<(String, String), ObjectState>,
    pods: HashMap<(String, String), ObjectState>,
    secrets: HashMap<(String, String), ObjectState>,
    nodes: HashMap<String, ObjectState>,
}

fn state(uid: &str) -> ObjectState {
    ObjectState { uid: uid.into(), deleting_since: None }
}

fn key(ns: &str, name: &str) -> (String, String) {
    (ns.into(), name.into())
}

impl Objects {
    fn with_builder() -> Self {
        let mut objects = Objects::default();
        objects.service_accounts.insert(key("default", "builder"), state("sa-uid"));
        objects.pods.insert(key("default", "web-0"), state("pod-uid"));
        objects.secrets.insert(key("default", "builder-token"), state("secret-uid"));
        objects.nodes.insert("node-a".into(), state("node-uid"));
        objects
    }
}

impl BoundObjects for Objects {
    fn service_account(&self, namespace: &str, name: &str) -> Option<ObjectState> {
        self.service_accounts.get(&key(namespace, name)).cloned()
    }
    fn pod(&self, namespace: &str, name: &str) -> Option<ObjectState> {
        self.pods.get(&key(namespace, name)).cloned()
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<ObjectState> {
        self.secrets.get(&key(namespace, name)).cloned()
    }
    fn node(&self, name: &str) -> Option<ObjectState> {
        self.nodes.get(name).cloned()
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn issuer(pem: &str) -> TokenIssuer {
    TokenIssuer::new(ISSUER, SigningKey::from_pem(pem).unwrap())
}

fn authenticator(keys: &[&str], objects: Objects) -> ServiceAccountTokenAuthenticator {
    let keys = keys.iter().flat_map(|pem| verification_keys_from_pem(pem).unwrap()).collect();
    ServiceAccountTokenAuthenticator::new(
        strings(&[ISSUER, "https://old-issuer.example"]),
        keys,
        strings(&[ISSUER]),
        Arc::new(objects),
    )
}

fn request(bound: BoundObject) -> IssueRequest {
    IssueRequest {
        namespace: "default".into(),
        service_account: ObjectRef::new("builder", "sa-uid"),
        bound_object: bound,
        audiences: strings(&[ISSUER]),
        expiration_seconds: 3600,
        warn_after_seconds: None,
        now: NOW,
    }
}

fn rejected(outcome: TokenOutcome) -> String {
    match outcome {
        TokenOutcome::Rejected(reason) => reason,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

fn accepted(outcome: TokenOutcome) -> (crate::UserInfo, Vec<String>) {
    match outcome {
        TokenOutcome::Authenticated { user, audiences } => (user, audiences),
        other => panic!("expected success, got {other:?}"),
    }
}

/// Signs arbitrary claims with `pem`, to build tokens the issuer never would.
fn sign_claims(pem: &str, claims: &ServiceAccountClaims) -> String {
    jws::sign(&SigningKey::from_pem(pem).unwrap(), &serde_json::to_vec(claims).unwrap()).unwrap()
}

fn segment(token: &str, i: usize) -> serde_json::Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').nth(i).unwrap()).unwrap()).unwrap()
}

#[test]
fn rsa_and_ec_round_trip() {
    for pem in [RSA_A, EC_A] {
        let issued = issuer(pem).issue(&request(BoundObject::None)).unwrap();
        assert_eq!(issued.expires_at, NOW + 3600);
        assert_eq!(issued.credential_id, format!("JTI={}", issued.jti));
        let auth = authenticator(&[pem], Objects::with_builder());
        let (user, audiences) = accepted(auth.authenticate_at(&issued.token, &[], NOW + 10));
        assert_eq!(audiences, [ISSUER]);
        assert_eq!(user.name, "system:serviceaccount:default:builder");
        assert_eq!(user.uid, "sa-uid");
        assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:default"]);
        assert_eq!(user.extra.len(), 1);
        assert_eq!(user.extra[CREDENTIAL_ID_KEY], std::slice::from_ref(&issued.credential_id));
    }
}

#[test]
fn issued_tokens_look_like_kubes() {
    let issuer = issuer(RSA_A);
    let issued = issuer
        .issue(&request(BoundObject::Pod {
            pod: ObjectRef::new("web-0", "pod-uid"),
            node: Some(ObjectRef::new("node-a", "node-uid")),
        }))
        .unwrap();
    let header = segment(&issued.token, 0);
    assert_eq!(header, serde_json::json!({"alg": "RS256", "kid": issuer.signing_key().kid()}));
    assert_eq!(header.as_object().unwrap().keys().collect::<Vec<_>>(), ["alg", "kid"]);
    let payload = segment(&issued.token, 1);
    let keys: Vec<&str> = payload.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["aud", "exp", "iat", "iss", "jti", "kubernetes.io", "nbf", "sub"]);
    assert_eq!(payload["sub"], "system:serviceaccount:default:builder");
    assert_eq!(payload["aud"], serde_json::json!([ISSUER]));
    assert_eq!(
        (payload["iat"].as_i64(), payload["nbf"].as_i64(), payload["exp"].as_i64()),
        (Some(NOW), Some(NOW), Some(NOW + 3600))
    );
    assert_eq!(
        payload["kubernetes.io"],
        serde_json::json!({
            "namespace": "default",
            "node": {"name": "node-a", "uid": "node-uid"},
            "pod": {"name": "web-0", "uid": "pod-uid"},
            "serviceaccount": {"name": "builder", "uid": "sa-uid"},
        })
    );
    assert_eq!(payload["jti"], issued.jti.as_str());

    let mut warn = request(BoundObject::Secret(ObjectRef::new("builder-token", "secret-uid")));
    warn.warn_after_seconds = Some(3607);
    warn.audiences.clear();
    let payload = segment(&issuer.issue(&warn).unwrap().token, 1);
    assert!(payload.get("aud").is_none());
    assert_eq!(payload["kubernetes.io"]["warnafter"].as_i64(), Some(NOW + 3607));
    assert_eq!(payload["kubernetes.io"]["secret"]["name"], "builder-token");
}

#[test]
fn pod_bound_tokens_carry_pod_and_node_and_die_with_the_pod() {
    let bound =
        BoundObject::Pod { pod: ObjectRef::new("web-0", "pod-uid"), node: Some(ObjectRef::new("node-a", "node-uid")) };
    let token = issuer(EC_A).issue(&request(bound)).unwrap().token;
    let (user, _) = accepted(authenticator(&[EC_A], Objects::with_builder()).authenticate_at(&token, &[], NOW));
    let extra: Vec<&str> = user.extra.keys().map(String::as_str).collect();
    assert_eq!(extra, [CREDENTIAL_ID_KEY, NODE_NAME_KEY, NODE_UID_KEY, POD_NAME_KEY, POD_UID_KEY],);
    assert_eq!(user.extra[POD_NAME_KEY], ["web-0"]);
    assert_eq!(user.extra[NODE_UID_KEY], ["node-uid"]);

    // The node of a pod-bound token is reported, not checked.
    let mut objects = Objects::with_builder();
    objects.nodes.clear();
    assert!(matches!(
        authenticator(&[EC_A], objects).authenticate_at(&token, &[], NOW),
        TokenOutcome::Authenticated { .. }
    ));

    let mut objects = Objects::with_builder();
    objects.pods.clear();
    let gone = rejected(authenticator(&[EC_A], objects).authenticate_at(&token, &[], NOW));
    assert_eq!(gone, "service account token has been invalidated");

    let mut objects = Objects::with_builder();
    objects.pods.insert(key("default", "web-0"), state("recreated"));
    let recreated = rejected(authenticator(&[EC_A], objects).authenticate_at(&token, &[], NOW));
    assert_eq!(recreated, "pod UID (recreated) does not match service account pod ref claim (pod-uid)");

    // Deletion that began within the leeway still counts as present; beyond it, not.
    let mut objects = Objects::with_builder();
    objects.pods.insert(key("default", "web-0"), ObjectState { uid: "pod-uid".into(), deleting_since: Some(NOW - 60) });
    assert!(matches!(
        authenticator(&[EC_A], objects).authenticate_at(&token, &[], NOW),
        TokenOutcome::Authenticated { .. }
    ));
    let mut objects = Objects::with_builder();
    objects.pods.insert(key("default", "web-0"), ObjectState { uid: "pod-uid".into(), deleting_since: Some(NOW - 61) });
    assert_eq!(
        rejected(authenticator(&[EC_A], objects).authenticate_at(&token, &[], NOW)),
        "service account token has been invalidated"
    );
}

#[test]
fn node_and_secret_bound_tokens_check_their_object() {
    let token = issuer(EC_A).issue(&request(BoundObject::Node(ObjectRef::new("node-a", "node-uid")))).unwrap().token;
    let (user, _) = accepted(authenticator(&[EC_A], Objects::with_builder()).authenticate_at(&token, &[], NOW));
    assert_eq!(user.extra[NODE_NAME_KEY], ["node-a"]);
    assert!(!user.extra.contains_key(POD_NAME_KEY));
    let mut objects = Objects::with_builder();
    objects.nodes.insert("node-a".into(), state("other"));
    assert_eq!(
        rejected(authenticator(&[EC_A], objects).authenticate_at(&token, &[], NOW)),
        "node UID (other) does not match service account node ref claim (node-uid)"
    );
    let mut objects = Objects::with_builder();
    objects.nodes.clear();
    assert_eq!(
        rejected(authenticator(&[EC_A], objects).authenticate_at(&token, &[], NOW)),
        "service account token has been invalidated"
    );

    let token =
        issuer(EC_A).issue(&request(BoundObject::Secret(ObjectRef::new("builder-token", "secret-uid")))).unwrap().token;
    let (user, _) = accepted(authenticator(&[EC_A], Objects::with_builder()).authenticate_at(&token, &[], NOW));
    assert_eq!(user.extra.keys().collect::<Vec<_>>(), [CREDENTIAL_ID_KEY]);
    let mut objects = Objects::with_builder();
    objects.secrets.insert(key("default", "builder-token"), state("new"));
    assert_eq!(
        rejected(authenticator(&[EC_A], objects).authenticate_at(&token, &[], NOW)),
        "secret UID (new) does not match service account secret ref claim (secret-uid)"
    );
    let mut objects = Objects::with_builder();
    objects.secrets.clear();
    assert_eq!(
        rejected(authenticator(&[EC_A], objects).authenticate_at(&token, &[], NOW)),
        "service account token has been invalidated"
    );
}

#[test]
fn service_account_must_still_exist_unchanged() {
    let token = issuer(RSA_A).issue(&request(BoundObject::None)).unwrap().token;
    let auth = |objects| authenticator(&[RSA_A], objects);

    let mut objects = Objects::with_builder();
    objects.service_accounts.clear();
    assert_eq!(rejected(auth(objects).authenticate_at(&token, &[], NOW)), "serviceaccounts \"builder\" not found");

    let mut objects = Objects::with_builder();
    objects.service_accounts.insert(key("default", "builder"), state("sa-uid-2"));
    assert_eq!(
        rejected(auth(objects).authenticate_at(&token, &[], NOW)),
        "service account UID (sa-uid-2) does not match claim (sa-uid)"
    );

    let mut objects = Objects::with_builder();
    objects
        .service_accounts
        .insert(key("default", "builder"), ObjectState { uid: "sa-uid".into(), deleting_since: Some(NOW - 120) });
    assert_eq!(
        rejected(auth(objects).authenticate_at(&token, &[], NOW)),
        "service account default/builder has been deleted"
    );
}

#[test]
fn time_is_checked_with_kubes_leeway() {
    let token = issuer(RSA_A).issue(&request(BoundObject::None)).unwrap().token;
    let auth = authenticator(&[RSA_A], Objects::with_builder());
    let exp = NOW + 3600;
    assert!(matches!(auth.authenticate_at(&token, &[], exp + 60), TokenOutcome::Authenticated { .. }));
    assert_eq!(rejected(auth.authenticate_at(&token, &[], exp + 61)), "service account token has expired");
    assert!(matches!(auth.authenticate_at(&token, &[], NOW - 60), TokenOutcome::Authenticated { .. }));
    assert_eq!(rejected(auth.authenticate_at(&token, &[], NOW - 61)), "service account token is not valid yet");

    // iat in the future with no nbf.
    let mut claims = issuer(RSA_A).claims(&request(BoundObject::None), "j".into());
    claims.nbf = None;
    claims.iat = Some(NOW + 600);
    assert_eq!(
        rejected(auth.authenticate_at(&sign_claims(RSA_A, &claims), &[], NOW)),
        "service account token is issued in the future"
    );
    // No exp at all is not an expiry (go-jose's optional claim).
    claims.iat = Some(NOW);
    claims.exp = None;
    assert!(matches!(
        auth.authenticate_at(&sign_claims(RSA_A, &claims), &[], NOW + 10_000_000),
        TokenOutcome::Authenticated { .. }
    ));
}

#[test]
fn audiences_follow_kube() {
    let auth = authenticator(&[RSA_A], Objects::with_builder());
    let mut req = request(BoundObject::None);
    req.audiences = strings(&["vault", ISSUER]);
    let token = issuer(RSA_A).issue(&req).unwrap().token;
    // Requested audiences are intersected, in the requested order.
    let (_, audiences) = accepted(auth.authenticate_at(&token, &strings(&["other", ISSUER, "vault"]), NOW));
    assert_eq!(audiences, [ISSUER, "vault"]);
    // No requested audiences: the API audiences.
    assert_eq!(accepted(auth.authenticate_at(&token, &[], NOW)).1, [ISSUER]);
    // No overlap.
    assert_eq!(
        rejected(auth.authenticate_at(&token, &strings(&["nope"]), NOW)),
        "token audiences [\"vault\" \"https://kubernetes.default.svc\"] is invalid for the target audiences [\"nope\"]"
    );
    // A token only for vault is not valid for the API.
    req.audiences = strings(&["vault"]);
    let vault_only = issuer(RSA_A).issue(&req).unwrap().token;
    assert!(rejected(auth.authenticate_at(&vault_only, &[], NOW)).starts_with("token audiences [\"vault\"] is invalid"));
    // A token without aud is valid for the API audiences only.
    req.audiences.clear();
    let no_aud = issuer(RSA_A).issue(&req).unwrap().token;
    assert_eq!(accepted(auth.authenticate_at(&no_aud, &[], NOW)).1, [ISSUER]);
    assert!(matches!(auth.authenticate_at(&no_aud, &strings(&["vault"]), NOW), TokenOutcome::Rejected(_)));
    // Without API audiences an empty intersection is tolerated, as in kube.
    let lax = ServiceAccountTokenAuthenticator::new(
        strings(&[ISSUER]),
        verification_keys_from_pem(RSA_A).unwrap(),
        Vec::new(),
        Arc::new(Objects::with_builder()),
    );
    assert_eq!(accepted(lax.authenticate_at(&vault_only, &strings(&["x"]), NOW)).1, Vec::<String>::new());
}

#[test]
fn foreign_issuers_and_non_jwts_are_not_applicable() {
    let auth = authenticator(&[RSA_A], Objects::with_builder());
    let foreign = TokenIssuer::new("https://accounts.example.com", SigningKey::from_pem(RSA_A).unwrap());
    let token = foreign.issue(&request(BoundObject::None)).unwrap().token;
    assert_eq!(auth.authenticate_at(&token, &[], NOW), TokenOutcome::NotApplicable);
    assert_eq!(auth.authenticate_at("static-token-from-a-file", &[], NOW), TokenOutcome::NotApplicable);
    // Our issuer in the payload but a header that is not JSON: not a JWS, not applicable.
    let ours = issuer(RSA_A).issue(&request(BoundObject::None)).unwrap().token;
    let broken = format!("bm90IGpzb24{}", &ours[ours.find('.').unwrap()..]);
    assert_eq!(auth.authenticate_at(&broken, &[], NOW), TokenOutcome::NotApplicable);
    // Every configured issuer is accepted.
    let old = TokenIssuer::new("https://old-issuer.example", SigningKey::from_pem(RSA_A).unwrap());
    let token = old.issue(&request(BoundObject::None)).unwrap().token;
    assert!(matches!(auth.authenticate_at(&token, &[], NOW), TokenOutcome::Authenticated { .. }));
}

#[test]
fn signatures_are_checked() {
    let auth = authenticator(&[RSA_A, EC_A], Objects::with_builder());
    // Signed by a key we do not have: its kid matches nothing.
    let stranger = issuer(RSA_B).issue(&request(BoundObject::None)).unwrap().token;
    assert_eq!(rejected(auth.authenticate_at(&stranger, &[], NOW)), "invalid signature, no keys found");

    // Without a kid every key is tried and every failure reported.
    let claims = issuer(RSA_B).claims(&request(BoundObject::None), "j".into());
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap());
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256"}"#);
    let input = format!("{header}.{payload}");
    let sig = SigningKey::from_pem(RSA_B).unwrap().sign(input.as_bytes()).unwrap();
    let no_kid = format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig));
    assert_eq!(
        rejected(auth.authenticate_at(&no_kid, &[], NOW)),
        "[error in cryptographic primitive, unexpected signature algorithm \"RS256\" for a ES256 key]"
    );
    // The same token without a kid is fine for the right key.
    assert!(matches!(
        authenticator(&[RSA_B], Objects::with_builder()).authenticate_at(&no_kid, &[], NOW),
        TokenOutcome::Authenticated { .. }
    ));

    // A tampered payload (someone else's service account) breaks the signature.
    let token = issuer(RSA_A).issue(&request(BoundObject::None)).unwrap().token;
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: ServiceAccountClaims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    claims.sub = "system:serviceaccount:kube-system:admin".into();
    claims.kubernetes.namespace = "kube-system".into();
    let tampered =
        format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap()), parts[2]);
    assert_eq!(rejected(auth.authenticate_at(&tampered, &[], NOW)), "error in cryptographic primitive");
    // So does a tampered signature.
    let mut sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    sig[0] ^= 1;
    let bad_sig = format!("{}.{}.{}", parts[0], parts[1], URL_SAFE_NO_PAD.encode(sig));
    assert_eq!(rejected(auth.authenticate_at(&bad_sig, &[], NOW)), "error in cryptographic primitive");
}

#[test]
fn rotation_keeps_old_tokens_valid() {
    let old = issuer(RSA_A).issue(&request(BoundObject::None)).unwrap().token;
    let new = issuer(EC_A).issue(&request(BoundObject::None)).unwrap().token;
    // --service-account-key-file old.pem --service-account-key-file new.pem
    let auth = authenticator(&[RSA_A, EC_A], Objects::with_builder());
    assert!(matches!(auth.authenticate_at(&old, &[], NOW), TokenOutcome::Authenticated { .. }));
    assert!(matches!(auth.authenticate_at(&new, &[], NOW), TokenOutcome::Authenticated { .. }));
    // Once the old key is dropped its tokens die.
    let auth = authenticator(&[EC_A], Objects::with_builder());
    assert_eq!(rejected(auth.authenticate_at(&old, &[], NOW)), "invalid signature, no keys found");
}

#[test]
fn verifies_a_token_signed_by_openssl() {
    let mut objects = Objects::default();
    objects.service_accounts.insert(key("default", "builder"), state("11111111-2222-3333-4444-555555555555"));
    let auth = authenticator(&[include_str!("../../tests/fixtures/rsa-a.pub.pem")], objects);
    let (user, audiences) = accepted(auth.authenticate_at(OPENSSL_TOKEN.trim(), &[], 2_000_000_100));
    assert_eq!(user.name, "system:serviceaccount:default:builder");
    assert_eq!(user.extra[CREDENTIAL_ID_KEY], ["JTI=6a1f3c2e-8d4b-4f0a-9c3e-2b7d5e1f4a60"]);
    assert_eq!(audiences, [ISSUER]);
    // Through the trait, with the wall clock, it is long expired or not yet valid.
    assert!(matches!(auth.authenticate_token(OPENSSL_TOKEN.trim(), &[]), TokenOutcome::Rejected(_)));
}

#[test]
fn bearer_union_round_trip() {
    use crate::authn::{AuthOutcome, AuthRequest, Authenticator};
    use crate::token::{BearerTokenAuthenticator, TokenUnion};
    let union = TokenUnion::new(vec![Box::new(authenticator(&[EC_A], Objects::with_builder()))]);
    let bearer = BearerTokenAuthenticator::new(Arc::new(union), strings(&[ISSUER]));
    let mut req = request(BoundObject::None);
    req.now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let token = issuer(EC_A).issue(&req).unwrap().token;
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    let AuthOutcome::Authenticated(user) = bearer.authenticate(&AuthRequest::headers_only(&headers)) else { panic!() };
    assert_eq!(user.name, "system:serviceaccount:default:builder");
}

#[test]
fn discovery_documents() {
    let keys: Vec<VerificationKey> =
        [RSA_A, EC_A, RSA_B].iter().flat_map(|p| verification_keys_from_pem(p).unwrap()).collect();
    let metadata = OpenIdMetadata::new(ISSUER, None, Some("10.0.0.1:6443"), &keys).unwrap();
    assert_eq!(
        metadata.configuration(),
        &serde_json::json!({
            "issuer": ISSUER,
            "jwks_uri": "https://10.0.0.1:6443/openid/v1/jwks",
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256", "RS256"],
        })
    );
    let order: Vec<&str> = metadata.configuration().as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        order,
        [
            "issuer",
            "jwks_uri",
            "response_types_supported",
            "subject_types_supported",
            "id_token_signing_alg_values_supported"
        ]
    );
    let set = metadata.jwks()["keys"].as_array().unwrap();
    assert_eq!(set.len(), 3);
    assert_eq!(set[0]["kid"], keys[0].kid());
    assert!(set.iter().all(|k| k["use"] == "sig" && k.get("d").is_none()));
    assert_eq!(set[1]["kty"], "EC");
    assert_eq!(metadata.jwks(), &jwks(&keys));

    let explicit = OpenIdMetadata::new(ISSUER, Some("https://keys.example/jwks"), None, &keys).unwrap();
    assert_eq!(explicit.configuration()["jwks_uri"], "https://keys.example/jwks");
    assert_eq!(OpenIdMetadata::new("", None, Some("a"), &keys), Err(DiscoveryError::EmptyIssuer));
    assert_eq!(OpenIdMetadata::new(ISSUER, None, None, &keys), Err(DiscoveryError::NoJwksUri));
    assert!(matches!(OpenIdMetadata::new("http://x", None, Some("a"), &keys), Err(DiscoveryError::IssuerNotHttps(_))));
    assert!(matches!(
        OpenIdMetadata::new("https://x?a=b", None, Some("a"), &keys),
        Err(DiscoveryError::IssuerQuery(_))
    ));
    assert!(matches!(
        OpenIdMetadata::new("https://x#f", None, Some("a"), &keys),
        Err(DiscoveryError::IssuerFragment(_))
    ));
    assert!(matches!(OpenIdMetadata::new(ISSUER, Some("http://k"), None, &keys), Err(DiscoveryError::JwksNotHttps(_))));
    assert_eq!(OpenIdMetadata::new(ISSUER, None, Some("a"), &[]), Err(DiscoveryError::NoKeys));
}
