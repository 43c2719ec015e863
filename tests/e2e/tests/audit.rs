//! Audit logging end to end: a policy picks levels by namespace and resource, omits stages and
//! managedFields; the log has exactly the events asked for, line by line, with kube's fields
//! (auditID echoed as `Audit-Id`, user and impersonated user, objectRef, responseStatus,
//! request and response objects by level, authorization and admission annotations); a watch
//! writes ResponseStarted then ResponseComplete; the log rotates at --audit-log-maxsize.

use std::path::Path;
use std::time::Duration;

use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::{json, Value};

const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
omitManagedFields: true
rules:
- level: RequestResponse
  namespaces: ["audited"]
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Metadata
  namespaces: ["audited"]
- level: None
"#;

fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(|l| serde_json::from_str(l).expect("a JSON event per line")).collect()
}

fn start(dir: &Path, extra: &[&str]) -> (Kapi, std::path::PathBuf) {
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("policy");
    let log = dir.join("audit").join("audit.log");
    let (policy_arg, log_arg) = (policy.to_string_lossy().into_owned(), log.to_string_lossy().into_owned());
    let mut args = vec!["--audit-policy-file", policy_arg.as_str(), "--audit-log-path", log_arg.as_str()];
    args.extend_from_slice(extra);
    let kapi = Kapi::start_with(&args).expect("start kapi");
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "audited"}});
    assert_eq!(kapi.request(&Request::new("POST", "/api/v1/namespaces").json(&ns)).status, 201);
    (kapi, log)
}

#[test]
fn the_policy_decides_what_is_written_line_by_line() {
    let dir = tempfile::tempdir().expect("dir");
    let (kapi, log) = start(dir.path(), &[]);
    assert!(events(&log).is_empty(), "level None for everything outside `audited`: {:?}", events(&log));

    // RequestResponse: a created ConfigMap, with the request and response objects.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"k": "v"}});
    let created = kapi.request(&Request::new("POST", "/api/v1/namespaces/audited/configmaps?fieldManager=e2e").header("Audit-ID", "e2e-audit-1").json(&cm));
    assert_eq!(created.status, 201, "{}", created.raw);
    // Metadata: a Secret that does not exist (404), without bodies.
    let missing = kapi.request(&Request::get("/api/v1/namespaces/audited/secrets/nope"));
    assert_eq!(missing.status, 404);
    // Impersonation: the event names both users.
    let impersonated = kapi.request(&Request::get("/api/v1/namespaces/audited/secrets").header("Impersonate-User", "jane"));
    assert_eq!(impersonated.status, 403, "{}", impersonated.raw);

    let all = events(&log);
    assert_eq!(all.len(), 3, "{all:#?}");
    let create = &all[0];
    assert_eq!((create["kind"].as_str(), create["apiVersion"].as_str()), (Some("Event"), Some("audit.k8s.io/v1")));
    assert_eq!((create["level"].as_str(), create["stage"].as_str(), create["verb"].as_str()), (Some("RequestResponse"), Some("ResponseComplete"), Some("create")));
    assert_eq!(create["auditID"], "e2e-audit-1", "the client's Audit-ID");
    assert_eq!(create["requestURI"], "/api/v1/namespaces/audited/configmaps?fieldManager=e2e");
    assert_eq!(create["objectRef"], json!({"resource": "configmaps", "namespace": "audited", "name": "c1", "apiVersion": "v1"}), "named from the body");
    assert_eq!(create["responseStatus"], json!({"metadata": {}, "code": 201}));
    assert_eq!(create["requestObject"], cm);
    assert_eq!(create["responseObject"]["metadata"]["name"], "c1");
    assert!(create["responseObject"]["metadata"].get("managedFields").is_none(), "omitManagedFields: {create}");
    assert_eq!(create["annotations"]["authorization.k8s.io/decision"], "allow");
    assert!(create["user"]["groups"].as_array().into_iter().flatten().any(|g| g == "system:masters"), "{create}");
    assert_eq!(create["sourceIPs"], json!(["127.0.0.1"]));
    assert!(create["requestReceivedTimestamp"].as_str().is_some_and(|t| t.len() == "2026-11-25T07:00:00.000000Z".len()), "{create}");

    let get = &all[1];
    assert_eq!((get["level"].as_str(), get["verb"].as_str()), (Some("Metadata"), Some("get")));
    assert_eq!(get["responseStatus"]["code"], 404);
    assert_eq!(get["responseStatus"]["reason"], "NotFound");
    assert_eq!(get["responseStatus"]["message"], r#"secrets "nope" not found"#);
    assert!(get.get("requestObject").is_none() && get.get("responseObject").is_none(), "Metadata has no bodies");

    let list = &all[2];
    assert_eq!(list["impersonatedUser"]["username"], "jane");
    assert_eq!(list["annotations"]["authorization.k8s.io/decision"], "forbid");
    assert_eq!(list["responseStatus"]["code"], 403);

    // The answer carries the event's ID.
    let head = kapi.request(&Request::get("/api/v1/namespaces/audited/configmaps/c1").header("Audit-ID", "e2e-audit-2"));
    assert_eq!(head.status, 200);
    assert!(events(&log).iter().any(|e| e["auditID"] == "e2e-audit-2"));

    // A watch: ResponseStarted, then ResponseComplete when it ends.
    let before = events(&log).len();
    let out = kapi.kubectl(&["get", "--raw", "/api/v1/namespaces/audited/configmaps?watch=1&timeoutSeconds=1"]);
    assert!(out.status.success());
    let watch_events = wait_for(Duration::from_secs(5), || {
        let stages: Vec<String> = events(&log)[before..].iter().filter(|e| e["verb"] == "watch").map(|e| e["stage"].as_str().unwrap_or_default().to_owned()).collect();
        (stages.len() == 2).then_some(stages)
    });
    assert_eq!(watch_events, Some(vec!["ResponseStarted".to_owned(), "ResponseComplete".to_owned()]));
}

#[test]
fn admission_annotations_reach_the_audit_event() {
    let dir = tempfile::tempdir().expect("dir");
    let (kapi, log) = start(dir.path(), &[]);
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "no-big-maps"},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
                 "validations": [{"expression": "!has(object.data) || object.data.size() <= 1", "message": "at most one key"}]}});
    assert_eq!(kapi.request(&Request::new("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies").json(&policy)).status, 201);
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "no-big-maps"},
        "spec": {"policyName": "no-big-maps", "validationActions": ["Audit"]}});
    assert_eq!(kapi.request(&Request::new("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings").json(&binding)).status, 201);
    let _ = kapi.get_json("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings");
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"a": "1", "b": "2"}});
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/audited/configmaps").json(&big));
    assert_eq!(r.status, 201, "Audit does not refuse: {}", r.raw);
    let event = events(&log).into_iter().find(|e| e["objectRef"]["resource"] == "configmaps" && e["verb"] == "create").expect("the create's event");
    let failure = event["annotations"]["validation.policy.admission.k8s.io/validation_failure"].as_str().expect("kube's annotation");
    let failure: Value = serde_json::from_str(failure).expect("a JSON value");
    assert_eq!(failure[0]["policy"], "no-big-maps");
    assert_eq!(failure[0]["binding"], "no-big-maps");
    assert_eq!(failure[0]["message"], "at most one key");
}

#[test]
fn the_log_rotates_at_its_maximum_size() {
    let dir = tempfile::tempdir().expect("dir");
    let (kapi, log) = start(dir.path(), &["--audit-log-maxsize", "1", "--audit-log-maxbackup", "1"]);
    let payload = "x".repeat(60 * 1024);
    for i in 0..12 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("big-{i}")}, "data": {"payload": payload}});
        assert_eq!(kapi.request(&Request::new("POST", "/api/v1/namespaces/audited/configmaps").json(&cm)).status, 201);
    }
    let dir = log.parent().expect("dir");
    let mut names: Vec<String> = std::fs::read_dir(dir).expect("read").map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names.len(), 2, "the log and one backup: {names:?}");
    assert!(names.iter().any(|n| n.starts_with("audit-") && n.ends_with(".log")), "{names:?}");
    assert!(std::fs::metadata(&log).expect("log").len() <= 1024 * 1024);
}
