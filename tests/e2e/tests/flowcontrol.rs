//! API Priority and Fairness (`--enable-priority-and-fairness`): kube's bootstrap FlowSchemas
//! and PriorityLevelConfigurations are stored and kept (a deleted mandatory object comes back;
//! a change to a mandatory spec is refused, as kube refuses it), objects annotated for auto-update that kube does not ship are deleted (the
//! user's stay), every answer names its FlowSchema and priority level by UID, and a level that
//! rejects answers a burst with kube's 429 while system:masters (the exempt level) is never
//! limited. The 429's `Retry-After` is the level's, as kube computes it: 1 s at first, doubled
//! while the level keeps rejecting, a second less after a quiet spell.

use std::path::PathBuf;
use std::time::Duration;

use kapi_e2e::flowcontrol::{big_configmaps, level_for_user, user_cert, FLOW_SCHEMAS, LEVELS, LEVEL_HEADER, SCHEMA_HEADER};
use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::json;


fn uid(kapi: &Kapi, collection: &str, name: &str) -> Option<String> {
    let r = kapi.request(&Request::get(&format!("{collection}/{name}")));
    (r.status == 200).then(|| r.body["metadata"]["uid"].as_str().unwrap_or_default().to_owned())
}

/// The value of `header` (lowercased header block, name with ": ") in `headers`.
fn header<'a>(headers: &'a str, name: &str) -> Option<&'a str> {
    headers.lines().find_map(|l| l.strip_prefix(name)).map(str::trim)
}

/// (schema UID, level UID) of the answer to a GET of `path` as `cert` (admin when None).
fn pf_uids(kapi: &Kapi, path: &str, cert: Option<&(PathBuf, PathBuf)>) -> (String, String) {
    let answer = kapi.get_with_headers(path, cert.is_none(), cert);
    let get = |name| header(&answer.headers, name).unwrap_or_default().to_owned();
    (get(SCHEMA_HEADER), get(LEVEL_HEADER))
}

fn names(kapi: &Kapi, collection: &str) -> Vec<String> {
    let list = kapi.get_json(collection);
    let mut names: Vec<String> =
        list["items"].as_array().into_iter().flatten().filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned)).collect();
    names.sort();
    names
}

#[test]
fn bootstrap_objects_are_kept_and_answers_name_their_schema_and_level() {
    let kapi = Kapi::start_with(&["--enable-priority-and-fairness"]).expect("start kapi");
    let mut want_schemas = vec![
        "catch-all", "exempt", "global-default", "kube-controller-manager", "kube-scheduler", "kube-system-service-accounts", "probes",
        "service-accounts", "system-leader-election", "system-node-high", "system-nodes",
    ];
    want_schemas.sort();
    let mut want_levels = vec!["catch-all", "exempt", "global-default", "leader-election", "node-high", "system", "workload-high", "workload-low"];
    want_levels.sort();
    let stored = wait_for(Duration::from_secs(20), || {
        (names(&kapi, FLOW_SCHEMAS) == want_schemas && names(&kapi, LEVELS) == want_levels).then_some(())
    });
    assert!(stored.is_some(), "bootstrap set: {:?} {:?}", names(&kapi, FLOW_SCHEMAS), names(&kapi, LEVELS));
    let exempt = kapi.get_json(&format!("{FLOW_SCHEMAS}/exempt"));
    assert_eq!(exempt["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"], "true", "{exempt}");
    let out = kapi.kubectl(&["get", "flowschemas,prioritylevelconfigurations"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}{}", String::from_utf8_lossy(&out.stderr));
    for name in ["flowschema.flowcontrol.apiserver.k8s.io/global-default", "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/workload-low"] {
        assert!(table.contains(name), "{name} missing from:\n{table}");
    }

    // Admin (system:masters) requests fall in `exempt`, a plain user's in `global-default`.
    let exempt_uids = || (uid(&kapi, FLOW_SCHEMAS, "exempt").unwrap_or_default(), uid(&kapi, LEVELS, "exempt").unwrap_or_default());
    let applied = wait_for(Duration::from_secs(5), || (pf_uids(&kapi, "/api/v1/namespaces", None) == exempt_uids()).then_some(()));
    assert!(applied.is_some(), "admin answer {:?}, exempt objects {:?}", pf_uids(&kapi, "/api/v1/namespaces", None), exempt_uids());
    let alice = user_cert(&kapi, "alice");
    let global = (uid(&kapi, FLOW_SCHEMAS, "global-default").unwrap(), uid(&kapi, LEVELS, "global-default").unwrap());
    assert_eq!(pf_uids(&kapi, "/api/v1/namespaces/default/configmaps", Some(&alice)), global, "a forbidden answer is classified too");

    // kube holds the mandatory objects to their fixed spec: a change is refused 422, not
    // accepted and then undone.
    let merge = |path: &str, patch: serde_json::Value| kapi.request(&Request::new("PATCH", path).raw("application/merge-patch+json", patch.to_string()));
    for (collection, patch) in [
        (LEVELS, json!({"spec": {"limited": {"nominalConcurrencyShares": 50}}})),
        (FLOW_SCHEMAS, json!({"spec": {"matchingPrecedence": 9999}})),
    ] {
        let r = merge(&format!("{collection}/catch-all"), patch);
        assert_eq!((r.status, r.reason()), (422, "Invalid"), "{}", r.raw);
        let cause = &r.body["details"]["causes"][0];
        assert_eq!(cause["field"], "spec", "{}", r.raw);
        let message = cause["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("Invalid value: ") && message.ends_with(": spec of 'catch-all' must equal the fixed value"), "{message}");
    }
    assert_eq!(kapi.get_json(&format!("{LEVELS}/catch-all"))["spec"]["limited"]["nominalConcurrencyShares"], 5);
    assert_eq!(kapi.get_json(&format!("{FLOW_SCHEMAS}/catch-all"))["spec"]["matchingPrecedence"], 10000);
    // Only the exempt level's shares and lendable percent are the administrator's; its type is not.
    let r = merge(&format!("{LEVELS}/exempt"), json!({"spec": {"exempt": {"nominalConcurrencyShares": 10, "lendablePercent": 20}}}));
    assert_eq!(r.status, 200, "{}", r.raw);
    let r = merge(&format!("{LEVELS}/exempt"), json!({"spec": {"type": "Limited", "exempt": null, "limited": {"limitResponse": {"type": "Reject"}}}}));
    assert_eq!(r.status, 422, "{}", r.raw);
    assert!(r.message().contains("spec of 'exempt' except the 'spec.exempt' field must equal the fixed value"), "{}", r.raw);

    // The mandatory `exempt` schema comes back after a delete (a new object, a new UID). The
    // producer's pass that brings it back ensured the mandatory levels first: the exempt
    // level's administrator values are kept.
    let old = exempt_uids().0;
    let out = kapi.kubectl(&["delete", "flowschema", "exempt"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let back = wait_for(Duration::from_secs(10), || uid(&kapi, FLOW_SCHEMAS, "exempt").filter(|u| *u != old));
    let back = back.expect("the exempt FlowSchema did not come back");
    let follows = wait_for(Duration::from_secs(5), || (pf_uids(&kapi, "/api/v1/namespaces", None).0 == back).then_some(()));
    assert!(follows.is_some(), "answers still name the deleted schema");
    let exempt_level = kapi.get_json(&format!("{LEVELS}/exempt"));
    assert_eq!(exempt_level["spec"]["exempt"], json!({"nominalConcurrencyShares": 10, "lendablePercent": 20}), "{exempt_level}");

    // What kube lets a user do to the `catch-all` level, the producer repairs: deleted, it is
    // created again with its fixed spec; its annotation set to false goes back to true.
    let old = uid(&kapi, LEVELS, "catch-all").unwrap();
    let out = kapi.kubectl(&["delete", "prioritylevelconfiguration", "catch-all"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let back = wait_for(Duration::from_secs(10), || uid(&kapi, LEVELS, "catch-all").filter(|u| *u != old));
    assert!(back.is_some(), "the catch-all level did not come back");
    assert_eq!(kapi.get_json(&format!("{LEVELS}/catch-all"))["spec"]["limited"]["nominalConcurrencyShares"], 5);
    let r = merge(&format!("{LEVELS}/catch-all"), json!({"metadata": {"annotations": {"apf.kubernetes.io/autoupdate-spec": "false"}}}));
    assert_eq!(r.status, 200, "{}", r.raw);
    let restored = wait_for(Duration::from_secs(10), || {
        let level = kapi.get_json(&format!("{LEVELS}/catch-all"));
        (level["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"] == "true").then_some(())
    });
    assert!(restored.is_some(), "catch-all's annotation was not restored: {}", kapi.get_json(&format!("{LEVELS}/catch-all")));
}

#[test]
fn objects_annotated_for_auto_update_that_kube_does_not_ship_are_deleted() {
    let kapi = Kapi::start_with(&["--enable-priority-and-fairness"]).expect("start kapi");
    let annotated = |value: Option<&str>| match value {
        Some(v) => json!({"apf.kubernetes.io/autoupdate-spec": v}),
        None => json!({}),
    };
    let level = |name: &str, auto: Option<&str>| {
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name, "annotations": annotated(auto)},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 3, "limitResponse": {"type": "Reject"}}}})
    };
    let schema = |name: &str, auto: Option<&str>| {
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": name, "annotations": annotated(auto)},
            "spec": {"priorityLevelConfiguration": {"name": name}, "matchingPrecedence": 800,
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": name}}], "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/version"]}]}]}})
    };
    // The user's objects first (opted out, or never annotated), then ones that claim to be the
    // server's (`true`) under names kube's configuration does not have, as an older release's
    // objects would: the producer's pass that deletes those has seen these.
    let mine = [("mine-opted-out", Some("false")), ("mine-plain", None)];
    let stale = [("old-release-level", Some("true")), ("old-release-schema", Some("TRUE"))];
    for (name, auto) in mine.iter().chain(&stale) {
        for (collection, obj) in [(LEVELS, level(name, *auto)), (FLOW_SCHEMAS, schema(name, *auto))] {
            let r = kapi.request(&Request::new("POST", collection).json(&obj));
            assert_eq!(r.status, 201, "{}", r.raw);
        }
    }
    for (name, _) in &stale {
        let gone = wait_for(Duration::from_secs(10), || (uid(&kapi, LEVELS, name).is_none() && uid(&kapi, FLOW_SCHEMAS, name).is_none()).then_some(()));
        assert!(gone.is_some(), "{name} was not deleted: {:?} {:?}", names(&kapi, LEVELS), names(&kapi, FLOW_SCHEMAS));
    }
    for (name, auto) in &mine {
        for collection in [LEVELS, FLOW_SCHEMAS] {
            let obj = kapi.get_json(&format!("{collection}/{name}"));
            let annotation = obj["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"].as_str();
            assert_eq!(annotation, *auto, "the user's object is left as it was: {obj}");
        }
    }
    // kube's own objects are not touched by this.
    assert!(names(&kapi, FLOW_SCHEMAS).contains(&"global-default".to_owned()));
    assert!(names(&kapi, LEVELS).contains(&"workload-low".to_owned()));
}

/// (status, lowercased headers, body) of a GET as `cert`.
fn get(kapi: &Kapi, cert: &(PathBuf, PathBuf), path: &str) -> (u16, String, String) {
    let answer = kapi.get_with_headers(path, false, Some(cert));
    (answer.status, answer.headers, answer.body)
}

/// The configmaps the loader lists.
const NS: &str = "/api/v1/namespaces/default/configmaps";

/// A server whose user `loader` (allowed to view) falls in its own level `tiny` of one seat
/// (1 share of 246 of 20 seats) answering with `limit_response`; 20 ConfigMaps of 256 KiB make
/// its lists about 5 MB, slow enough to overlap. Returns the loader's certificate and the
/// (schema, level) UIDs, once the loader's requests reach the level.
fn loader_on_a_tiny_level(limit_response: serde_json::Value) -> (Kapi, (PathBuf, PathBuf), (String, String)) {
    let kapi = Kapi::start_with(&["--enable-priority-and-fairness", "--max-requests-inflight", "10", "--max-mutating-requests-inflight", "10"])
        .expect("start kapi");
    level_for_user(&kapi, "tiny", "loaders", "loader", json!({"nominalConcurrencyShares": 1, "limitResponse": limit_response}));
    let loader = user_cert(&kapi, "loader");
    big_configmaps(&kapi, 20, 256);
    let tiny = (uid(&kapi, FLOW_SCHEMAS, "loaders").unwrap(), uid(&kapi, LEVELS, "tiny").unwrap());
    let applied = wait_for(Duration::from_secs(5), || {
        let (_, headers, _) = get(&kapi, &loader, "/api/v1/namespaces/default/configmaps/big-0");
        (header(&headers, LEVEL_HEADER) == Some(tiny.1.as_str())).then_some(())
    });
    assert!(applied.is_some(), "the loader's requests never reached the tiny level");
    (kapi, loader, tiny)
}

/// `n` concurrent GETs of `path` as `cert`.
fn burst(kapi: &Kapi, cert: &(PathBuf, PathBuf), path: &str, n: usize) -> Vec<(u16, String, String)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n).map(|_| s.spawn(|| get(kapi, cert, path))).collect();
        handles.into_iter().map(|h| h.join().expect("burst thread")).collect()
    })
}

/// The `Retry-After` of a 429 (lowercased headers), in seconds.
fn retry_after(headers: &str) -> u64 {
    header(headers, "retry-after: ").and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no Retry-After seconds in {headers}"))
}

#[test]
fn a_rejecting_level_answers_a_burst_429_and_masters_are_never_limited() {
    let (kapi, loader, tiny) = loader_on_a_tiny_level(json!({"type": "Reject"}));
    // While the loader's 30 lists compete for one seat, the admin's 10 run at once.
    let (lists, admin) = std::thread::scope(|s| {
        let lists = s.spawn(|| burst(&kapi, &loader, NS, 30));
        let admin: Vec<_> = (0..10).map(|_| s.spawn(|| kapi.request(&Request::get(NS)).status)).collect();
        (lists.join().expect("burst"), admin.into_iter().map(|h| h.join().expect("admin thread")).collect::<Vec<u16>>())
    });
    assert!(admin.iter().all(|s| *s == 200), "system:masters must never be limited: {admin:?}");
    let ok = lists.iter().filter(|r| r.0 == 200).count();
    let refused: Vec<_> = lists.iter().filter(|r| r.0 == 429).collect();
    eprintln!("burst of {}: {ok} answered, {} refused", lists.len(), refused.len());
    assert_eq!(ok + refused.len(), lists.len(), "only 200 or 429: {:?}", lists.iter().map(|r| r.0).collect::<Vec<_>>());
    assert!(ok >= 1, "the level's seat serves someone");
    assert!(refused.len() >= 15, "30 concurrent lists on one seat that rejects: {} refused", refused.len());
    let refused_count = refused.len();
    // kube's Retry-After starts at 1 for a level that never rejected; the burst's later
    // refusals, a second on, may already be told 2.
    let waits: Vec<u64> = refused.iter().map(|(_, headers, _)| retry_after(headers)).collect();
    assert_eq!(waits.iter().min(), Some(&1), "{waits:?}");
    assert!(waits.iter().all(|w| [1, 2, 4].contains(w)), "{waits:?}");
    for (_, headers, body) in refused {
        assert_eq!(body, "Too many requests, please try again later.\n");
        assert_eq!((header(headers, SCHEMA_HEADER), header(headers, LEVEL_HEADER)), (Some(tiny.0.as_str()), Some(tiny.1.as_str())), "{headers}");
    }
    // A level's seats come back: a lone request gets through again.
    assert_eq!(get(&kapi, &loader, "/api/v1/namespaces/default/configmaps/big-0").0, 200);
    // kube's series count what happened, by schema and level.
    let metrics = kapi.request(&Request::get("/metrics")).raw;
    let value = |series: &str| metrics.lines().find(|l| l.starts_with(series)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse::<f64>().ok());
    let rejected = value("apiserver_flowcontrol_rejected_requests_total{flow_schema=\"loaders\",priority_level=\"tiny\",reason=\"concurrency-limit\"}");
    assert_eq!(rejected, Some(refused_count as f64), "{metrics}");
    let dispatched = value("apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"loaders\",priority_level=\"tiny\"}");
    assert!(dispatched.is_some_and(|d| d >= ok as f64), "dispatched {dispatched:?}");
    assert!(metrics.contains("apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"exempt\",priority_level=\"exempt\"}"), "exempt dispatches");
}

#[test]
fn a_queuing_level_runs_a_burst_in_turn_and_refuses_what_waits_past_its_deadline() {
    let queue = json!({"type": "Queue", "queuing": {"queues": 4, "handSize": 1, "queueLengthLimit": 50}});
    let (kapi, loader, tiny) = loader_on_a_tiny_level(queue);
    // One seat, 8 lists: they wait their turn (15 s is plenty) and all get through.
    let queued = burst(&kapi, &loader, NS, 8);
    assert!(queued.iter().all(|r| r.0 == 200), "{:?}", queued.iter().map(|r| r.0).collect::<Vec<_>>());
    // With ?timeout=1s a request waits at most 250 ms: behind several lists, some give up.
    let hurried = burst(&kapi, &loader, &format!("{NS}?timeout=1s"), 12);
    let refused: Vec<_> = hurried.iter().filter(|r| r.0 == 429).collect();
    eprintln!("hurried burst of 12: {} refused", refused.len());
    assert!(!refused.is_empty(), "{:?}", hurried.iter().map(|r| r.0).collect::<Vec<_>>());
    for (_, headers, body) in &refused {
        assert_eq!(body, "Too many requests, please try again later.\n");
        assert_eq!(header(headers, LEVEL_HEADER), Some(tiny.1.as_str()), "{headers}");
    }
    let metrics = kapi.request(&Request::get("/metrics")).raw;
    let timed_out = metrics
        .lines()
        .find(|l| l.starts_with("apiserver_flowcontrol_rejected_requests_total{flow_schema=\"loaders\",priority_level=\"tiny\",reason=\"time-out\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(timed_out, Some(refused.len() as f64), "the time-outs are counted");
    assert!(hurried.iter().all(|r| r.0 == 200 || r.0 == 429 || r.0 == 504), "{:?}", hurried.iter().map(|r| r.0).collect::<Vec<_>>());
}


#[test]
fn retry_after_grows_while_a_level_keeps_rejecting_and_comes_down_after() {
    let (kapi, loader, _) = loader_on_a_tiny_level(json!({"type": "Reject"}));
    // Six clients list without pause: the one seat is always taken, so the level refuses
    // dozens of requests a second. kube doubles its Retry-After (1, 2, 4, ...) at most once per
    // Retry-After seconds while at least three refusals a second of it keep coming.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = std::time::Instant::now();
    let waits = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && started.elapsed() < Duration::from_secs(20) {
                    let (status, headers, _) = get(&kapi, &loader, NS);
                    if status == 429 {
                        let wait = retry_after(&headers);
                        let mut waits = waits.lock().unwrap();
                        waits.push(wait);
                        if wait >= 4 {
                            stop.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    let waits = waits.into_inner().unwrap();
    eprintln!("{} refusals in {:?}", waits.len(), started.elapsed());
    assert_eq!(waits.iter().min(), Some(&1), "a level that never rejected says 1: {waits:?}");
    let peak = waits.iter().copied().max().unwrap_or(0);
    assert!(peak >= 4, "sustained refusals must double it twice: {waits:?}");
    // While the load lasts it only grows, by doubling.
    assert!(waits.iter().all(|w| [1, 2, 4, 8].contains(w)), "{waits:?}");

    // A quiet spell longer than the current Retry-After: the next refusals find no recent ones
    // and are told a second less.
    std::thread::sleep(Duration::from_secs(peak + 2));
    let refusals: Vec<u64> = (0..5)
        .flat_map(|_| burst(&kapi, &loader, NS, 6))
        .filter(|(status, _, _)| *status == 429)
        .map(|(_, headers, _)| retry_after(&headers))
        .collect();
    assert!(!refusals.is_empty(), "bursts of 6 lists on one seat are refused");
    assert_eq!(refusals[0], peak - 1, "after the quiet spell: {refusals:?} (peak {peak})");
}
