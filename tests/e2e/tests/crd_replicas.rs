//! Custom resources across replicas (3 kapi processes on one SQLite file, a real nats-server):
//! a CRD created through one replica is served by the others as soon as the first answers
//! Established, and watches of custom resources deliver every event once, in order, on every
//! replica, as the store's log holds them.

use std::sync::RwLock;
use std::time::{Duration, Instant};

use kapi_e2e::changes::{assert_each_saw_the_log, resource_log, rv_of, watch_collection_until, WatchRun};
use kapi_e2e::{Endpoint, Kapi, NatsServer, Request};
use serde_json::{json, Value};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const NS: &str = "crs";
const SENTINEL: &str = "sentinel";

fn crd(plural: &str, kind: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("{plural}.example.com")},
           "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}]}})
}

fn established(endpoint: &Endpoint, name: &str) -> bool {
    let r = endpoint.try_request(&Request::get(&format!("{CRDS}/{name}"))).expect("get crd");
    r.body["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Established" && c["status"] == "True")
}

fn object(kind: &str, name: &str, n: i64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": kind, "metadata": {"name": name}, "spec": {"n": n}})
}

struct Cluster {
    _nats: NatsServer,
    replicas: Vec<Kapi>,
}

impl Cluster {
    fn start() -> Cluster {
        let nats = NatsServer::start().expect("start nats-server");
        let url = nats.url();
        let args = ["--nats-url", url.as_str()];
        let first = Kapi::start_with(&args).expect("start the first replica");
        let mut replicas = vec![first];
        for _ in 0..2 {
            let next = replicas[0].start_replica(&args).expect("start replica");
            replicas.push(next);
        }
        for r in &replicas {
            r.wait_ready(Duration::from_secs(30)).expect("ready");
        }
        Cluster { _nats: nats, replicas }
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        self.replicas.iter().map(Kapi::endpoint).collect()
    }
}

#[test]
fn a_crd_established_on_one_replica_is_served_by_the_others_at_once() {
    let cluster = Cluster::start();
    let endpoints = cluster.endpoints();
    let ns = endpoints[0].try_request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"metadata": {"name": NS}}))).expect("ns");
    assert_eq!(ns.status, 201, "{}", ns.raw);
    for i in 0..12 {
        let (plural, kind) = (format!("things{i}"), format!("Thing{i}"));
        let home = &endpoints[i % 3];
        let created = home.try_request(&Request::new("POST", CRDS).json(&crd(&plural, &kind))).expect("create crd");
        assert_eq!(created.status, 201, "{}", created.raw);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !established(home, &format!("{plural}.example.com")) {
            assert!(Instant::now() < deadline, "{plural} not Established on its replica");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Right after the first replica says Established, the others serve the resource.
        let other = &endpoints[(i + 1) % 3];
        let path = format!("/apis/example.com/v1/namespaces/{NS}/{plural}");
        let r = other.try_request(&Request::new("POST", &path).json(&object(&kind, "first", 1))).expect("create cr");
        assert_eq!(r.status, 201, "{plural} on another replica right after Established: {}", r.raw);
        let third = &endpoints[(i + 2) % 3];
        let list = third.try_request(&Request::get(&path)).expect("list");
        assert_eq!(list.status, 200, "{}", list.raw);
        assert_eq!(list.body["items"].as_array().map(Vec::len), Some(1), "consistent list on the third replica: {}", list.raw);
    }
}

#[test]
fn custom_resource_watches_see_the_log_exactly_once_in_order_on_every_replica() {
    let cluster = Cluster::start();
    let endpoints_list = cluster.endpoints();
    let ns = endpoints_list[0].try_request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"metadata": {"name": NS}}))).expect("ns");
    assert_eq!(ns.status, 201, "{}", ns.raw);
    let created = endpoints_list[0].try_request(&Request::new("POST", CRDS).json(&crd("gauges", "Gauge"))).expect("crd");
    assert_eq!(created.status, 201, "{}", created.raw);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !endpoints_list.iter().all(|e| established(e, "gauges.example.com")) {
        assert!(Instant::now() < deadline, "gauges not Established");
        std::thread::sleep(Duration::from_millis(20));
    }
    let collection = format!("/apis/example.com/v1/namespaces/{NS}/gauges");
    let from = rv_of(&created.body);
    let endpoints = RwLock::new(endpoints_list.clone());
    let per_writer = 60;
    let (runs, sentinel) = std::thread::scope(|s| {
        let watchers: Vec<_> = (0..6)
            .map(|i| {
                let (endpoints, collection) = (&endpoints, &collection);
                s.spawn(move || {
                    if i % 2 == 1 {
                        std::thread::sleep(Duration::from_secs(2));
                    }
                    watch_collection_until(endpoints, i / 2, collection, from, 300, SENTINEL)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let endpoint = endpoints_list[w].clone();
                let collection = &collection;
                s.spawn(move || {
                    for i in 0..per_writer {
                        let name = format!("w{w}-{i}");
                        let r = endpoint.try_request(&Request::new("POST", collection).json(&object("Gauge", &name, 0))).expect("create");
                        assert_eq!(r.status, 201, "{}", r.raw);
                        let item = format!("{collection}/{name}");
                        let r = endpoint
                            .try_request(&Request::new("PATCH", &item).raw("application/merge-patch+json", br#"{"spec":{"n":1}}"#.to_vec()))
                            .expect("patch");
                        assert_eq!(r.status, 200, "{}", r.raw);
                        let r = endpoint.try_request(&Request::new("DELETE", &item)).expect("delete");
                        assert_eq!(r.status, 200, "{}", r.raw);
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("writer");
        }
        let r = endpoints_list[1].try_request(&Request::new("POST", &collection).json(&object("Gauge", SENTINEL, 9))).expect("sentinel");
        assert_eq!(r.status, 201, "{}", r.raw);
        let runs: Vec<WatchRun> = watchers.into_iter().map(|w| w.join().expect("watcher")).collect();
        (runs, rv_of(&r.body))
    });
    let log = resource_log(&cluster.replicas[0].data_dir(), &format!("/registry/example.com/gauges/{NS}/"), from, sentinel);
    assert_eq!(log.len(), 3 * per_writer * 3 + 1, "the log holds every write and the sentinel");
    assert_each_saw_the_log(&runs, &log);
}
