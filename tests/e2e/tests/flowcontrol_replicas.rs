//! API Priority and Fairness across replicas (2 kapi processes on one SQLite file, a real
//! nats-server): a FlowSchema or priority level created, changed or deleted through one replica
//! applies on the other within one second (the bound), as its answers' flow-control
//! headers show.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kapi_e2e::flowcontrol::{user_cert, FLOW_SCHEMAS, LEVELS};
use kapi_e2e::{Kapi, NatsServer, Request};
use serde_json::json;

const PROBE: &str = "/api/v1/namespaces/default/configmaps";

/// The bound the issue sets for a change to apply on every replica.
const APPLIES_WITHIN: Duration = Duration::from_secs(1);

fn uid(kapi: &Kapi, path: &str) -> String {
    kapi.get_json(path)["metadata"]["uid"].as_str().expect("uid").to_owned()
}

/// The (schema, level) UIDs `kapi`'s answer to `who` names.
fn pf_uids(kapi: &Kapi, who: &(PathBuf, PathBuf)) -> (String, String) {
    let answer = kapi.get_with_headers(PROBE, false, Some(who));
    let header = |name: &str| answer.headers.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned()).unwrap_or_default();
    (header("x-kubernetes-pf-flowschema-uid: "), header("x-kubernetes-pf-prioritylevel-uid: "))
}

/// How long until `kapi` answers `who` with `expected` (schema, level) UIDs; None past 10 s.
fn time_to_apply(kapi: &Kapi, who: &(PathBuf, PathBuf), since: Instant, expected: &(String, String)) -> Option<Duration> {
    while since.elapsed() < Duration::from_secs(10) {
        if pf_uids(kapi, who) == *expected {
            return Some(since.elapsed());
        }
    }
    None
}

#[test]
fn a_change_through_one_replica_applies_on_the_other_within_a_second() {
    let nats = NatsServer::start().expect("start nats-server");
    let url = nats.url();
    let args = ["--nats-url", url.as_str()];
    let a = Kapi::start_with(&args).expect("start the first replica");
    let b = a.start_replica(&args).expect("start the second replica");
    b.wait_ready(Duration::from_secs(30)).expect("ready");
    let out = a.kubectl(&["create", "clusterrolebinding", "mover", "--clusterrole=view", "--user=mover"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mover = user_cert(&a, "mover");
    let global = (uid(&a, &format!("{FLOW_SCHEMAS}/global-default")), uid(&a, &format!("{LEVELS}/global-default")));
    assert_eq!(pf_uids(&b, &mover), global, "a plain user starts in global-default");

    // A new level and schema for the user, created through A.
    for (collection, obj) in [
        (LEVELS, json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration", "metadata": {"name": "moved"},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}})),
        (FLOW_SCHEMAS, json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "moved"},
            "spec": {"priorityLevelConfiguration": {"name": "moved"}, "matchingPrecedence": 500,
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": "mover"}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}]}]}})),
    ] {
        let r = a.request(&Request::new("POST", collection).json(&obj));
        assert_eq!(r.status, 201, "{}", r.raw);
    }
    let created = Instant::now();
    let moved = (uid(&a, &format!("{FLOW_SCHEMAS}/moved")), uid(&a, &format!("{LEVELS}/moved")));
    let on_b = time_to_apply(&b, &mover, created, &moved).expect("the new schema never applied on the other replica");
    eprintln!("created through A, applied on B after {on_b:?}");
    assert!(on_b <= APPLIES_WITHIN, "created through A, applied on B only after {on_b:?}");

    // Sent to another level through B: A follows.
    let patch = json!({"spec": {"priorityLevelConfiguration": {"name": "global-default"}}});
    let r = b.request(&Request::new("PATCH", &format!("{FLOW_SCHEMAS}/moved")).raw("application/merge-patch+json", patch.to_string()));
    assert_eq!(r.status, 200, "{}", r.raw);
    let changed = Instant::now();
    let expected = (moved.0.clone(), global.1.clone());
    let on_a = time_to_apply(&a, &mover, changed, &expected).expect("the changed schema never applied on the first replica");
    eprintln!("changed through B, applied on A after {on_a:?}");
    assert!(on_a <= APPLIES_WITHIN, "changed through B, applied on A only after {on_a:?}");

    // Deleted through A: B sends the user back to global-default.
    let r = a.request(&Request::new("DELETE", &format!("{FLOW_SCHEMAS}/moved")));
    assert_eq!(r.status, 200, "{}", r.raw);
    let deleted = Instant::now();
    let on_b = time_to_apply(&b, &mover, deleted, &global).expect("the deletion never applied on the other replica");
    eprintln!("deleted through A, applied on B after {on_b:?}");
    assert!(on_b <= APPLIES_WITHIN, "deleted through A, applied on B only after {on_b:?}");
}
