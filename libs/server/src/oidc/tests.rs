//! The JWT authenticator with keys put in place by the test (the issuer URL points nowhere, so
//! every fetch fails, which the unknown-kid tests rely on): claims and CEL mappings, rules, and
//! kube's messages.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use kapi_auth::jwt::JwkSet;
use kapi_auth::{TokenAuthenticator, TokenOutcome, UserInfo};
use ring::rand::SystemRandom;
use ring::signature::{self, RsaKeyPair};
use serde_json::{json, Value};

use super::authenticator::JwtAuthenticator;
use super::config::{load, AuthenticationSettings, OidcFlags};

const RSA_A: &str = include_str!("../../../auth/tests/fixtures/rsa-a.pkcs8.pem");
const RSA_B: &str = include_str!("../../../auth/tests/fixtures/rsa-b.pkcs8.pem");
/// Nothing listens there: fetches fail at once.
const ISSUER: &str = "https://127.0.0.1:9";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn key(pem: &str) -> RsaKeyPair {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    RsaKeyPair::from_pkcs8(&base64::engine::general_purpose::STANDARD.decode(body).unwrap()).unwrap()
}

fn jwks(keys: &[(&RsaKeyPair, &str)]) -> JwkSet {
    let list: Vec<Value> = keys
        .iter()
        .map(|(k, kid)| {
            let c: signature::RsaPublicKeyComponents<Vec<u8>> = k.public().into();
            json!({"kty": "RSA", "kid": kid, "n": b64(&c.n), "e": b64(&c.e)})
        })
        .collect();
    JwkSet::parse(json!({ "keys": list }).to_string().as_bytes()).unwrap()
}

fn sign(k: &RsaKeyPair, kid: &str, claims: &Value) -> String {
    let input = format!("{}.{}", b64(json!({"alg": "RS256", "kid": kid}).to_string().as_bytes()), b64(claims.to_string().as_bytes()));
    let mut sig = vec![0; k.public().modulus_len()];
    k.sign(&signature::RSA_PKCS1_SHA256, &SystemRandom::new(), input.as_bytes(), &mut sig).unwrap();
    format!("{input}.{}", b64(&sig))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn claims(extra: Value) -> Value {
    let mut c = json!({"iss": ISSUER, "aud": "kapi", "sub": "jane", "exp": now() + 600, "iat": now()});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn settings(yaml_jwt: &str) -> AuthenticationSettings {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("kapi-oidc-test-{}-{n}.yaml", std::process::id()));
    std::fs::write(&path, format!("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n{yaml_jwt}")).unwrap();
    let settings = load(Some(&path), &OidcFlags::default(), &[], false);
    let _ = std::fs::remove_file(&path);
    settings.unwrap()
}

fn authenticator(settings: &AuthenticationSettings, keys: JwkSet) -> Arc<JwtAuthenticator> {
    let a = JwtAuthenticator::for_test(settings.jwt[0].clone());
    a.install_keys_for_test(keys);
    a
}

fn user(outcome: TokenOutcome) -> UserInfo {
    match outcome {
        TokenOutcome::Authenticated { user, .. } => user,
        other => panic!("not authenticated: {other:?}"),
    }
}

fn rejected(outcome: TokenOutcome) -> String {
    match outcome {
        TokenOutcome::Rejected(e) => e,
        other => panic!("not rejected: {other:?}"),
    }
}

#[tokio::test]
async fn legacy_flags_map_claims_as_kube() {
    let flags = OidcFlags {
        issuer_url: Some(ISSUER.into()),
        client_id: Some("kapi".into()),
        groups_claim: Some("groups".into()),
        groups_prefix: Some("oidc:".into()),
        required_claims: vec!["hd=example.com".into()],
        ..Default::default()
    };
    let s = load(None, &flags, &[], false).unwrap();
    let a = JwtAuthenticator::for_test(s.jwt[0].clone());
    // Before any key: a token of this issuer is refused, another issuer's is not applicable.
    let k = key(RSA_A);
    let good = sign(&k, "a", &claims(json!({"groups": ["dev", "ops"], "hd": "example.com"})));
    assert_eq!(rejected(a.authenticate_token_async(&good, &[]).await), "oidc: authenticator not initialized");
    let foreign = sign(&k, "a", &json!({"iss": "https://elsewhere", "aud": "kapi"}));
    assert_eq!(a.authenticate_token_async(&foreign, &[]).await, TokenOutcome::NotApplicable);
    assert_eq!(a.authenticate_token_async("not-a-jwt", &[]).await, TokenOutcome::NotApplicable);

    a.install_keys_for_test(jwks(&[(&k, "a")]));
    let u = user(a.authenticate_token_async(&good, &[]).await);
    assert_eq!(u.name, format!("{ISSUER}#jane"));
    assert_eq!(u.groups, ["oidc:dev", "oidc:ops"]);
    // A single group as a string.
    let one = sign(&k, "a", &claims(json!({"groups": "dev", "hd": "example.com"})));
    assert_eq!(user(a.authenticate_token(&one, &[])).groups, ["oidc:dev"]);
    // Required claims.
    let missing = sign(&k, "a", &claims(json!({})));
    assert_eq!(rejected(a.authenticate_token_async(&missing, &[]).await), "oidc: required claim hd not present in ID token");
    let wrong = sign(&k, "a", &claims(json!({"hd": "evil.com"})));
    assert_eq!(
        rejected(a.authenticate_token_async(&wrong, &[]).await),
        "oidc: required claim hd value does not match. Got = evil.com, want = example.com"
    );
    // Groups of the wrong type.
    let bad = sign(&k, "a", &claims(json!({"groups": 7, "hd": "example.com"})));
    assert_eq!(
        rejected(a.authenticate_token_async(&bad, &[]).await),
        "oidc: parse groups claim \"groups\": json: cannot unmarshal number into Go value of type string"
    );
    // Signed by another key under the known kid.
    let forged = sign(&key(RSA_B), "a", &claims(json!({"hd": "example.com"})));
    assert_eq!(
        rejected(a.authenticate_token_async(&forged, &[]).await),
        "oidc: verify token: failed to verify signature: failed to verify id token signature"
    );
    // An unknown kid makes the authenticator fetch keys, which fails here; the error says so.
    // (A fresh authenticator: the cold token above already spent this one's fetch allowance.)
    let rotated = sign(&key(RSA_B), "b", &claims(json!({"hd": "example.com"})));
    assert_eq!(
        rejected(a.authenticate_token_async(&rotated, &[]).await),
        "oidc: verify token: failed to verify signature: failed to verify id token signature"
    );
    let a = authenticator(&s, jwks(&[(&k, "a")]));
    let e = rejected(a.authenticate_token_async(&rotated, &[]).await);
    assert!(
        e.starts_with("oidc: verify token: failed to verify signature: fetching keys Get \"https://127.0.0.1:9/.well-known/openid-configuration\": "),
        "{e}"
    );
    // Within the rate limit no second fetch is tried.
    assert_eq!(
        rejected(a.authenticate_token_async(&rotated, &[]).await),
        "oidc: verify token: failed to verify signature: failed to verify id token signature"
    );
}

#[tokio::test]
async fn email_claim_needs_email_verified_true_when_present() {
    let flags =
        OidcFlags { issuer_url: Some(ISSUER.into()), client_id: Some("kapi".into()), username_claim: Some("email".into()), ..Default::default() };
    let s = load(None, &flags, &[], false).unwrap();
    let k = key(RSA_A);
    let a = authenticator(&s, jwks(&[(&k, "a")]));
    let t = |c: Value| sign(&k, "a", &claims(c));
    assert_eq!(user(a.authenticate_token_async(&t(json!({"email": "j@example.com", "email_verified": true})), &[]).await).name, "j@example.com");
    assert_eq!(user(a.authenticate_token_async(&t(json!({"email": "j@example.com"})), &[]).await).name, "j@example.com");
    assert_eq!(
        rejected(a.authenticate_token_async(&t(json!({"email": "j@example.com", "email_verified": false})), &[]).await),
        "oidc: email not verified"
    );
    assert_eq!(rejected(a.authenticate_token_async(&t(json!({})), &[]).await), "oidc: parse username claims \"email\": claim not present");
}

#[tokio::test]
async fn cel_mappings_and_rules() {
    let s = settings(&format!(
        r#"- issuer:
    url: {ISSUER}
    audiences: [kapi, other]
    audienceMatchPolicy: MatchAny
  claimValidationRules:
  - expression: "claims.tier != 'banned'"
    message: banned tier
  claimMappings:
    username:
      expression: "'oidc:' + claims.sub"
    groups:
      expression: "claims.roles.map(r, 'role:' + r)"
    uid:
      expression: "claims.sub + '-uid'"
    extra:
    - key: example.com/tier
      valueExpression: "claims.tier"
    - key: example.com/empty
      valueExpression: "''"
  userValidationRules:
  - expression: "!user.username.startsWith('oidc:root')"
    message: no root
"#
    ));
    let k = key(RSA_A);
    let a = authenticator(&s, jwks(&[(&k, "a")]));
    let t = |c: Value| sign(&k, "a", &claims(c));
    let u = user(a.authenticate_token_async(&t(json!({"roles": ["a", "b"], "tier": "gold", "aud": ["other"]})), &[]).await);
    assert_eq!((u.name.as_str(), u.uid.as_str()), ("oidc:jane", "jane-uid"));
    assert_eq!(u.groups, ["role:a", "role:b"]);
    assert_eq!(u.extra.get("example.com/tier"), Some(&vec!["gold".to_owned()]));
    assert!(!u.extra.contains_key("example.com/empty"));
    assert_eq!(
        rejected(a.authenticate_token_async(&t(json!({"roles": [], "tier": "banned"})), &[]).await),
        "oidc: error evaluating claim validation expression: validation expression 'claims.tier != 'banned'' failed: banned tier"
    );
    assert_eq!(
        rejected(a.authenticate_token_async(&t(json!({"roles": [], "tier": "x", "sub": "root"})), &[]).await),
        "oidc: error evaluating user info validation rule: validation expression '!user.username.startsWith('oidc:root')' failed: no root"
    );
    assert_eq!(
        rejected(a.authenticate_token_async(&t(json!({"tier": "x"})), &[]).await),
        "oidc: error evaluating group claim expression: expression 'claims.roles.map(r, 'role:' + r)' resulted in error: no such key: roles"
    );
    assert_eq!(
        rejected(a.authenticate_token_async(&t(json!({"roles": [], "tier": 5})), &[]).await),
        "oidc: error evaluating extra claim expression: claims.tier: expression must return a string or a list of strings"
    );
    assert_eq!(
        rejected(a.authenticate_token_async(&t(json!({"aud": "third", "roles": []})), &[]).await),
        "oidc: verify token: oidc: expected audience in [\"kapi\" \"other\"] got [\"third\"]"
    );
}
