//! Bearer tokens end to end: the static token file, service-account tokens from
//! `kubectl create token` (bound to a Pod, dead once it is gone), TokenReview, the issuer's
//! discovery documents, and every kind of bad token answered 401.

use std::time::Duration;

use kapi_auth::serviceaccount::{generate_signing_key_pem, BoundObject, IssueRequest, ObjectRef, SigningKey, TokenIssuer};
use kapi_e2e::{wait_for, Credential, Kapi, Request};
use serde_json::{json, Value};

fn ok(out: std::process::Output, what: &str) -> String {
    assert!(out.status.success(), "{what}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn whoami(kapi: &Kapi, cred: &Credential) -> Value {
    let r = kapi.request(
        &Request::new("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews")
            .json(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}))
            .as_user(cred),
    );
    assert_eq!(r.status, 201, "{}", r.raw);
    r.body["status"]["userInfo"].clone()
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default()
}

#[test]
fn static_tokens_from_the_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.csv");
    std::fs::write(&file, "s3cret-token,tina,uid-42,\"dev,ops\"\nother-token,otto,uid-43\n").unwrap();
    let kapi = Kapi::start_with(&["--token-auth-file", file.to_str().unwrap()]).expect("start kapi");
    let tina = Credential::Token("s3cret-token".into());
    assert_eq!(whoami(&kapi, &tina), json!({"username": "tina", "uid": "uid-42", "groups": ["dev", "ops", "system:authenticated"]}));
    let config = kapi.kubeconfig_for("tina", &tina);
    let table = ok(kapi.kubectl_config(&config, &["auth", "whoami"]), "whoami");
    assert!(table.contains("Username    tina"), "{table}");
    let r = kapi.request(&Request::get("/api/v1/namespaces").as_user(&Credential::Token("wrong".into())));
    assert_eq!((r.status, r.message()), (401, "Unauthorized"), "{}", r.raw);
}

#[test]
fn service_account_tokens_live_and_die_with_their_pod() {
    let kapi = Kapi::start().expect("start kapi");
    ok(kapi.kubectl(&["create", "serviceaccount", "robot"]), "create sa");
    ok(kapi.kubectl(&["run", "web", "--image=nginx", "--restart=Never"]), "create pod");
    ok(kapi.kubectl(&["create", "rolebinding", "robot-view", "--clusterrole=view", "--serviceaccount=default:robot"]), "bind");
    let token = ok(kapi.kubectl(&["create", "token", "robot", "--bound-object-kind=Pod", "--bound-object-name=web"]), "create token");
    let token = token.trim().to_owned();
    assert_eq!(token.split('.').count(), 3, "a compact JWS: {token}");
    let robot = Credential::Token(token.clone());
    let config = kapi.kubeconfig_for("robot", &robot);

    let who = whoami(&kapi, &robot);
    assert_eq!(who["username"], "system:serviceaccount:default:robot");
    assert_eq!(who["groups"], json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]));
    assert_eq!(who["extra"]["authentication.kubernetes.io/pod-name"], json!(["web"]));
    let sa_uid = kapi.get_json("/api/v1/namespaces/default/serviceaccounts/robot")["metadata"]["uid"].clone();
    assert_eq!(who["uid"], sa_uid);
    let table = ok(kapi.kubectl_config(&config, &["auth", "whoami"]), "whoami");
    assert!(table.contains("system:serviceaccount:default:robot"), "{table}");
    let pods = ok(kapi.kubectl_config(&config, &["get", "pods", "-o", "name"]), "robot lists pods");
    assert_eq!(pods.trim(), "pod/web");
    let denied = kapi.kubectl_config(&config, &["get", "secrets"]);
    assert!(String::from_utf8_lossy(&denied.stderr).contains(r#"User "system:serviceaccount:default:robot" cannot list resource "secrets""#));

    // TokenReview, as a webhook authenticator would ask.
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    let r = kapi.request(&Request::new("POST", "/apis/authentication.k8s.io/v1/tokenreviews").json(&review));
    assert_eq!(r.status, 201, "{}", r.raw);
    assert_eq!(r.body["status"]["authenticated"], true);
    assert_eq!(r.body["status"]["user"]["username"], "system:serviceaccount:default:robot");
    assert_eq!(r.body["status"]["audiences"], json!(["https://kubernetes.default.svc.cluster.local"]));
    let wrong_aud = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token, "audiences": ["vault"]}});
    let r = kapi.request(&Request::new("POST", "/apis/authentication.k8s.io/v1/tokenreviews").json(&wrong_aud));
    assert_eq!(r.body["status"]["authenticated"], Value::Null, "{}", r.raw);
    assert!(r.body["status"]["error"].is_string(), "{}", r.raw);

    // Deleting the pod kills the token.
    ok(kapi.kubectl(&["delete", "pod", "web", "--grace-period=0", "--force"]), "delete pod");
    let dead = wait_for(Duration::from_secs(5), || {
        let r = kapi.request(&Request::get("/api/v1/namespaces/default/pods").as_user(&robot));
        (r.status == 401).then_some(r)
    })
    .expect("the token outlived its pod");
    assert_eq!(dead.message(), "Unauthorized");
    let out = kapi.kubectl_config(&config, &["get", "pods"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Unauthorized"), "{}", String::from_utf8_lossy(&out.stderr));

    // A token bound to the service account alone lives on; TokenRequest validation.
    let plain = ok(kapi.kubectl(&["create", "token", "robot", "--duration=15m"]), "plain token");
    assert_eq!(whoami(&kapi, &Credential::Token(plain.trim().into()))["username"], "system:serviceaccount:default:robot");
    let short = kapi.kubectl(&["create", "token", "robot", "--duration=1m"]);
    assert!(
        String::from_utf8_lossy(&short.stderr).contains("spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"),
        "{}",
        String::from_utf8_lossy(&short.stderr)
    );
    let missing = kapi.kubectl(&["create", "token", "nobody"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains(r#"serviceaccounts "nobody" not found"#));
    // Recreating the service account (new uid) invalidates its old tokens.
    ok(kapi.kubectl(&["delete", "serviceaccount", "robot"]), "delete sa");
    ok(kapi.kubectl(&["create", "serviceaccount", "robot"]), "recreate sa");
    let r = wait_for(Duration::from_secs(5), || {
        let r = kapi.request(&Request::get("/version").as_user(&Credential::Token(plain.trim().into())));
        (r.status == 401).then_some(())
    });
    assert!(r.is_some(), "a token of a deleted service account still works");
}

/// Tokens signed with the server's own key but expired, for another audience or issuer, or
/// signed by another key: all 401 with nothing more said.
#[test]
fn bad_tokens_are_401() {
    let kapi = Kapi::start().expect("start kapi");
    ok(kapi.kubectl(&["create", "serviceaccount", "robot"]), "create sa");
    let sa = kapi.get_json("/api/v1/namespaces/default/serviceaccounts/robot");
    let sa_ref = ObjectRef::new("robot", sa["metadata"]["uid"].as_str().unwrap());
    let server_key = || SigningKey::load(kapi.pki_dir().join("sa.key")).expect("the server's signing key");
    let issue = |key: SigningKey, issuer: &str, audiences: &[&str], now: i64, expiration: i64| {
        TokenIssuer::new(issuer, key)
            .issue(&IssueRequest {
                namespace: "default".into(),
                service_account: sa_ref.clone(),
                bound_object: BoundObject::None,
                audiences: audiences.iter().map(|s| (*s).to_owned()).collect(),
                expiration_seconds: expiration,
                warn_after_seconds: None,
                now,
            })
            .expect("issue")
            .token
    };
    let issuer = "https://kubernetes.default.svc.cluster.local";
    let good = issue(server_key(), issuer, &[issuer], now(), 3600);
    assert_eq!(whoami(&kapi, &Credential::Token(good.clone()))["username"], "system:serviceaccount:default:robot");
    let other_key = SigningKey::from_pem(&generate_signing_key_pem().unwrap()).unwrap();
    let mut tampered = good.clone();
    tampered.insert(tampered.find('.').unwrap() + 5, 'x');
    let cases = [
        ("expired an hour ago", issue(server_key(), issuer, &[issuer], now() - 7200, 3600)),
        ("wrong audience", issue(server_key(), issuer, &["vault"], now(), 3600)),
        ("signed by another key", issue(other_key, issuer, &[issuer], now(), 3600)),
        ("tampered payload", tampered),
        ("unknown issuer", issue(server_key(), "https://elsewhere.example.com", &[issuer], now(), 3600)),
        ("not a JWT", "abc.def".to_owned()),
    ];
    for (what, token) in cases {
        for path in ["/api/v1/namespaces", "/healthz"] {
            let r = kapi.request(&Request::get(path).as_user(&Credential::Token(token.clone())));
            assert_eq!(r.status, 401, "{what} on {path}: {}", r.raw);
            assert_eq!(r.body, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}), "{what}");
        }
    }
    let log = kapi.log();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn issuer_discovery_documents() {
    let kapi = Kapi::start().expect("start kapi");
    let config = kapi.get_json("/.well-known/openid-configuration");
    assert_eq!(config["issuer"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(config["jwks_uri"], format!("{}/openid/v1/jwks", kapi.url()));
    assert_eq!(config["response_types_supported"], json!(["id_token"]));
    assert_eq!(config["subject_types_supported"], json!(["public"]));
    assert_eq!(config["id_token_signing_alg_values_supported"], json!(["ES256"]));
    let jwks = kapi.get_json("/openid/v1/jwks");
    let key = &jwks["keys"][0];
    assert_eq!((key["kty"].as_str(), key["alg"].as_str(), key["use"].as_str(), key["crv"].as_str()), (Some("EC"), Some("ES256"), Some("sig"), Some("P-256")));
    // The default policy shows them to service accounts only.
    let anon = kapi.request(&Request::get("/openid/v1/jwks").as_user(&Credential::Anonymous));
    assert_eq!(anon.status, 403, "{}", anon.raw);
}
