//! Authentication as kube-apiserver does it: client certificates from the client CA, bearer
//! tokens, anonymous requests (on by default) as `system:anonymous`; bad credentials of any kind
//! are 401 `Unauthorized` with nothing about the reason, never a TLS failure or a 500.

use kapi_e2e::{Credential, Kapi, Request};

fn foreign(other: &Kapi) -> Credential {
    Credential::Cert { cert: other.pki_dir().join("admin.crt"), key: other.pki_dir().join("admin.key") }
}

fn assert_unauthorized(r: &kapi_e2e::HttpResponse, what: &str) {
    assert_eq!(r.status, 401, "{what}: {}", r.raw);
    assert_eq!(r.body["kind"], "Status", "{what}");
    assert_eq!(r.reason(), "Unauthorized", "{what}");
    assert_eq!(r.message(), "Unauthorized", "{what}: nothing about the reason leaks");
}

#[test]
fn certificates_anonymous_requests_and_bad_credentials() {
    let kapi = Kapi::start().expect("start kapi");
    let other = Kapi::start().expect("start a second kapi with its own CA");
    let ok = kapi.request(&Request::get("/api/v1/namespaces"));
    assert_eq!(ok.status, 200, "{}", ok.raw);

    // No credentials: the anonymous user, which the default policy lets see health and version.
    let anon = kapi.request(&Request::get("/api/v1/namespaces").as_user(&Credential::Anonymous));
    assert_eq!(anon.status, 403, "{}", anon.raw);
    assert!(anon.message().contains(r#"User "system:anonymous" cannot list resource "namespaces""#), "{}", anon.raw);
    let health = kapi.request(&Request::get("/healthz").as_user(&Credential::Anonymous));
    assert_eq!(health.status, 200, "{}", health.raw);

    // Bad credentials are never anonymous: 401 on every path, health included.
    for (what, cred) in [
        ("a certificate from another CA", foreign(&other)),
        ("an unknown bearer token", Credential::Token("not-a-token".into())),
        ("a malformed JWT", Credential::Token("eyJhbGciOiJSUzI1NiJ9.e30.c2ln".into())),
    ] {
        for path in ["/api/v1/namespaces", "/readyz", "/version"] {
            assert_unauthorized(&kapi.request(&Request::get(path).as_user(&cred)), &format!("{what} on {path}"));
        }
    }
}

#[test]
fn anonymous_auth_false_answers_401_without_credentials() {
    let kapi = Kapi::start_with(&["--anonymous-auth=false"]).expect("start kapi");
    for path in ["/api/v1/namespaces", "/healthz"] {
        assert_unauthorized(&kapi.request(&Request::get(path).as_user(&Credential::Anonymous)), path);
    }
    let ok = kapi.request(&Request::get("/api/v1/namespaces"));
    assert_eq!(ok.status, 200, "{}", ok.raw);
}

#[test]
fn authorization_modes_apply_in_order() {
    let deny = Kapi::start_with(&["--authorization-mode=AlwaysDeny"]).expect("start kapi");
    let alice = deny.issue_client_cert("alice", &[]);
    let r = deny.request(&Request::get("/api/v1/pods").as_user(&alice));
    assert_eq!(r.status, 403, "{}", r.raw);
    assert_eq!(r.message(), r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope: Everything is forbidden."#);
    // system:masters is allowed whatever the modes say.
    assert_eq!(deny.request(&Request::get("/api/v1/pods")).status, 200);

    let allow = Kapi::start_with(&["--authorization-mode=AlwaysAllow"]).expect("start kapi");
    let alice = allow.issue_client_cert("alice", &[]);
    assert_eq!(allow.request(&Request::get("/api/v1/pods").as_user(&alice)).status, 200);

    let bad = Kapi::start_with(&["--authorization-mode=Webhook"]);
    assert!(bad.is_err(), "an unsupported mode is refused at start");
}

/// A CA and a client certificate signed by it, made with openssl: (ca.pem, (cert, key)).
fn front_proxy_pki(dir: &std::path::Path, cn: &str) -> (std::path::PathBuf, Credential) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).output().expect("openssl runs");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let p = |name: &str| dir.join(name).display().to_string();
    if !dir.join("ca.pem").exists() {
        run(&["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", &p("ca.key"), "-out", &p("ca.pem"),
              "-days", "1", "-subj", "/CN=front-proxy-ca"]);
        std::fs::write(dir.join("client.ext"), "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n").unwrap();
    }
    let (key, csr, crt) = (p(&format!("{cn}.key")), p(&format!("{cn}.csr")), p(&format!("{cn}.crt")));
    run(&["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", &key, "-out", &csr, "-subj", &format!("/CN={cn}")]);
    run(&["x509", "-req", "-in", &csr, "-CA", &p("ca.pem"), "-CAkey", &p("ca.key"), "-CAcreateserial", "-days", "1", "-out", &crt,
          "-extfile", &p("client.ext")]);
    (dir.join("ca.pem"), Credential::Cert { cert: crt.into(), key: key.into() })
}

#[test]
fn front_proxies_assert_users_in_request_headers() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, proxy) = front_proxy_pki(dir.path(), "front-proxy-client");
    let (_, stranger) = front_proxy_pki(dir.path(), "someone-else");
    let kapi = Kapi::start_with(&[
        "--requestheader-client-ca-file",
        ca.to_str().unwrap(),
        "--requestheader-allowed-names=front-proxy-client",
    ])
    .expect("start kapi");
    let ssr = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let review = |cred: &Credential, headers: &[(&str, &str)]| {
        let mut req = Request::new("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews").json(&ssr).as_user(cred);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        kapi.request(&req)
    };
    let r = review(&proxy, &[("X-Remote-User", "frank"), ("X-Remote-Group", "ops"), ("X-Remote-Extra-Scopes", "view")]);
    assert_eq!(r.status, 201, "{}", r.raw);
    assert_eq!(
        r.body["status"]["userInfo"],
        serde_json::json!({"username": "frank", "groups": ["ops", "system:authenticated"], "extra": {"scopes": ["view"]}})
    );
    // The proxy's certificate alone names nobody; one with a CN not allowed is refused.
    assert_unauthorized(&review(&proxy, &[]), "proxy certificate without a user header");
    assert_unauthorized(&review(&stranger, &[("X-Remote-User", "frank")]), "a CN outside --requestheader-allowed-names");
    // Headers from a client of the ordinary client CA mean nothing: it is the admin.
    let admin = kapi.request(&Request::new("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews").json(&ssr).header("X-Remote-User", "frank"));
    assert_eq!(admin.body["status"]["userInfo"]["username"], "kapi-admin", "{}", admin.raw);
}
