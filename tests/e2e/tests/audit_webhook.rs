//! The audit webhook backend (issue 17) against a real HTTPS webhook process: events arrive as
//! audit.k8s.io/v1 EventLists, in batches after `--audit-webhook-batch-max-wait` or at once in
//! blocking mode, beside the log when both are given; a webhook that is down costs the requests
//! nothing and its lost events are counted in apiserver_audit_error_total.

use std::time::Duration;

use kapi_e2e::{wait_for, AuthWebhook, Kapi, Request};
use serde_json::{json, Value};

const POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n- level: Metadata\n  resources:\n  - group: \"\"\n    resources: [\"configmaps\"]\n- level: None\n";

fn audit_events(webhook: &AuthWebhook) -> Vec<Value> {
    webhook.calls().into_iter().filter(|c| c["path"] == "/audit").map(|c| c["event"].clone()).collect()
}

fn create_configmap(kapi: &Kapi, name: &str) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}});
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/default/configmaps").json(&cm));
    assert_eq!(r.status, 201, "{}", r.raw);
}

fn completed(events: &[Value], name: &str) -> Option<Value> {
    events.iter().find(|e| e["objectRef"]["name"] == name && e["stage"] == "ResponseComplete" && e["verb"] == "create").cloned()
}

#[test]
fn audit_events_reach_the_webhook() {
    let mut webhook = AuthWebhook::start().expect("start the webhook");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let kubeconfig = webhook.kubeconfig("/audit", "webhook-secret");
    let log = dir.path().join("audit.log");
    let kapi = Kapi::start_with(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-log-path",
        log.to_str().unwrap(),
        "--audit-webhook-config-file",
        kubeconfig.to_str().unwrap(),
        "--audit-webhook-batch-max-wait",
        "500ms",
        "--audit-webhook-initial-backoff",
        "100ms",
    ])
    .expect("start kapi");

    // Batch mode: the event arrives within the batch wait, the same as in the log.
    create_configmap(&kapi, "batched");
    let event = wait_for(Duration::from_secs(10), || completed(&audit_events(&webhook), "batched")).expect("the event reached the webhook");
    assert_eq!(event["kind"], "Event");
    assert_eq!(event["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(event["level"], "Metadata");
    assert_eq!(event["responseStatus"]["code"], 201);
    assert!(event["user"]["username"].as_str().is_some_and(|u| !u.is_empty()));
    let logged: Vec<Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let in_log = completed(&logged, "batched").expect("the log has it too");
    assert_eq!(in_log["auditID"], event["auditID"]);
    assert!(webhook.calls().iter().all(|c| c["path"] != "/audit" || c["apiVersion"] == "audit.k8s.io/v1"));

    // The webhook down: requests go on; the lost events are counted.
    webhook.stop();
    create_configmap(&kapi, "lost");
    let errors = wait_for(Duration::from_secs(15), || {
        let metrics = kapi.request(&Request::get("/metrics")).raw;
        metrics
            .lines()
            .find(|l| l.starts_with("apiserver_audit_error_total{plugin=\"webhook\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| *v >= 1.0)
    });
    assert!(errors.is_some(), "apiserver_audit_error_total counts the lost events");
    drop(kapi);

    // Blocking mode: the event is at the webhook when the request returns.
    webhook.restart().expect("restart the webhook");
    let kapi = Kapi::start_with(&[
        "--audit-policy-file",
        policy.to_str().unwrap(),
        "--audit-webhook-config-file",
        kubeconfig.to_str().unwrap(),
        "--audit-webhook-mode",
        "blocking",
    ])
    .expect("start kapi");
    create_configmap(&kapi, "blocking");
    assert!(completed(&audit_events(&webhook), "blocking").is_some(), "the event was sent before the answer");
}
