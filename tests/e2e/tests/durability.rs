//! A crash loses no acknowledged write: SIGKILL kapi under concurrent create load, restart it on
//! the same data dir, and find every ConfigMap whose create was answered 201.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::json;

const WRITERS: usize = 4;
/// Upper bound for the load phase even if the kill somehow does not stop the writers.
const LOAD_LIMIT: Duration = Duration::from_secs(60);

fn configmap(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"writer": name}})
}

fn stored_names(kapi: &Kapi) -> BTreeSet<String> {
    let list = kapi.get_json("/api/v1/namespaces/default/configmaps");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn sigkill_under_create_load_keeps_every_acknowledged_write() {
    let mut kapi = Kapi::start().expect("start kapi");
    let acknowledged = Mutex::new(Vec::<String>::new());
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (kapi, acknowledged, stop) = (&kapi, &acknowledged, &stop);
            s.spawn(move || {
                let mut failures_in_a_row = 0;
                for i in 0.. {
                    if stop.load(Ordering::SeqCst) || started.elapsed() > LOAD_LIMIT || failures_in_a_row > 3 {
                        break;
                    }
                    let name = format!("load-{w}-{i}");
                    let req = Request::new("POST", "/api/v1/namespaces/default/configmaps").json(&configmap(&name));
                    match kapi.try_request(&req) {
                        Ok(r) if r.status == 201 => {
                            failures_in_a_row = 0;
                            if let Ok(mut acked) = acknowledged.lock() {
                                acked.push(name);
                            }
                        }
                        // Connection refused or reset once the server is dead: the outcome of
                        // this create is unknown, so it is not counted.
                        _ => failures_in_a_row += 1,
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(1500));
        kapi.signal("KILL").expect("kill -9 kapi");
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
    });
    let acknowledged: Vec<String> = acknowledged.into_inner().expect("writers finished");
    assert!(acknowledged.len() >= 8, "too little load to test anything: {} creates acknowledged", acknowledged.len());

    kapi.restart().expect("restart kapi on the same data dir");
    let stored = stored_names(&kapi);
    let lost: Vec<&String> = acknowledged.iter().filter(|n| !stored.contains(*n)).collect();
    assert!(lost.is_empty(), "{} of {} acknowledged creates lost after SIGKILL: {lost:?}", lost.len(), acknowledged.len());

    // The restarted server keeps working: revisions continue past the old ones.
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/default/configmaps").json(&configmap("after-restart")));
    assert_eq!(r.status, 201, "create after restart: {}", r.raw);
    let one = kapi.get_json(&format!("/api/v1/namespaces/default/configmaps/{}", acknowledged[acknowledged.len() - 1]));
    let old_rv: u64 = one["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).expect("numeric rv");
    let new_rv: u64 = r.body["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).expect("numeric rv");
    assert!(new_rv > old_rv, "resourceVersion went backwards after restart: {new_rv} <= {old_rv}");
}

#[test]
fn sigterm_exits_cleanly_and_restart_keeps_data() {
    let mut kapi = Kapi::start().expect("start kapi");
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/default/configmaps").json(&configmap("before-term")));
    assert_eq!(r.status, 201, "create: {}", r.raw);
    let code = kapi.terminate().expect("SIGTERM kapi");
    assert_eq!(code, Some(0), "kapi must exit 0 after SIGTERM");
    kapi.restart().expect("restart kapi");
    let ready = wait_for(Duration::from_secs(30), || {
        let r = kapi.request(&Request::get("/readyz").without_client_cert().accept("*/*"));
        (r.status == 200 && r.raw.trim() == "ok").then_some(())
    });
    assert!(ready.is_some(), "/readyz did not answer ok without credentials after restart");
    assert!(stored_names(&kapi).contains("before-term"), "configmap lost across a clean restart");
}
