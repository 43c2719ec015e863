//! API Priority and Fairness at run time: a WATCH waits its turn and holds its level's seat
//! only while it is set up, and a flooded level borrows the seats an idle one lends (kube's
//! adjustment every 10 s), which `apiserver_flowcontrol_current_limit_seats` shows.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kapi_e2e::raw::RawConnection;
use kapi_e2e::flowcontrol::{big_configmaps, level_for_user, user_cert, LEVELS};
use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::{json, Value};

const NS: &str = "/api/v1/namespaces/default/configmaps";

fn create(kapi: &Kapi, collection: &str, obj: &Value) {
    let r = kapi.request(&Request::new("POST", collection).json(obj));
    assert_eq!(r.status, 201, "{}", r.raw);
}

/// The value of the series whose line starts with `series` (name and labels) on `/metrics`.
fn metric(kapi: &Kapi, series: &str) -> Option<f64> {
    let metrics = kapi.request(&Request::get("/metrics")).raw;
    metrics.lines().find(|l| l.starts_with(series)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

/// Waits until the user's requests land in `level` (the configuration applied).
fn until_applied(kapi: &Kapi, who: &(PathBuf, PathBuf), level: &str) {
    let uid = kapi.get_json(&format!("{LEVELS}/{level}"))["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
    let applied = wait_for(Duration::from_secs(5), || {
        let answer = kapi.get_with_headers(&format!("{NS}/big-0"), false, Some(who));
        answer.headers.contains(&format!("x-kubernetes-pf-prioritylevel-uid: {uid}")).then_some(())
    });
    assert!(applied.is_some(), "the requests never reached level {level}");
}

#[test]
fn a_watch_waits_for_a_seat_and_holds_it_only_while_it_is_set_up() {
    let kapi = Kapi::start_with(&["--max-requests-inflight", "10", "--max-mutating-requests-inflight", "10"]).expect("start kapi");
    // One seat that rejects when taken, lent to nobody and borrowing nothing.
    level_for_user(&kapi, "one-seat", "one-seat", "watcher", json!({"nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
        "limitResponse": {"type": "Reject"}}));
    // 24 MiB of ConfigMaps: a LIST far larger than the socket buffers, so a client that does
    // not read it keeps the level's one seat.
    big_configmaps(&kapi, 32, 768);
    let watcher = user_cert(&kapi, "watcher");
    until_applied(&kapi, &watcher, "one-seat");

    let mut stalled = RawConnection::open(kapi.port(), &kapi.pki_dir().join("ca.crt"), &watcher.0, &watcher.1);
    stalled.send(format!("GET {NS} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n\r\n").as_bytes());
    // While the unread LIST holds the seat, a WATCH is refused as any request is.
    let refused = wait_for(Duration::from_secs(5), || {
        let answer = kapi.get_with_headers(&format!("{NS}?watch=1&timeoutSeconds=1"), false, Some(&watcher));
        (answer.status == 429).then_some(answer)
    });
    let refused = refused.expect("a watch on a level whose one seat is taken was not refused");
    assert!(refused.headers.contains("retry-after: 1"), "{}", refused.headers);
    // The admin (exempt) is never limited, watches included.
    assert_eq!(kapi.get_with_headers(&format!("{NS}?watch=1&timeoutSeconds=1"), true, None).status, 200);
    drop(stalled);

    // Once the seat is free, a watch is set up, and while it streams (3 s) the seat is free
    // again for the user's other requests.
    let seat_free = wait_for(Duration::from_secs(10), || (kapi.get_with_headers(&format!("{NS}/big-0"), false, Some(&watcher)).status == 200).then_some(()));
    assert!(seat_free.is_some(), "the seat never came back after the stalled LIST's client left");
    std::thread::scope(|s| {
        let watch = s.spawn(|| kapi.get_with_headers(&format!("{NS}?watch=1&timeoutSeconds=3&resourceVersion=0"), false, Some(&watcher)));
        std::thread::sleep(Duration::from_millis(1000));
        let started = Instant::now();
        let mut gets = Vec::new();
        while started.elapsed() < Duration::from_millis(1000) {
            gets.push(kapi.get_with_headers(&format!("{NS}/big-0"), false, Some(&watcher)).status);
        }
        let watch = watch.join().expect("watch thread");
        assert_eq!(watch.status, 200, "{}", watch.headers);
        assert!(watch.body.contains("\"ADDED\""), "the watch delivered its initial events");
        assert!(!gets.is_empty() && gets.iter().all(|s| *s == 200), "GETs beside an open watch on a one-seat level: {gets:?}");
    });
}

#[test]
fn a_flooded_level_borrows_the_seats_an_idle_level_lends() {
    let kapi = Kapi::start_with(&["--max-requests-inflight", "20", "--max-mutating-requests-inflight", "20"]).expect("start kapi");
    // `busy` has a small share and may borrow without limit; `lender` has a large share, all
    // of it lendable, and no traffic.
    level_for_user(&kapi, "busy", "busy", "flooder", json!({"nominalConcurrencyShares": 5, "lendablePercent": 0,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 100}}}));
    create(&kapi, LEVELS, &json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "lender"}, "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 200, "lendablePercent": 100,
        "limitResponse": {"type": "Reject"}}}}));
    big_configmaps(&kapi, 20, 256);
    let flooder = user_cert(&kapi, "flooder");
    until_applied(&kapi, &flooder, "busy");
    let series = |name: &str, level: &str| format!("apiserver_flowcontrol_{name}{{priority_level=\"{level}\"}}");
    let nominal = metric(&kapi, &series("nominal_limit_seats", "busy")).expect("busy's nominal limit");
    let lender_nominal = metric(&kapi, &series("nominal_limit_seats", "lender")).expect("lender's nominal limit");
    eprintln!("nominal seats: busy {nominal}, lender {lender_nominal}");
    assert!(nominal >= 1.0 && lender_nominal > 2.0 * nominal, "the test needs a small busy level and a large lender");

    // 12 clients LIST 5 MB in a loop; within three adjustments (30 s) busy's limit grows past
    // its nominal seats, and the lender's shrinks.
    let stop = AtomicBool::new(false);
    let (grown, statuses) = std::thread::scope(|s| {
        let clients: Vec<_> = (0..12)
            .map(|_| {
                s.spawn(|| {
                    let mut statuses = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        statuses.push(kapi.get_with_headers(NS, false, Some(&flooder)).status);
                    }
                    statuses
                })
            })
            .collect();
        let grown = wait_for(Duration::from_secs(35), || {
            let busy = metric(&kapi, &series("current_limit_seats", "busy"))?;
            let lender = metric(&kapi, &series("current_limit_seats", "lender"))?;
            (busy > nominal && lender < lender_nominal).then_some((busy, lender))
        });
        stop.store(true, Ordering::Relaxed);
        let statuses: Vec<u16> = clients.into_iter().flat_map(|c| c.join().expect("client")).collect();
        (grown, statuses)
    });
    let (busy, lender) = grown.expect("busy never borrowed past its nominal seats within 35 s of flooding");
    eprintln!("after borrowing: busy {busy} seats (nominal {nominal}), lender {lender} (nominal {lender_nominal}); {} lists", statuses.len());
    assert!(statuses.iter().all(|s| *s == 200 || *s == 429), "{statuses:?}");
    assert!(statuses.iter().filter(|s| **s == 200).count() >= 12, "the flood's lists ran");
}
