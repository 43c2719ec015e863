//! OIDC / JWT authentication as kube-apiserver's (issue 23, "Done when" 2), against a real
//! HTTPS issuer process with its own CA: `--authentication-config` with two JWT authenticators
//! (CEL mappings and rules; an email claim), a table of tokens accepted or refused with kube's
//! reasons (read back through TokenReview), kubectl logged in with a token as the mapped user, a
//! key rotation at the issuer picked up, the legacy `--oidc-*` flags, and bad configurations
//! stopping start-up with kube's field errors.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kapi_e2e::{Credential, Kapi, OidcIssuer, Request};
use serde_json::{json, Value};

const AUDIENCE: &str = "kapi-e2e";

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn indent(pem: &str) -> String {
    pem.lines().map(|l| format!("      {l}\n")).collect()
}

fn config(issuer: &OidcIssuer) -> String {
    let ca = indent(&issuer.ca_pem());
    format!(
        r#"apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {main}
    audiences: [{AUDIENCE}, other-app]
    audienceMatchPolicy: MatchAny
    certificateAuthority: |
{ca}  claimValidationRules:
  - expression: "!has(claims.tier) || claims.tier != 'banned'"
    message: banned tier
  claimMappings:
    username:
      expression: "'oidc:' + claims.sub"
    groups:
      expression: "has(claims.roles) ? claims.roles.map(r, 'oidc:' + r) : []"
    uid:
      claim: sub
    extra:
    - key: example.com/tier
      valueExpression: "has(claims.tier) ? claims.tier : ''"
  userValidationRules:
  - expression: "!user.username.startsWith('oidc:system')"
    message: system users may not log in with OIDC
- issuer:
    url: {email}
    audiences: [{AUDIENCE}]
    certificateAuthority: |
{ca}  claimMappings:
    username:
      claim: email
      prefix: ""
"#,
        main = issuer.url(""),
        email = issuer.url("/email"),
    )
}

/// TokenReview's status for `token`, asked as the admin.
fn review(kapi: &Kapi, token: &str) -> Value {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    let r = kapi.request(&Request::new("POST", "/apis/authentication.k8s.io/v1/tokenreviews").json(&body));
    assert_eq!(r.status, 201, "{}", r.raw);
    r.body["status"].clone()
}

fn request_status(kapi: &Kapi, token: &str) -> u16 {
    kapi.request(&Request::get("/api").as_user(&Credential::Token(token.into()))).status
}

enum Want {
    User(&'static str, &'static [&'static str]),
    Refused(&'static str),
}

#[test]
fn jwt_authenticators_from_the_configuration_file() {
    let issuer = OidcIssuer::start().expect("start the issuer");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("authentication.yaml");
    std::fs::write(&file, config(&issuer)).unwrap();
    let kapi = Kapi::start_with(&["--authentication-config", file.to_str().unwrap()]).expect("start kapi");

    let main = issuer.url("");
    let email_issuer = issuer.url("/email");
    let t = now();
    let base = |extra: Value| {
        let mut c = json!({"iss": main, "aud": AUDIENCE, "sub": "jane", "iat": t, "exp": t + 600});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };
    let good = issuer.sign("current", json!({}), base(json!({"roles": ["dev", "ops"], "tier": "gold"})));
    let parts: Vec<&str> = good.split('.').collect();
    // The payload of another token (validly signed itself) under this token's signature.
    let tampered = {
        let evil = issuer.sign("current", json!({}), base(json!({"sub": "admin", "roles": ["admins"]})));
        let payload = evil.split('.').nth(1).unwrap().to_owned();
        format!("{}.{payload}.{}", parts[0], parts[2])
    };
    let cases: Vec<(&str, String, Want)> = vec![
        ("good token, CEL username/groups", good.clone(), Want::User("oidc:jane", &["oidc:dev", "oidc:ops", "system:authenticated"])),
        ("second audience", issuer.sign("current", json!({}), base(json!({"aud": ["other-app"]}))), Want::User("oidc:jane", &["system:authenticated"])),
        (
            "wrong issuer: no authenticator claims it",
            issuer.sign("current", json!({}), base(json!({"iss": "https://elsewhere.example"}))),
            Want::Refused(""),
        ),
        (
            "wrong audience",
            issuer.sign("current", json!({}), base(json!({"aud": "vault"}))),
            Want::Refused("oidc: verify token: oidc: expected audience in [\"kapi-e2e\" \"other-app\"] got [\"vault\"]"),
        ),
        ("expired", issuer.sign("current", json!({}), base(json!({"exp": t - 30}))), Want::Refused("oidc: verify token: oidc: token is expired (Token Expiry: ")),
        (
            "not yet valid (beyond the minute of leeway)",
            issuer.sign("current", json!({}), base(json!({"nbf": t + 600}))),
            Want::Refused("before the nbf (not before) time"),
        ),
        ("nbf within the leeway", issuer.sign("current", json!({}), base(json!({"nbf": t + 20}))), Want::User("oidc:jane", &["system:authenticated"])),
        (
            "alg none",
            issuer.sign("none", json!({}), base(json!({}))),
            Want::Refused("oidc: id token signed with unsupported algorithm, expected [\"ES256\" \"ES384\" \"ES512\" \"PS256\" \"PS384\" \"PS512\" \"RS256\" \"RS384\" \"RS512\"] got \"none\""),
        ),
        (
            "HS256 keyed with the public key",
            issuer.sign("hmac-public", json!({}), base(json!({}))),
            Want::Refused("oidc: id token signed with unsupported algorithm, expected [\"ES256\" \"ES384\" \"ES512\" \"PS256\" \"PS384\" \"PS512\" \"RS256\" \"RS384\" \"RS512\"] got \"HS256\""),
        ),
        (
            "RS256 but claiming the published kid with another key",
            issuer.sign("stranger", json!({"kid": "key-1"}), base(json!({}))),
            Want::Refused("oidc: verify token: failed to verify signature: failed to verify id token signature"),
        ),
        (
            "unknown kid",
            issuer.sign("stranger", json!({}), base(json!({}))),
            Want::Refused("oidc: verify token: failed to verify signature: failed to verify id token signature"),
        ),
        ("tampered payload", tampered, Want::Refused("oidc: verify token: failed to verify signature: failed to verify id token signature")),
        (
            "claim validation rule failing",
            issuer.sign("current", json!({}), base(json!({"tier": "banned"}))),
            Want::Refused("oidc: error evaluating claim validation expression: validation expression '!has(claims.tier) || claims.tier != 'banned'' failed: banned tier"),
        ),
        (
            "user validation rule refusing",
            issuer.sign("current", json!({}), base(json!({"sub": "system:admin"}))),
            Want::Refused("oidc: error evaluating user info validation rule: validation expression '!user.username.startsWith('oidc:system')' failed: system users may not log in with OIDC"),
        ),
        (
            "groups of the wrong type",
            issuer.sign("current", json!({}), base(json!({"roles": "dev"}))),
            Want::Refused("oidc: error evaluating group claim expression: "),
        ),
        (
            "email issuer, email_verified true",
            issuer.sign("current", json!({}), base(json!({"iss": email_issuer, "email": "jane@example.com", "email_verified": true}))),
            Want::User("jane@example.com", &["system:authenticated"]),
        ),
        (
            "email issuer, email_verified false",
            issuer.sign("current", json!({}), base(json!({"iss": email_issuer, "email": "jane@example.com", "email_verified": false}))),
            Want::Refused("oidc: email not verified"),
        ),
        (
            "email issuer, no email claim",
            issuer.sign("current", json!({}), base(json!({"iss": email_issuer}))),
            Want::Refused("oidc: parse username claims \"email\": claim not present"),
        ),
        ("not a JWT at all", "abc.def".to_owned(), Want::Refused("")),
    ];
    for (name, token, want) in &cases {
        let status = review(&kapi, token);
        match want {
            Want::User(user, groups) => {
                assert_eq!(status["authenticated"], true, "{name}: {status}");
                assert_eq!(status["user"]["username"], *user, "{name}: {status}");
                assert_eq!(status["user"]["groups"], json!(groups), "{name}: {status}");
                assert_eq!(request_status(&kapi, token), 200, "{name}");
            }
            Want::Refused(reason) => {
                assert_ne!(status["authenticated"], true, "{name}: {status}");
                let error = status["error"].as_str().unwrap_or("");
                if reason.is_empty() {
                    assert_eq!(error, "", "{name}: no authenticator should claim it: {status}");
                } else {
                    assert!(error.contains(reason), "{name}: want {reason:?}, got {error:?}");
                }
                assert_eq!(request_status(&kapi, token), 401, "{name}");
            }
        }
    }

    // kubectl logged in with the token sees the mapped user.
    let kubeconfig = kapi.kubeconfig_for("jane", &Credential::Token(good.clone()));
    let whoami = kapi.kubectl_config(&kubeconfig, &["auth", "whoami", "-o", "json"]);
    assert!(whoami.status.success(), "{}", String::from_utf8_lossy(&whoami.stderr));
    let who: Value = serde_json::from_slice(&whoami.stdout).unwrap();
    let info = &who["status"]["userInfo"];
    assert_eq!(info["username"], "oidc:jane");
    assert_eq!(info["uid"], "jane");
    assert_eq!(info["groups"], json!(["oidc:dev", "oidc:ops", "system:authenticated"]));
    assert_eq!(info["extra"]["example.com/tier"], json!(["gold"]));
    let refused = kapi.kubectl_config(&kapi.kubeconfig_for("banned", &Credential::Token(cases[12].1.clone())), &["auth", "whoami"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Unauthorized"), "{}", String::from_utf8_lossy(&refused.stderr));

    // Key rotation at the issuer: a token of the new kid is accepted once kapi fetches the
    // JWKS again (at once, or after the few seconds its rate limit allows); the old key's
    // tokens then fail.
    let (_, fetched_before) = issuer.stats();
    let new_kid = issuer.rotate();
    let rotated = issuer.sign("current", json!({}), base(json!({"sub": "rotated"})));
    let deadline = Instant::now() + Duration::from_secs(15);
    let cold = loop {
        let started = Instant::now();
        let status = review(&kapi, &rotated);
        if status["authenticated"] == true {
            assert_eq!(status["user"]["username"], "oidc:rotated");
            break started.elapsed();
        }
        assert!(Instant::now() < deadline, "the new key {new_kid} was never picked up: {status}");
        std::thread::sleep(Duration::from_millis(500));
    };
    let (_, fetched_after) = issuer.stats();
    assert!(fetched_after > fetched_before, "the JWKS was not fetched again");
    assert_eq!(request_status(&kapi, &rotated), 200);
    // The old key is gone from the JWKS: its kid is unknown now.
    assert_eq!(request_status(&kapi, &good), 401);
    // Warm keys: many tokens of the known kid fetch nothing more.
    let (_, settled) = issuer.stats();
    for _ in 0..5 {
        assert_eq!(request_status(&kapi, &rotated), 200);
    }
    let started = Instant::now();
    assert_eq!(review(&kapi, &rotated)["authenticated"], true);
    // TokenReviews through curl: the difference is the JWKS fetch (docs/perf.md).
    eprintln!("TokenReview with a key fetch: {cold:?}; with warm keys: {:?}", started.elapsed());
    assert_eq!(issuer.stats().1, settled, "a warm cache fetched keys");
}

#[test]
fn legacy_oidc_flags() {
    let issuer = OidcIssuer::start().expect("start the issuer");
    let ca = issuer.ca_file();
    let url = issuer.url("");
    let kapi = Kapi::start_with(&[
        "--oidc-issuer-url",
        &url,
        "--oidc-client-id",
        AUDIENCE,
        "--oidc-ca-file",
        ca.to_str().unwrap(),
        "--oidc-groups-claim",
        "groups",
        "--oidc-groups-prefix",
        "oidc:",
        "--oidc-required-claim",
        "hd=example.com",
    ])
    .expect("start kapi");
    let t = now();
    let claims = |extra: Value| {
        let mut c = json!({"iss": url, "aud": AUDIENCE, "sub": "jane", "iat": t, "exp": t + 600, "hd": "example.com"});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };
    // Default username claim sub, prefixed by the issuer URL and '#'.
    let status = review(&kapi, &issuer.sign("current", json!({}), claims(json!({"groups": "dev"})))); // a single group as a string
    assert_eq!(status["user"]["username"], format!("{url}#jane"), "{status}");
    assert_eq!(status["user"]["groups"], json!(["oidc:dev", "system:authenticated"]));
    let status = review(&kapi, &issuer.sign("current", json!({}), claims(json!({"hd": "evil.com"}))));
    assert_eq!(status["error"], "oidc: required claim hd value does not match. Got = evil.com, want = example.com");
    // Only RS256 by default.
    let status = review(&kapi, &issuer.sign("none", json!({}), claims(json!({}))));
    assert_eq!(status["error"], "oidc: verify token: oidc: id token signed with unsupported algorithm, expected [\"RS256\"] got \"none\"");
}

#[test]
fn bad_configurations_stop_start_up() {
    let bin = kapi_e2e::kapi_binary().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("authn.yaml");
    std::fs::write(
        &bad,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: http://issuer.example\n    audiences: []\n  claimMappings:\n    username:\n      expression: claims.email\n",
    )
    .unwrap();
    let unknown = dir.path().join("unknown.yaml");
    std::fs::write(
        &unknown,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: https://a\n    audience: x\n",
    )
    .unwrap();
    let bad_cel = dir.path().join("cel.yaml");
    std::fs::write(
        &bad_cel,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: https://a\n    audiences: [x]\n  claimMappings:\n    username:\n      claim: sub\n      prefix: ''\n  claimValidationRules:\n  - expression: 'claims.exp'\n",
    )
    .unwrap();
    let bad_path = bad.to_str().unwrap();
    for (flags, said) in [
        (vec!["--authentication-config", bad_path], "invalid authentication configuration: [jwt[0].issuer.url: Invalid value: \"http://issuer.example\": URL scheme must be https, jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required, jwt[0].claimMappings.username.expression: Invalid value: \"claims.email\": claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression]"),
        (vec!["--authentication-config", unknown.to_str().unwrap()], "strict decoding error: unknown field \"jwt[0].issuer.audience\""),
        (vec!["--authentication-config", bad_cel.to_str().unwrap()], "jwt[0].claimValidationRules[0].expression: Invalid value: \"claims.exp\": must evaluate to bool"),
        (vec!["--authentication-config", bad_path, "--oidc-issuer-url", "https://a"], "authentication-config file and oidc-* flags are mutually exclusive"),
        (vec!["--oidc-issuer-url", "https://a"], "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set"),
        (vec!["--oidc-issuer-url", "https://a", "--oidc-client-id", "x", "--oidc-signing-algs", "HS256"], "oidc: unsupported signing alg: \"HS256\""),
        (vec!["--oidc-issuer-url", "https://kubernetes.default.svc.cluster.local", "--oidc-client-id", "x"], "URL must not overlap with disallowed issuers"),
    ] {
        let mut cmd = std::process::Command::new(&bin);
        cmd.args(["--data-dir", dir.path().to_str().unwrap(), "--secure-port", "0"]).args(&flags);
        let out = kapi_e2e::run_with_timeout(&mut cmd, Duration::from_secs(20)).expect("run kapi");
        assert!(!out.status.success(), "{flags:?} started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{said} missing from {stderr}");
    }
}
