//! The `Dangling` condition of FlowSchemas (`--enable-priority-and-fairness`): the config
//! consumer marks every stored schema "False" (`Found`) while its priority level exists and
//! "True" (`NotFound`) while it does not, in kube's words and under kube's field manager; a
//! dangling schema classifies nothing (requests fall through to the next schema that matches)
//! until its level is created.

use std::path::PathBuf;
use std::time::Duration;

use kapi_e2e::flowcontrol::{FLOW_SCHEMAS, LEVELS, LEVEL_HEADER, SCHEMA_HEADER, user_cert};
use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::{json, Value};

const MANAGER: &str = "api-priority-and-fairness-config-consumer-v1";

/// kube's bootstrap FlowSchemas with the level each names.
const BOOTSTRAP: [(&str, &str); 11] = [
    ("exempt", "exempt"),
    ("probes", "exempt"),
    ("system-leader-election", "leader-election"),
    ("system-node-high", "node-high"),
    ("system-nodes", "system"),
    ("kube-controller-manager", "workload-high"),
    ("kube-scheduler", "workload-high"),
    ("kube-system-service-accounts", "workload-high"),
    ("service-accounts", "workload-low"),
    ("global-default", "global-default"),
    ("catch-all", "catch-all"),
];

fn get(kapi: &Kapi, path: &str) -> Option<Value> {
    let r = kapi.request(&Request::get(path));
    (r.status == 200).then_some(r.body)
}

fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().unwrap_or_default().to_owned()
}

/// The schema's `Dangling` condition, if it has one.
fn dangling(schema: &Value) -> Option<Value> {
    schema["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Dangling").cloned()
}

/// Whether `schema` carries kube's condition for its level being there (`found`) or not.
fn says(schema: &Value, level: &str, found: bool) -> bool {
    let Some(c) = dangling(schema) else { return false };
    let message = if found {
        format!("This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" and it exists")
    } else {
        format!("This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" but there is no such object")
    };
    let (status, reason) = if found { ("False", "Found") } else { ("True", "NotFound") };
    c["status"] == status && c["reason"] == reason && c["message"] == message.as_str() && c["lastTransitionTime"].as_str().is_some_and(|t| !t.is_empty())
}

/// The schema once it says `found` about `level`, within `timeout`.
fn wait_says(kapi: &Kapi, name: &str, level: &str, found: bool, timeout: Duration) -> Value {
    let path = format!("{FLOW_SCHEMAS}/{name}");
    let seen = wait_for(timeout, || get(kapi, &path).filter(|s| says(s, level, found)));
    seen.unwrap_or_else(|| panic!("{name} never said found={found} about {level:?}: {:?}", get(kapi, &path)))
}

/// The (schema UID, level UID) headers of a GET as `cert`.
fn classified(kapi: &Kapi, cert: &(PathBuf, PathBuf), path: &str) -> (String, String) {
    let answer = kapi.get_with_headers(path, false, Some(cert));
    let header = |name: &str| answer.headers.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or_default().to_owned();
    (header(SCHEMA_HEADER), header(LEVEL_HEADER))
}

#[test]
fn schemas_say_whether_their_level_exists_and_dangling_ones_classify_nothing() {
    let kapi = Kapi::start_with(&["--enable-priority-and-fairness"]).expect("start kapi");

    // Every bootstrap schema is stored and marked Found, by the consumer's apply of status.
    let all = wait_for(Duration::from_secs(20), || BOOTSTRAP.iter().all(|(name, _)| get(&kapi, &format!("{FLOW_SCHEMAS}/{name}")).is_some()).then_some(()));
    assert!(all.is_some(), "the bootstrap FlowSchemas were not stored");
    for (name, level) in BOOTSTRAP {
        let schema = wait_says(&kapi, name, level, true, Duration::from_secs(5));
        let entries = schema["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
        let ours = entries.iter().find(|e| e["manager"] == MANAGER).unwrap_or_else(|| panic!("no {MANAGER} in {entries:?}"));
        assert_eq!((ours["operation"].as_str(), ours["subresource"].as_str()), (Some("Apply"), Some("status")), "{ours}");
        assert!(ours["fieldsV1"].to_string().contains("k:{\\\"type\\\":\\\"Dangling\\\"}"), "owns the condition: {ours}");
    }

    // Written once: a settled condition is not rewritten (no write loop, no fight with the producer).
    let before = get(&kapi, &format!("{FLOW_SCHEMAS}/global-default")).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let after = get(&kapi, &format!("{FLOW_SCHEMAS}/global-default")).unwrap();
    assert_eq!(before["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"], "global-default keeps being written");

    // A schema for alice naming a level that does not exist yet.
    let out = kapi.kubectl(&["create", "clusterrolebinding", "alice", "--clusterrole=view", "--user=alice"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let alice = user_cert(&kapi, "alice");
    let schema = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "alices"},
        "spec": {"priorityLevelConfiguration": {"name": "alice-level"}, "matchingPrecedence": 500, "distinguisherMethod": {"type": "ByUser"},
                 "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}]}]}});
    let r = kapi.request(&Request::new("POST", FLOW_SCHEMAS).json(&schema));
    assert_eq!(r.status, 201, "{}", r.raw);
    let created = r.body;
    let dangling_schema = wait_says(&kapi, "alices", "alice-level", false, Duration::from_secs(5));
    assert_eq!(uid(&dangling_schema), uid(&created));
    assert_eq!(dangling_schema["spec"], created["spec"], "a status write leaves the spec alone");

    // alice's requests fall through to global-default, the next schema that matches her.
    let global = (uid(&get(&kapi, &format!("{FLOW_SCHEMAS}/global-default")).unwrap()), uid(&get(&kapi, &format!("{LEVELS}/global-default")).unwrap()));
    let path = "/api/v1/namespaces/default/configmaps";
    assert_eq!(classified(&kapi, &alice, path), global, "a dangling schema must not classify");

    // The level is created: the schema is Found, then alice's requests match it.
    let level = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration", "metadata": {"name": "alice-level"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}});
    let r = kapi.request(&Request::new("POST", LEVELS).json(&level));
    assert_eq!(r.status, 201, "{}", r.raw);
    let level_uid = uid(&r.body);
    let found = wait_says(&kapi, "alices", "alice-level", true, Duration::from_secs(5));
    let flipped = |c: &Value| c["lastTransitionTime"].as_str().unwrap_or_default().to_owned();
    assert!(flipped(&dangling(&found).unwrap()) >= flipped(&dangling(&dangling_schema).unwrap()), "the transition time moves on");
    let mine = (uid(&created), level_uid);
    let matched = wait_for(Duration::from_secs(5), || (classified(&kapi, &alice, path) == mine).then_some(()));
    assert!(matched.is_some(), "alice's requests still go to {:?}, not {mine:?}", classified(&kapi, &alice, path));

    // Deleted again: dangling again, and alice falls through again.
    let r = kapi.request(&Request::new("DELETE", &format!("{LEVELS}/alice-level")));
    assert_eq!(r.status, 200, "{}", r.raw);
    wait_says(&kapi, "alices", "alice-level", false, Duration::from_secs(5));
    let fell = wait_for(Duration::from_secs(5), || (classified(&kapi, &alice, path) == global).then_some(()));
    assert!(fell.is_some(), "alice's requests still go to {:?}", classified(&kapi, &alice, path));

    // A user's status write that drops the condition: the consumer puts it back, and the
    // user's own condition of another type survives its apply.
    let patch = json!({"status": {"conditions": [{"type": "Reviewed", "status": "True", "reason": "ByHand", "message": "checked", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    let r = kapi.request(&Request::new("PATCH", &format!("{FLOW_SCHEMAS}/alices/status")).raw("application/merge-patch+json", patch.to_string()));
    assert_eq!(r.status, 200, "{}", r.raw);
    let back = wait_says(&kapi, "alices", "alice-level", false, Duration::from_secs(5));
    let types: Vec<&str> = back["status"]["conditions"].as_array().unwrap().iter().filter_map(|c| c["type"].as_str()).collect();
    assert!(types.contains(&"Reviewed") && types.contains(&"Dangling"), "{types:?}");
}
