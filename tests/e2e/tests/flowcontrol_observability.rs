//! API Priority and Fairness as an operator watches it: kube's `apiserver_flowcontrol_*`
//! gauges on `/metrics` follow a loaded level's queue and seats and fall back to 0 after, its
//! limit gauges show its share of the server, and kube's
//! `/debug/api_priority_and_fairness/` dumps list its levels, queues and queued requests to
//! whoever may read those non-resource URLs (system:masters here; a plain user is refused);
//! without flow control the dumps do not exist.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use kapi_e2e::flowcontrol::{big_configmaps, level_for_user, user_cert};
use kapi_e2e::{wait_for, Kapi};
use serde_json::json;

const DEBUG: &str = "/debug/api_priority_and_fairness";
/// The configmaps the loader lists.
const NS: &str = "/api/v1/namespaces/default/configmaps";

/// (status, lowercased headers, body) of a GET, as the admin when `cert` is None.
fn get(kapi: &Kapi, path: &str, cert: Option<&(PathBuf, PathBuf)>) -> (u16, String, String) {
    let answer = kapi.get_with_headers(path, cert.is_none(), cert);
    (answer.status, answer.headers, answer.body)
}

/// The value of the series `name{labels}` (labels as the exposition writes them, sorted).
fn series(metrics: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    metrics.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok())
}

fn metrics(kapi: &Kapi) -> String {
    let (status, _, body) = get(kapi, "/metrics", None);
    assert_eq!(status, 200, "{body}");
    body
}

/// A dump's rows as trimmed columns, its header first.
fn table(text: &str) -> Vec<Vec<String>> {
    text.lines().map(|l| l.split(',').map(|c| c.trim().to_owned()).collect()).collect()
}

/// The admin's dump `name` (with `query`), checked to be 200 text.
fn dump(kapi: &Kapi, name: &str, query: &str) -> Vec<Vec<String>> {
    let (status, headers, body) = get(kapi, &format!("{DEBUG}/{name}{query}"), None);
    assert_eq!(status, 200, "{name}: {body}");
    assert!(headers.contains("content-type: text/plain"), "{headers}");
    table(&body)
}

const TINY: &str = "flow_schema=\"loaders\",priority_level=\"tiny\"";

#[test]
fn gauges_and_dumps_follow_a_loaded_level() {
    // 20 seats; `tiny` has 1 share of 246, so ceil(20/246) = 1 seat, and it may not borrow.
    let kapi = Kapi::start_with(&["--enable-priority-and-fairness", "--max-requests-inflight", "10", "--max-mutating-requests-inflight", "10"])
        .expect("start kapi");
    level_for_user(&kapi, "tiny", "loaders", "loader", json!({"nominalConcurrencyShares": 1, "borrowingLimitPercent": 0,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 2, "handSize": 1, "queueLengthLimit": 50}}}));
    let loader = user_cert(&kapi, "loader");
    // Lists of about 5 MB: slow enough that the loader's clients queue behind its one seat.
    big_configmaps(&kapi, 20, 256);

    // The limit gauges: each level's share of the 20 seats (shares of 246, rounded up).
    let limits = wait_for(Duration::from_secs(10), || {
        let m = metrics(&kapi);
        (series(&m, "apiserver_flowcontrol_nominal_limit_seats", "priority_level=\"tiny\"") == Some(1.0)).then_some(m)
    });
    let m = limits.expect("no nominal_limit_seats for the tiny level");
    for (name, want) in [("nominal", 1.0), ("lower", 1.0), ("upper", 1.0), ("current", 1.0)] {
        assert_eq!(series(&m, &format!("apiserver_flowcontrol_{name}_limit_seats"), "priority_level=\"tiny\""), Some(want), "{name}");
    }
    // global-default: ceil(20 * 20 / 246) = 2; workload-low: ceil(20 * 100 / 246) = 9.
    assert_eq!(series(&m, "apiserver_flowcontrol_nominal_limit_seats", "priority_level=\"global-default\""), Some(2.0));
    assert_eq!(series(&m, "apiserver_flowcontrol_nominal_limit_seats", "priority_level=\"workload-low\""), Some(9.0));
    assert!(m.contains("# HELP apiserver_flowcontrol_current_inqueue_requests [BETA] Number of requests currently pending in queues of the API Priority and Fairness subsystem\n"), "kube's help text");
    assert!(m.contains("# TYPE apiserver_flowcontrol_current_executing_seats gauge\n"));
    // The scrape itself runs in the exempt level, and counts.
    let exempt = series(&m, "apiserver_flowcontrol_current_executing_requests", "flow_schema=\"exempt\",priority_level=\"exempt\"");
    assert!(exempt.is_some_and(|n| n >= 1.0), "exempt executing: {exempt:?}");

    // Load: 8 clients listing as the loader until told to stop.
    let stop = AtomicBool::new(false);
    let answered = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let (status, _, _) = get(&kapi, NS, Some(&loader));
                    assert_eq!(status, 200, "a queued list waits its turn");
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_while_loaded(&kapi)));
        stop.store(true, Ordering::Relaxed);
        if let Err(panic) = loaded {
            std::panic::resume_unwind(panic);
        }
    });

    // Unloaded: back to 0, the level idle, its requests gone from the dump.
    let idle = wait_for(Duration::from_secs(10), || {
        let m = metrics(&kapi);
        let zero = ["current_inqueue_requests", "current_inqueue_seats", "current_executing_requests", "current_executing_seats"]
            .iter()
            .all(|g| series(&m, &format!("apiserver_flowcontrol_{g}"), TINY) == Some(0.0));
        zero.then_some(())
    });
    assert!(idle.is_some(), "the gauges did not come back to 0:\n{}", metrics(&kapi));
    let levels = dump(&kapi, "dump_priority_levels", "");
    let tiny = levels.iter().find(|r| r[0] == "tiny").expect("tiny row");
    assert_eq!(&tiny[1..6], ["0", "true", "false", "0", "0"], "{levels:?}");
    let dispatched: usize = tiny[6].parse().expect("DispatchedRequests");
    assert!(dispatched >= answered.load(Ordering::Relaxed), "dispatched {dispatched}, answered {}", answered.load(Ordering::Relaxed));
    assert!(dump(&kapi, "dump_requests", "").iter().all(|r| r[0] != "tiny"), "finished requests left the dump");

    // The dumps are non-resource URLs: a plain user (or one allowed to view resources) is refused.
    let alice = user_cert(&kapi, "alice");
    for name in ["dump_priority_levels", "dump_queues", "dump_requests"] {
        for who in [&alice, &loader] {
            let (status, _, body) = get(&kapi, &format!("{DEBUG}/{name}"), Some(who));
            assert_eq!(status, 403, "{name}: {body}");
        }
    }
    assert_eq!(get(&kapi, &format!("{DEBUG}/dump_everything"), None).0, 404);
}

/// While the loader's clients hold its one seat and queue behind it.
fn check_while_loaded(kapi: &Kapi) {
    let seen = wait_for(Duration::from_secs(30), || {
        let m = metrics(kapi);
        let queued = series(&m, "apiserver_flowcontrol_current_inqueue_requests", TINY)?;
        let running = series(&m, "apiserver_flowcontrol_current_executing_requests", TINY)?;
        (queued >= 1.0 && running == 1.0).then_some(m)
    });
    let m = seen.unwrap_or_else(|| panic!("never saw the loader queued:\n{}", metrics(kapi)));
    // One seat per list (20 objects), so the seats follow the requests.
    assert_eq!(series(&m, "apiserver_flowcontrol_current_executing_seats", TINY), Some(1.0));
    assert_eq!(series(&m, "apiserver_flowcontrol_current_inqueue_seats", TINY), series(&m, "apiserver_flowcontrol_current_inqueue_requests", TINY));

    // dump_priority_levels: kube's header, every level by name, tiny busy.
    let levels = wait_for(Duration::from_secs(10), || {
        let rows = dump(kapi, "dump_priority_levels", "");
        let tiny = rows.iter().find(|r| r[0] == "tiny")?;
        (tiny[2] == "false" && tiny[4] != "0" && tiny[5] == "1").then_some(rows)
    });
    let rows = levels.expect("tiny never showed waiting requests in dump_priority_levels");
    let header = [
        "PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests", "ExecutingRequests", "DispatchedRequests", "RejectedRequests",
        "TimedoutRequests", "CancelledRequests",
    ];
    assert_eq!(rows[0], header);
    let names: Vec<&str> = rows[1..].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["catch-all", "exempt", "global-default", "leader-election", "node-high", "system", "tiny", "workload-high", "workload-low"]);
    let exempt = rows.iter().find(|r| r[0] == "exempt").unwrap();
    assert!(exempt[5].parse::<u32>().is_ok_and(|n| n >= 1), "the dump's own request runs in exempt: {exempt:?}");

    // dump_queues: tiny's two queues, one of them holding the waiting lists.
    let queues = wait_for(Duration::from_secs(10), || {
        let rows = dump(kapi, "dump_queues", "");
        let tiny: Vec<_> = rows.iter().filter(|r| r[0] == "tiny").cloned().collect();
        tiny.iter().any(|r| r[2] != "0").then_some((rows[0].clone(), tiny))
    });
    let (header, tiny) = queues.expect("tiny's queues never showed pending requests");
    assert_eq!(header, ["PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse", "NextDispatchR", "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum"]);
    assert_eq!(tiny.iter().map(|r| r[1].as_str()).collect::<Vec<_>>(), ["0", "1"]);
    assert!(tiny.iter().all(|r| r[5].ends_with("ss") && r[8].ends_with("ss")), "seat-seconds: {tiny:?}");

    // dump_requests: a queued list of the loader's, with its details; and the one running.
    let requests = wait_for(Duration::from_secs(10), || {
        let rows = dump(kapi, "dump_requests", "?includeRequestDetails=1");
        let tiny: Vec<_> = rows.iter().filter(|r| r[0] == "tiny").cloned().collect();
        let queued = tiny.iter().find(|r| r[3] != "-1")?.clone();
        Some((rows[0].clone(), queued, tiny))
    });
    let (header, queued, tiny) = requests.expect("no queued request in dump_requests");
    assert_eq!(header, [
        "PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher", "ArriveTime", "InitialSeats", "FinalSeats",
        "AdditionalLatency", "StartTime", "UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource", "SubResource",
    ]);
    assert_eq!(queued[1], "loaders");
    assert!(queued[2] == "0" || queued[2] == "1", "{queued:?}");
    assert_eq!(queued[4], "", "loaders has no distinguisher");
    assert!(queued[5].ends_with('Z') && queued[5].starts_with("20"), "arrival: {queued:?}");
    assert_eq!(&queued[6..10], ["1", "0", "0s", "0001-01-01T00:00:00Z"], "waiting, not started: {queued:?}");
    assert_eq!(&queued[10..], ["loader", "list", NS, "default", "", "v1", "configmaps", ""], "{queued:?}");
    // The running list shows too (-1 as its place in its queue, a start time), unless it ended
    // between the dumps' reads.
    for running in tiny.iter().filter(|r| r[3] == "-1") {
        assert_ne!(running[9], "0001-01-01T00:00:00Z", "{running:?}");
    }
    let without = dump(kapi, "dump_requests", "");
    assert_eq!(without[0].len(), 10, "details only when asked: {:?}", without[0]);
}

#[test]
fn without_flow_control_the_dumps_do_not_exist() {
    let kapi = Kapi::start_with(&["--enable-priority-and-fairness=false"]).expect("start kapi");
    for name in ["dump_priority_levels", "dump_queues", "dump_requests"] {
        let (status, _, body) = get(&kapi, &format!("{DEBUG}/{name}"), None);
        assert_eq!(status, 404, "{name}: {body}");
    }
}
