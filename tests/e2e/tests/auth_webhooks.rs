//! Webhook token authentication and the webhook authorizer (issue 23, "Done when" 3), against
//! a real HTTPS webhook process: a token only the webhook knows logs kubectl in as the user it
//! maps, cached for the TTL; a refused token is 401; a webhook outage fails the token. The
//! authorizer decides what RBAC does not allow, its matchConditions skip it where they say,
//! and its outage follows failurePolicy.

use std::time::Duration;

use kapi_e2e::{AuthWebhook, Credential, Kapi, Request};
use serde_json::Value;

fn count(webhook: &AuthWebhook, path: &str) -> usize {
    webhook.calls().iter().filter(|c| c["path"] == path).count()
}

#[test]
fn a_token_only_the_webhook_knows() {
    let mut webhook = AuthWebhook::start().expect("start the webhook");
    let config = webhook.kubeconfig("/authenticate", "webhook-secret");
    let kapi = Kapi::start_with(&[
        "--authentication-token-webhook-config-file",
        config.to_str().unwrap(),
        "--authentication-token-webhook-version",
        "v1",
        "--authentication-token-webhook-cache-ttl",
        "3s",
    ])
    .expect("start kapi");

    let alice = kapi.kubeconfig_for("alice", &Credential::Token("alice-token".into()));
    let whoami = kapi.kubectl(&["--kubeconfig", alice.to_str().unwrap(), "auth", "whoami", "-o", "json"]);
    assert!(whoami.status.success(), "{}", String::from_utf8_lossy(&whoami.stderr));
    let review: Value = serde_json::from_slice(&whoami.stdout).unwrap();
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], "alice");
    assert_eq!(user["uid"], "u-1");
    assert_eq!(user["groups"], serde_json::json!(["team-a", "system:authenticated"]));
    assert_eq!(user["extra"]["scopes"], serde_json::json!(["read"]));
    let calls = webhook.calls();
    let first = calls.iter().find(|c| c["path"] == "/authenticate").expect("the webhook was asked");
    assert_eq!(first["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(first["spec"]["token"], "alice-token");

    // client-go's request series count the webhook calls.
    let metrics = kapi.request(&Request::get("/metrics")).raw;
    let series = format!("rest_client_requests_total{{code=\"200\",host=\"127.0.0.1:{}\",method=\"POST\"}}", webhook.port);
    assert!(metrics.lines().any(|l| l.starts_with(&series)), "{series} missing");
    assert!(metrics.contains("rest_client_request_duration_seconds_bucket{host=\"127.0.0.1:"), "the latency histogram is missing");

    // Cached: the next requests within the TTL do not ask again; after it, they do.
    let asked = count(&webhook, "/authenticate");
    for _ in 0..3 {
        let r = kapi.request(&Request::get("/api").as_user(&Credential::Token("alice-token".into())));
        assert_eq!(r.status, 200, "{}", r.raw);
    }
    assert_eq!(count(&webhook, "/authenticate"), asked);
    std::thread::sleep(Duration::from_millis(3200));
    assert_eq!(kapi.request(&Request::get("/api").as_user(&Credential::Token("alice-token".into()))).status, 200);
    assert_eq!(count(&webhook, "/authenticate"), asked + 1);

    // Refused and unknown tokens are 401.
    for token in ["revoked-token", "nobody-knows"] {
        let r = kapi.request(&Request::get("/api").as_user(&Credential::Token(token.into())));
        assert_eq!(r.status, 401, "{token}: {}", r.raw);
    }
    // The TokenReview API answers through the webhook too.
    let review = kapi.request(&Request::new("POST", "/apis/authentication.k8s.io/v1/tokenreviews").json(&serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "revoked-token"}})));
    assert_eq!(review.status, 201, "{}", review.raw);
    assert_eq!(review.body["status"]["error"], "token revoked");

    // The webhook down: a token it has not vouched for recently fails (401), not anonymous.
    webhook.stop();
    std::thread::sleep(Duration::from_millis(3200));
    let r = kapi.request(&Request::get("/api").as_user(&Credential::Token("alice-token".into())));
    assert_eq!(r.status, 401, "{}", r.raw);
    webhook.restart().expect("restart the webhook");
    let back = kapi_e2e::wait_for(Duration::from_secs(10), || {
        (kapi.request(&Request::get("/api").as_user(&Credential::Token("alice-token".into()))).status == 200).then_some(())
    });
    assert!(back.is_some(), "the webhook back, the token works again");

    // A kubeconfig kapi cannot use stops start-up with the file named.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "clusters:\n- name: a\n  cluster:\n    server: http://127.0.0.1:1/x\n").unwrap();
    let mut cmd = std::process::Command::new(kapi_e2e::kapi_binary().unwrap());
    cmd.args(["--data-dir", dir.path().to_str().unwrap(), "--secure-port", "0", "--authentication-token-webhook-config-file", bad.to_str().unwrap()]);
    let out = kapi_e2e::run_with_timeout(&mut cmd, Duration::from_secs(20)).expect("run kapi");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--authentication-token-webhook-config-file") && said.contains("bad.yaml"), "{said}");
}

fn authorization_config(dir: &std::path::Path, webhook_kubeconfig: &std::path::Path, failure_policy: &str) -> std::path::PathBuf {
    let path = dir.join(format!("authz-{failure_policy}.yaml"));
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- type: Webhook\n  name: team-a-webhook\n  webhook:\n    timeout: 3s\n    subjectAccessReviewVersion: v1\n    matchConditionSubjectAccessReviewVersion: v1\n    failurePolicy: {failure_policy}\n    authorizedTTL: 1s\n    unauthorizedTTL: 1s\n    connectionInfo:\n      type: KubeConfigFile\n      kubeConfigFile: {}\n    matchConditions:\n    - expression: has(request.resourceAttributes) && request.resourceAttributes.namespace == 'team-a'\n- type: RBAC\n  name: rbac\n",
        webhook_kubeconfig.display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_webhook_authorizes_what_rbac_does_not() {
    let mut webhook = AuthWebhook::start().expect("start the webhook");
    let dir = tempfile::tempdir().unwrap();
    let config = authorization_config(dir.path(), &webhook.kubeconfig("/authorize", "webhook-secret"), "Deny");
    let kapi = Kapi::start_with(&["--authorization-config", config.to_str().unwrap()]).expect("start kapi");
    let alice = kapi.issue_client_cert("alice", &["team-a"]);
    let as_alice = |method: &str, path: &str| kapi.request(&Request::new(method, path).as_user(&alice));

    // RBAC gives alice nothing; the webhook lets her read team-a's configmaps.
    let r = as_alice("GET", "/api/v1/namespaces/team-a/configmaps");
    assert_eq!(r.status, 200, "{}", r.raw);
    let call = webhook.calls().into_iter().find(|c| c["path"] == "/authorize").expect("the webhook was asked");
    assert_eq!(call["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(call["spec"]["user"], "alice");
    assert_eq!(call["spec"]["groups"], serde_json::json!(["team-a", "system:authenticated"]));
    assert_eq!(call["spec"]["resourceAttributes"]["verb"], "list");
    // Its denial is final, with its reason.
    let denied = as_alice("DELETE", "/api/v1/namespaces/team-a/configmaps/x");
    assert_eq!(denied.status, 403, "{}", denied.raw);
    assert!(denied.message().contains("alice may not delete configmaps"), "{}", denied.message());
    // No opinion: RBAC decides (and refuses).
    assert_eq!(as_alice("GET", "/api/v1/namespaces/team-a/secrets").status, 403);
    // matchConditions: another namespace never reaches the webhook.
    let asked = count(&webhook, "/authorize");
    assert_eq!(as_alice("GET", "/api/v1/namespaces/other/configmaps").status, 403);
    assert_eq!(count(&webhook, "/authorize"), asked, "the webhook was skipped");

    // failurePolicy Deny: the webhook down forbids what it would have allowed.
    webhook.stop();
    std::thread::sleep(Duration::from_millis(1100));
    let r = as_alice("GET", "/api/v1/namespaces/team-a/configmaps");
    assert_eq!(r.status, 403, "{}", r.raw);
    drop(kapi);

    // failurePolicy NoOpinion: RBAC decides instead; system:masters never waits on the webhook.
    let config = authorization_config(dir.path(), &webhook.kubeconfig("/authorize", "webhook-secret"), "NoOpinion");
    let kapi = Kapi::start_with(&["--authorization-config", config.to_str().unwrap()]).expect("start kapi");
    let alice = kapi.issue_client_cert("alice", &["team-a"]);
    let r = kapi.request(&Request::new("GET", "/api/v1/namespaces/team-a/configmaps").as_user(&alice));
    assert_eq!(r.status, 403, "{}", r.raw);
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/team-a/configmaps")).status, 200);
}

#[test]
fn the_legacy_webhook_flags_and_bad_configurations() {
    let webhook = AuthWebhook::start().expect("start the webhook");
    let kubeconfig = webhook.kubeconfig("/authorize", "webhook-secret");
    let kapi = Kapi::start_with(&["--authorization-mode", "Webhook,RBAC", "--authorization-webhook-config-file", kubeconfig.to_str().unwrap()])
        .expect("start kapi");
    let alice = kapi.issue_client_cert("alice", &["team-a"]);
    let config = kapi.kubeconfig_for("alice", &alice);
    let get = kapi.kubectl(&["--kubeconfig", config.to_str().unwrap(), "get", "configmaps", "-n", "team-a"]);
    assert!(get.status.success(), "{}", String::from_utf8_lossy(&get.stderr));
    let call = webhook.calls().into_iter().find(|c| c["path"] == "/authorize").expect("the webhook was asked");
    // kube's legacy default version, which names the groups `group`.
    assert_eq!(call["apiVersion"], "authorization.k8s.io/v1beta1");
    assert_eq!(call["spec"]["group"], serde_json::json!(["team-a", "system:authenticated"]));
    let can_i = kapi.kubectl(&["--kubeconfig", config.to_str().unwrap(), "auth", "can-i", "delete", "configmaps", "-n", "team-a"]);
    assert_eq!(String::from_utf8_lossy(&can_i.stdout).trim(), "no - alice may not delete configmaps");
    drop(kapi);

    let bin = kapi_e2e::kapi_binary().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("authz.yaml");
    std::fs::write(
        &bad,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- type: Webhook\n  name: w\n  webhook:\n    timeout: 45s\n    subjectAccessReviewVersion: v1\n    failurePolicy: Deny\n    connectionInfo:\n      type: KubeConfigFile\n      kubeConfigFile: /nonexistent.yaml\n",
    )
    .unwrap();
    for (flags, said) in [
        (vec!["--authorization-config", bad.to_str().unwrap()], "authorizers[0].webhook.timeout: Invalid value: \"45s\": must be > 0s and <= 30s"),
        (vec!["--authorization-config", bad.to_str().unwrap(), "--authorization-mode", "RBAC"], "--authorization-config can not be specified"),
        (vec!["--authorization-mode", "Webhook"], "authorization-mode Webhook's authorization config file not passed"),
    ] {
        let mut cmd = std::process::Command::new(&bin);
        cmd.args(["--data-dir", dir.path().to_str().unwrap(), "--secure-port", "0"]).args(&flags);
        let out = kapi_e2e::run_with_timeout(&mut cmd, Duration::from_secs(20)).expect("run kapi");
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{said} missing from {stderr}");
    }
}
