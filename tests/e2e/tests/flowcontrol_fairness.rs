//! Fairness by distinguisher (`--enable-priority-and-fairness`): flows of one priority level
//! share its seats evenly, whatever number of concurrent clients each brings. A level of two
//! seats serves slow LISTs of large ConfigMaps; one user drives three times the clients of the
//! other, and over a fixed window both get about the same number of answers. `ByUser` makes a
//! user one flow whatever namespaces they act in; `ByNamespace` makes each namespace one flow,
//! so one user acting in two namespaces is two flows. Without a distinguisher all of them are
//! one flow, served first come first served: the busiest client pool gets the most.
//!
//! Counts are compared as ratios over windows of several seconds, so a loaded machine slows the
//! test down without changing its outcome.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kapi_e2e::flowcontrol::{FLOW_SCHEMAS, LEVELS, LEVEL_HEADER, user_cert};
use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::json;

/// The level's queues. One queue per flow (handSize 1): kube's fair queuing is fair among
/// queues, and with a larger hand a flow with many requests waiting spreads over its whole hand
/// while one with few fills fewer queues.
const QUEUES: u64 = 128;
const NAMESPACES: [&str; 3] = ["ns-a", "ns-b", "ns-c"];
/// Before counting, the queues fill; then answers are counted for the window.
const WARMUP: Duration = Duration::from_secs(2);
const WINDOW: Duration = Duration::from_secs(10);

/// kapi's flow hash (FNV-1a of schema, a zero byte, distinguisher), to check beforehand that
/// the test's flows land in distinct queues: flows that share a queue share its share.
fn queue_of(schema: &str, distinguisher: &str) -> u64 {
    let bytes = schema.bytes().chain(std::iter::once(0)).chain(distinguisher.bytes());
    bytes.fold(0xcbf2_9ce4_8422_2325u64, |hash, b| (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)) % QUEUES
}

/// One pool of clients: who, where, how many at once.
struct Pool<'a> {
    cert: &'a (PathBuf, PathBuf),
    namespace: &'static str,
    clients: usize,
}

/// Runs every pool's clients in a loop of LISTs of their namespace's ConfigMaps for
/// WARMUP + WINDOW; answers per pool the LISTs answered by `level` that completed in the window.
fn drive(kapi: &Kapi, level: &str, pools: &[Pool<'_>]) -> Vec<u32> {
    let start = Instant::now();
    let (from, until) = (start + WARMUP, start + WARMUP + WINDOW);
    std::thread::scope(|s| {
        let handles: Vec<Vec<_>> = pools
            .iter()
            .map(|pool| {
                (0..pool.clients)
                    .map(|_| {
                        s.spawn(move || {
                            let path = format!("/api/v1/namespaces/{}/configmaps", pool.namespace);
                            let mut done = 0u32;
                            while Instant::now() < until {
                                let answer = kapi.get_with_headers(&path, false, Some(pool.cert));
                                let at = Instant::now();
                                let ours = answer.headers.lines().any(|l| l.strip_prefix(LEVEL_HEADER).map(str::trim) == Some(level));
                                assert!(answer.status == 200 && ours, "LIST {path}: {} {}", answer.status, answer.headers);
                                if at >= from && at <= until {
                                    done += 1;
                                }
                            }
                            done
                        })
                    })
                    .collect()
            })
            .collect();
        handles.into_iter().map(|pool| pool.into_iter().map(|h| h.join().expect("client thread")).sum()).collect()
    })
}

/// Whether `a` and `b` are within 20% of the larger.
fn even(a: u32, b: u32) -> bool {
    f64::from(a.abs_diff(b)) <= 0.2 * f64::from(a.max(b))
}

fn set_distinguisher(kapi: &Kapi, method: serde_json::Value) {
    let patch = json!({"spec": {"distinguisherMethod": method}});
    let r = kapi.request(&Request::new("PATCH", &format!("{FLOW_SCHEMAS}/fair")).raw("application/merge-patch+json", patch.to_string()));
    assert_eq!(r.status, 200, "{}", r.raw);
    // The consumer follows the change in well under a second; the warm-up covers the rest.
    std::thread::sleep(Duration::from_secs(1));
}

#[test]
fn flows_share_a_level_evenly_by_user_or_by_namespace() {
    let flows_by_user = [queue_of("fair", "alice"), queue_of("fair", "bob")];
    let flows_by_namespace: Vec<u64> = NAMESPACES.iter().map(|ns| queue_of("fair", ns)).collect();
    assert_ne!(flows_by_user[0], flows_by_user[1], "pick other user names: theirs share a queue");
    assert!(flows_by_namespace.iter().enumerate().all(|(i, q)| !flows_by_namespace[i + 1..].contains(q)), "pick other namespaces");

    // 20 seats; the level's 20 shares of 265 make 2, and it may not borrow more.
    let kapi = Kapi::start_with(&["--enable-priority-and-fairness", "--max-requests-inflight", "10", "--max-mutating-requests-inflight", "10"])
        .expect("start kapi");
    let level = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration", "metadata": {"name": "fair"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 20, "lendablePercent": 0, "borrowingLimitPercent": 0,
                 "limitResponse": {"type": "Queue", "queuing": {"queues": QUEUES, "handSize": 1, "queueLengthLimit": 50}}}}});
    let schema = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "fair"},
        "spec": {"priorityLevelConfiguration": {"name": "fair"}, "matchingPrecedence": 500, "distinguisherMethod": {"type": "ByUser"},
                 "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}, {"kind": "User", "user": {"name": "bob"}}],
                            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}]}]}});
    let mut level_uid = String::new();
    for (collection, obj) in [(LEVELS, &level), (FLOW_SCHEMAS, &schema)] {
        let r = kapi.request(&Request::new("POST", collection).json(obj));
        assert_eq!(r.status, 201, "{}", r.raw);
        if collection == LEVELS {
            level_uid = r.body["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
        }
    }
    for user in ["alice", "bob"] {
        let out = kapi.kubectl(&["create", "clusterrolebinding", user, "--clusterrole=view", &format!("--user={user}")]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // Each namespace's LIST is 2.5 MB: slow enough that requests queue, and every pool keeps
    // some waiting while its clients start their next request.
    for ns in NAMESPACES {
        let r = kapi.request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})));
        assert_eq!(r.status, 201, "{}", r.raw);
        for i in 0..20 {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("big-{i}")}, "data": {"payload": "x".repeat(128 * 1024)}});
            let r = kapi.request(&Request::new("POST", &format!("/api/v1/namespaces/{ns}/configmaps")).json(&cm));
            assert_eq!(r.status, 201, "{}", r.raw);
        }
    }
    let (alice, bob) = (user_cert(&kapi, "alice"), user_cert(&kapi, "bob"));
    let applied = wait_for(Duration::from_secs(5), || {
        let answer = kapi.get_with_headers("/api/v1/namespaces/ns-a/configmaps/big-0", false, Some(&alice));
        answer.headers.lines().any(|l| l.strip_prefix(LEVEL_HEADER).map(str::trim) == Some(level_uid.as_str())).then_some(())
    });
    assert!(applied.is_some(), "alice's requests never reached the fair level");

    // alice: 12 clients in ns-a and 4 in ns-c; bob: 4 in ns-b.
    let pools = [
        Pool { cert: &alice, namespace: "ns-a", clients: 12 },
        Pool { cert: &bob, namespace: "ns-b", clients: 4 },
        Pool { cert: &alice, namespace: "ns-c", clients: 4 },
    ];

    // ByUser: two flows. alice's 16 clients get what bob's 4 get; her ns-c traffic is in her
    // flow (as a flow of its own it would make her share two thirds).
    let by_user = drive(&kapi, &level_uid, &pools);
    let (alice_total, bob_total) = (by_user[0] + by_user[2], by_user[1]);
    eprintln!("ByUser, {WINDOW:?}: alice {alice_total} (ns-a {}, ns-c {}), bob {bob_total}", by_user[0], by_user[2]);
    assert!(bob_total >= 10, "too few answers to compare: {by_user:?}");
    assert!(even(alice_total, bob_total), "alice (16 clients) {alice_total} vs bob (4 clients) {bob_total}: not within 20%");

    // ByNamespace: three flows, whoever acts in them; alice's two namespaces are two flows.
    set_distinguisher(&kapi, json!({"type": "ByNamespace"}));
    let by_namespace = drive(&kapi, &level_uid, &pools);
    eprintln!("ByNamespace, {WINDOW:?}: ns-a {} (12 clients), ns-b {} (4), ns-c {} (4)", by_namespace[0], by_namespace[1], by_namespace[2]);
    assert!(by_namespace.iter().all(|n| *n >= 7), "too few answers to compare: {by_namespace:?}");
    for (i, j) in [(0, 1), (0, 2), (1, 2)] {
        assert!(even(by_namespace[i], by_namespace[j]), "{} vs {}: {by_namespace:?} not within 20%", NAMESPACES[i], NAMESPACES[j]);
    }

    // No distinguisher: one flow, one queue, first come first served; ns-a's 12 clients get
    // about three times what ns-b's 4 get.
    set_distinguisher(&kapi, serde_json::Value::Null);
    let one_flow = drive(&kapi, &level_uid, &pools);
    eprintln!("one flow, {WINDOW:?}: ns-a {} (12 clients), ns-b {} (4), ns-c {} (4)", one_flow[0], one_flow[1], one_flow[2]);
    assert!(one_flow[0] > 2 * one_flow[1], "without fairness the larger pool should get more: {one_flow:?}");
}
