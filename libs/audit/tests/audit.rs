//! The policy decides as kube's evaluator does; the log writes one event per line and rotates
//! at its size limit, keeping the newest backups.

use kapi_audit::event::micro_time;
use kapi_audit::{Level, LogBackend, LogOptions, Mode, Policy, RequestAttributes, Stage};
use serde_json::json;

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["configmaps"]
    resourceNames: ["audited"]
- level: Request
  verbs: ["create", "update"]
  namespaces: ["prod"]
  omitStages: ["ResponseStarted"]
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/log", "*/status"]
- level: Metadata
  omitManagedFields: true
"#;

fn request<'a>(verb: &'a str, resource: &'a str, subresource: &'a str, namespace: &'a str, name: &'a str) -> RequestAttributes<'a> {
    RequestAttributes { user: "alice", verb, resource_request: true, resource, subresource, namespace, name, ..RequestAttributes::default() }
}

#[test]
fn the_first_matching_rule_decides() {
    let policy = Policy::parse(POLICY).expect("policy");
    let proxy = RequestAttributes { user: "system:kube-proxy", verb: "get", resource_request: true, resource: "pods", ..RequestAttributes::default() };
    assert_eq!(policy.decide(&proxy).level, Level::None);
    let health = RequestAttributes { user: "alice", verb: "get", path: "/healthz/etcd", ..RequestAttributes::default() };
    assert_eq!(policy.decide(&health).level, Level::None);
    assert_eq!(policy.decide(&request("get", "configmaps", "", "default", "audited")).level, Level::RequestResponse);
    assert_eq!(policy.decide(&request("get", "configmaps", "", "default", "other")).level, Level::Metadata);
    let prod = policy.decide(&request("create", "secrets", "", "prod", "s"));
    assert_eq!(prod.level, Level::Request);
    assert_eq!(prod.omit_stages, [Stage::RequestReceived, Stage::ResponseStarted], "the policy's and the rule's");
    assert!(!prod.omit_managed_fields);
    // A rule naming `pods/log` is for the subresource only; `*/status` for any status.
    assert_eq!(policy.decide(&request("get", "pods", "log", "default", "p")).level, Level::Metadata);
    assert_eq!(policy.decide(&request("update", "deployments", "status", "default", "d")).level, Level::Metadata);
    assert!(policy.decide(&request("get", "pods", "", "default", "p")).omit_managed_fields, "the last rule's omitManagedFields");
}

#[test]
fn bad_policies_are_refused() {
    assert!(Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n").expect_err("no rules").to_string().contains("0 rules"));
    assert!(Policy::parse("apiVersion: v1\nkind: ConfigMap\n").is_err());
    assert!(Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n").is_err(), "unknown level");
}

#[tokio::test]
async fn the_log_rotates_at_its_size_and_keeps_the_newest_backups() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("audit.log");
    let log = LogBackend::start(LogOptions { path: path.clone(), max_size_mb: 1, max_backups: 2, max_age_days: 0, mode: Mode::Blocking }).expect("log");
    let big = "x".repeat(100 * 1024);
    for i in 0..35 {
        log.write(&json!({"kind": "Event", "i": i, "pad": big})).await.expect("write");
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.path()).expect("read").map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names.len(), 3, "the log and two backups: {names:?}");
    assert!(names.iter().filter(|n| n.starts_with("audit-") && n.ends_with(".log")).count() == 2, "{names:?}");
    let current = std::fs::read_to_string(&path).expect("log");
    assert!(current.len() <= 1024 * 1024);
    let lines: Vec<serde_json::Value> = current.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!(lines.last().expect("last")["i"], 34, "the newest event is in the current file");
}

#[test]
fn micro_time_is_rfc3339_with_microseconds() {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(1_764_054_000_123_456_789).expect("time");
    assert_eq!(micro_time(t), "2025-11-25T07:00:00.123456Z");
}
