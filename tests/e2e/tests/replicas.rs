//! Several kapi replicas sharing one SQLite file, with a real nats-server (JetStream on) for
//! fan-out: every watcher on every replica sees every event exactly once, in revision order,
//! identical to the store's change log, whichever replica wrote it; conflicting writes sent to
//! different replicas end in one success and 409s; a write acknowledged by one replica is read by
//! another at once; and NATS outages, a SIGKILLed replica and watchers moving between replicas
//! lose or repeat nothing. The same guarantees are checked on etcd, with NATS and with each
//! replica following etcd's own watch.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, RwLock};
use std::time::Duration;

use kapi_e2e::changes::{assert_each_saw_the_log, configmap_log, etcd_configmap_log, rv_of, watch_until, Seen, WatchRun};
use kapi_e2e::{run_with_timeout, Endpoint, HttpResponse, Kapi, NatsServer, Request};
use kapi_storage::etcd::testing::EtcdCluster;
use serde_json::{json, Value};

const NS: &str = "fanout";
const SENTINEL: &str = "sentinel";

/// Replicas sharing one data dir (certificates, and the SQLite file unless on etcd), with
/// nats-server for fan-out, or on etcd with or without it.
struct Cluster {
    nats: Option<NatsServer>,
    etcd: Option<EtcdCluster>,
    replicas: Vec<Kapi>,
}

impl Cluster {
    /// On SQLite with NATS. The first replica creates the database and certificates; the others
    /// start on them.
    fn start(n: usize, extra: &[&str]) -> Cluster {
        let nats = NatsServer::start().expect("start nats-server");
        let url = nats.url();
        let mut args = vec!["--nats-url", url.as_str()];
        args.extend_from_slice(extra);
        Self::with_args(n, &args, Some(nats), None)
    }

    /// On a single-member etcd; with NATS hints, or each replica following etcd's watch alone.
    fn start_on_etcd(n: usize, with_nats: bool) -> Cluster {
        let etcd = EtcdCluster::single().expect("start etcd");
        let servers = etcd.endpoints().join(",");
        let nats = with_nats.then(|| NatsServer::start().expect("start nats-server"));
        let url = nats.as_ref().map(NatsServer::url);
        let mut args = vec!["--storage-backend", "etcd3", "--etcd-servers", servers.as_str()];
        if let Some(url) = &url {
            args.extend(["--nats-url", url.as_str()]);
        }
        Self::with_args(n, &args, nats, Some(etcd))
    }

    fn with_args(n: usize, args: &[&str], nats: Option<NatsServer>, etcd: Option<EtcdCluster>) -> Cluster {
        let first = Kapi::start_with(args).expect("start the first replica");
        let mut replicas = vec![];
        for _ in 1..n {
            replicas.push(first.start_replica(args).expect("start replica"));
        }
        replicas.insert(0, first);
        Cluster { nats, etcd, replicas }
    }

    /// The store's change log of the test namespace's ConfigMaps in `(after, until]`.
    fn log(&self, after: u64, until: u64) -> Vec<Seen> {
        match &self.etcd {
            Some(etcd) => etcd_configmap_log(&etcd.endpoints(), NS, after, until),
            None => configmap_log(&self.data_dir(), NS, after, until),
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.replicas[0].data_dir()
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        self.replicas.iter().map(Kapi::endpoint).collect()
    }

    /// The `fanout` namespace, created through the first replica; returns the revision after it.
    fn create_namespace(&self) -> u64 {
        let r = self.replicas[0]
            .request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})));
        assert_eq!(r.status, 201, "{}", r.raw);
        rv_of(&r.body)
    }
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}})
}

fn collection() -> String {
    format!("/api/v1/namespaces/{NS}/configmaps")
}

/// Create, update twice, delete: four writes per object through `endpoint`.
fn object_cycle(endpoint: &Endpoint, name: &str) -> [HttpResponse; 4] {
    let item = format!("{}/{name}", collection());
    let patch = |v: &str| Request::new("PATCH", &item).raw("application/merge-patch+json", json!({"data": {"v": v}}).to_string());
    [
        endpoint.try_request(&Request::new("POST", &collection()).json(&configmap(name, "0"))),
        endpoint.try_request(&patch("1")),
        endpoint.try_request(&patch("2")),
        endpoint.try_request(&Request::new("DELETE", &item)),
    ]
    .map(|r| r.unwrap_or_else(|e| panic!("{name}: {e}")))
}

fn assert_statuses(name: &str, answers: &[HttpResponse; 4]) {
    let codes: Vec<u16> = answers.iter().map(|r| r.status).collect();
    assert_eq!(codes, [201, 200, 200, 200], "{name}: {:?}", answers.iter().map(|r| &r.raw).collect::<Vec<_>>());
}

/// Starts 6 watchers, 2 per replica: one right away, one later from the same past
/// resourceVersion (it replays what it missed from the cache window).
fn spawn_watchers<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    endpoints: &'s RwLock<Vec<Endpoint>>,
    from: u64,
    timeout_seconds: u32,
    late_start: Duration,
) -> Vec<std::thread::ScopedJoinHandle<'s, WatchRun>> {
    (0..6)
        .map(|i| {
            scope.spawn(move || {
                if i % 2 == 1 {
                    std::thread::sleep(late_start);
                }
                watch_until(endpoints, i / 2, NS, from, timeout_seconds, SENTINEL)
            })
        })
        .collect()
}

fn create_sentinel(endpoint: &Endpoint) -> u64 {
    let r = endpoint.try_request(&Request::new("POST", &collection()).json(&configmap(SENTINEL, "end"))).expect("sentinel");
    assert_eq!(r.status, 201, "{}", r.raw);
    rv_of(&r.body)
}

/// 3 writers (one per replica) x `per_writer` objects x 4 writes, 6 watchers (2 per replica):
/// every watcher sees the store's log exactly once, in order.
fn writers_and_watchers_see_the_log_exactly_once_in_order(cluster: &Cluster, per_writer: usize) {
    let from = cluster.create_namespace();
    let endpoints = RwLock::new(cluster.endpoints());
    let runs = std::thread::scope(|s| {
        let watchers = spawn_watchers(s, &endpoints, from, 600, Duration::from_secs(3));
        std::thread::sleep(Duration::from_millis(500));
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let endpoint = endpoints.read().expect("lock")[w].clone();
                s.spawn(move || {
                    for i in 0..per_writer {
                        let name = format!("w{w}-{i}");
                        assert_statuses(&name, &object_cycle(&endpoint, &name));
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("writer");
        }
        let sentinel = create_sentinel(&endpoints.read().expect("lock")[1]);
        let runs: Vec<WatchRun> = watchers.into_iter().map(|w| w.join().expect("watcher")).collect();
        (runs, sentinel)
    });
    let (runs, sentinel) = runs;
    let log = cluster.log(from, sentinel);
    // The namespace's kube-root-ca.crt (kube's root-ca-cert-publisher) may land in the window too.
    let written = log.iter().filter(|e| e.name != "kube-root-ca.crt").count();
    assert_eq!(written, 3 * per_writer * 4 + 1, "the log holds every write and the sentinel");
    assert_each_saw_the_log(&runs, &log);
}

#[test]
fn three_replicas_three_writers_six_watchers_see_the_log_exactly_once_in_order() {
    // 3 writers x 250 objects x 4 writes = 3,000 writes.
    writers_and_watchers_see_the_log_exactly_once_in_order(&Cluster::start(3, &[]), 250);
}

#[test]
fn on_etcd_with_nats_watchers_on_every_replica_see_the_log_exactly_once_in_order() {
    writers_and_watchers_see_the_log_exactly_once_in_order(&Cluster::start_on_etcd(3, true), 100);
}

#[test]
fn on_etcd_without_nats_replicas_follow_etcd_and_watchers_see_the_log_exactly_once_in_order() {
    writers_and_watchers_see_the_log_exactly_once_in_order(&Cluster::start_on_etcd(3, false), 100);
}

#[test]
fn conflicting_updates_on_different_replicas_one_wins_the_others_get_409() {
    let cluster = Cluster::start(3, &[]);
    cluster.create_namespace();
    let endpoints = cluster.endpoints();
    let created = endpoints[0].try_request(&Request::new("POST", &collection()).json(&configmap("contended", "start"))).expect("create");
    assert_eq!(created.status, 201, "{}", created.raw);
    let item = format!("{}/contended", collection());
    for round in 0..20 {
        // Every replica reads the same version (a consistent GET right after the last write).
        let current = endpoints[round % 3].try_request(&Request::get(&item)).expect("get");
        assert_eq!(current.status, 200, "{}", current.raw);
        let barrier = Barrier::new(3);
        let answers: Vec<HttpResponse> = std::thread::scope(|s| {
            let handles: Vec<_> = endpoints
                .iter()
                .enumerate()
                .map(|(i, endpoint)| {
                    let mut obj = current.body.clone();
                    obj["data"]["v"] = json!(format!("round {round} by replica {i}"));
                    let (barrier, item) = (&barrier, &item);
                    s.spawn(move || {
                        barrier.wait();
                        endpoint.try_request(&Request::new("PUT", item).json(&obj)).expect("put")
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("writer")).collect()
        });
        let won: Vec<&HttpResponse> = answers.iter().filter(|r| r.status == 200).collect();
        let lost: Vec<&HttpResponse> = answers.iter().filter(|r| r.status == 409).collect();
        assert_eq!((won.len(), lost.len()), (1, 2), "round {round}: {:?}", answers.iter().map(|r| (r.status, &r.raw)).collect::<Vec<_>>());
        for r in lost {
            assert_eq!(r.reason(), "Conflict", "{}", r.raw);
            assert!(r.message().contains("the object has been modified; please apply your changes to the latest version and try again"), "{}", r.raw);
        }
        // Every replica now serves the winner's write.
        let winner_rv = rv_of(&won[0].body);
        for endpoint in &endpoints {
            let after = endpoint.try_request(&Request::get(&item)).expect("get");
            assert_eq!(rv_of(&after.body), winner_rv);
            assert_eq!(after.body["data"], won[0].body["data"]);
        }
    }
}

/// A Python client (the real `kubernetes` package) creates on one replica and at once reads on
/// the next, 1,000 times; every tenth time it also lists with a field selector.
const READ_YOUR_WRITES: &str = r#"
import sys
from kubernetes import client
from kubernetes.client.rest import ApiException

def api(url, pki):
    c = client.Configuration()
    c.host = url
    c.ssl_ca_cert = pki + "/ca.crt"
    c.cert_file = pki + "/admin.crt"
    c.key_file = pki + "/admin.key"
    return client.CoreV1Api(client.ApiClient(c))

pki = sys.argv[1]
apis = [api(u, pki) for u in sys.argv[2:]]
failures = []
for i in range(1000):
    writer, reader = apis[i % len(apis)], apis[(i + 1) % len(apis)]
    name = "ryw-%d" % i
    created = writer.create_namespaced_config_map("fanout", {"metadata": {"name": name}, "data": {"i": str(i)}})
    try:
        got = reader.read_namespaced_config_map(name, "fanout")
        if got.metadata.resource_version != created.metadata.resource_version:
            failures.append("%s: read rv %s, wrote %s" % (name, got.metadata.resource_version, created.metadata.resource_version))
    except ApiException as e:
        failures.append("%s: GET %s" % (name, e.status))
    if i % 10 == 0:
        listed = reader.list_namespaced_config_map("fanout", field_selector="metadata.name=" + name)
        if [o.metadata.name for o in listed.items] != [name]:
            failures.append("%s: consistent LIST missed it" % name)
print("pairs=1000 failures=%d" % len(failures))
for f in failures[:20]:
    print(f)
"#;

/// [`READ_YOUR_WRITES`] through every replica of `cluster`.
fn python_client_reads_its_writes_on_every_replica(cluster: &Cluster) {
    cluster.create_namespace();
    let endpoints = cluster.endpoints();
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(READ_YOUR_WRITES).arg(&endpoints[0].pki);
    for e in &endpoints {
        cmd.arg(&e.url);
    }
    let out = run_with_timeout(&mut cmd, Duration::from_secs(300)).expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("pairs=1000 failures=0"), "{stdout}");
}

#[test]
fn read_your_writes_across_replicas_with_the_python_client() {
    python_client_reads_its_writes_on_every_replica(&Cluster::start(3, &[]));
}

#[test]
fn read_your_writes_across_replicas_on_etcd_without_nats() {
    python_client_reads_its_writes_on_every_replica(&Cluster::start_on_etcd(3, false));
}

/// Counters from a replica's /metrics.
fn metric(endpoint: &Endpoint, name: &str) -> f64 {
    let r = endpoint.try_request(&Request::get("/metrics").accept("text/plain")).expect("metrics");
    r.raw
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.trim().parse::<f64>().ok()))
        .unwrap_or_else(|| panic!("{name} missing from /metrics"))
}

#[test]
fn nats_outage_replica_crash_and_moving_watchers_lose_or_repeat_nothing() {
    let mut cluster = Cluster::start(3, &["--watch-cache-size", "20000"]);
    let from = cluster.create_namespace();
    let endpoints = RwLock::new(cluster.endpoints());
    let stop = AtomicBool::new(false);
    let writes = AtomicUsize::new(0);
    let (runs, sentinel) = std::thread::scope(|s| {
        // Watchers end their connections every 3 s (timeoutSeconds) and resume on the next
        // replica from their last resourceVersion.
        let watchers = spawn_watchers(s, &endpoints, from, 3, Duration::from_secs(2));
        let writers: Vec<_> = (0..3)
            .map(|w| {
                let (endpoints, stop, writes) = (&endpoints, &stop, &writes);
                s.spawn(move || {
                    let mut turn = w;
                    let mut i = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let endpoint = {
                            let all = endpoints.read().expect("lock");
                            all[turn % all.len()].clone()
                        };
                        let name = format!("w{w}-{i}");
                        i += 1;
                        let answers = object_cycle(&endpoint, &name);
                        writes.fetch_add(answers.iter().filter(|r| r.status < 300).count(), Ordering::SeqCst);
                        if answers.iter().any(|r| r.status == 0) {
                            // The replica is gone: carry on through the next one.
                            turn += 1;
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(3));

        // NATS dies for 5 s under load; replicas follow by polling, then reconnect and repair.
        let nats = cluster.nats.as_mut().expect("a cluster with NATS");
        nats.kill();
        std::thread::sleep(Duration::from_secs(5));
        nats.restart().expect("restart nats-server");
        std::thread::sleep(Duration::from_secs(3));

        // Replica 2 is SIGKILLed; its watchers resume elsewhere; it comes back on a new port.
        cluster.replicas[2].kill9();
        std::thread::sleep(Duration::from_secs(2));
        cluster.replicas[2].restart().expect("restart replica 2");
        endpoints.write().expect("lock")[2] = cluster.replicas[2].endpoint();
        std::thread::sleep(Duration::from_secs(4));

        stop.store(true, Ordering::SeqCst);
        for w in writers {
            w.join().expect("writer");
        }
        let sentinel = create_sentinel(&endpoints.read().expect("lock")[0]);
        let runs: Vec<WatchRun> = watchers.into_iter().map(|w| w.join().expect("watcher")).collect();
        (runs, sentinel)
    });
    let log = cluster.log(from, sentinel);
    eprintln!(
        "fault run: {} acknowledged writes, {} log events, watcher connections {:?}",
        writes.load(Ordering::SeqCst),
        log.len(),
        runs.iter().map(|r| r.connections.len()).collect::<Vec<_>>()
    );
    assert!(log.len() > 300, "too little load to mean anything: {} events", log.len());
    assert!(runs.iter().all(|r| r.connections.len() >= 4), "watchers did not move between replicas");
    assert_each_saw_the_log(&runs, &log);

    // The outage shows in the metrics: a reconnect, and commits read from the log that no hint
    // announced.
    let endpoints = cluster.endpoints();
    let reconnects: f64 = endpoints[..2].iter().map(|e| metric(e, "kapi_nats_reconnects_total")).sum();
    let repairs: f64 = endpoints[..2].iter().map(|e| metric(e, "kapi_watch_cache_repairs_total")).sum();
    assert!(reconnects >= 2.0, "replicas 0 and 1 reconnected to NATS: {reconnects}");
    assert!(repairs >= 1.0, "commits made during the outage were repaired from the log: {repairs}");
    for e in &endpoints {
        assert_eq!(metric(e, "kapi_nats_connected"), 1.0);
    }
}

/// `deploy/local/cluster.sh`: nats-server, 2 replicas on one SQLite file and haproxy in front
/// (deploy/haproxy/haproxy.cfg), kubectl through the load balancer, then a clean stop.
#[test]
fn local_cluster_script_starts_replicas_behind_haproxy_and_stops_them() {
    local_cluster_script(false, false);
}

/// The same with `KAPI_STORAGE=etcd`: a 3-member etcd cluster under the replicas.
#[test]
fn local_cluster_script_on_a_three_member_etcd() {
    local_cluster_script(true, false);
}

/// The same with `KAPI_MODE=split`: the two replicas are kapi-aggregators in front of one
/// kapi-core and one kapi-extensions replica, each tier behind its own haproxy.
#[test]
fn local_cluster_script_splits_the_tiers() {
    local_cluster_script(false, true);
}

fn local_cluster_script(on_etcd: bool, split: bool) {
    let state = tempfile::Builder::new().prefix("kapi-local-").tempdir().expect("state dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/local/cluster.sh");
    let bin = kapi_e2e::kapi_binary().expect("kapi binary");
    let lb = kapi_e2e::free_port().expect("port");
    let nats = kapi_e2e::free_port().expect("port");
    // Every port chosen free: the script's defaults (the ports after the load balancer's) may
    // be some other process's ephemeral port by now.
    let replica_ports = format!("{} {}", kapi_e2e::free_port().expect("port"), kapi_e2e::free_port().expect("port"));
    let stats = kapi_e2e::free_port().expect("port");
    let etcd_ports = (0..6).map(|_| kapi_e2e::free_port().expect("port").to_string()).collect::<Vec<_>>().join(" ");
    // Split: each tier's haproxy, its stats page and one replica.
    let tier_ports = || (0..3).map(|_| kapi_e2e::free_port().expect("port").to_string()).collect::<Vec<_>>().join(" ");
    let (core_ports, extensions_ports) = (tier_ports(), tier_ports());
    let run = |args: &[&str]| {
        let mut cmd = Command::new("bash");
        cmd.arg(&script)
            .args(args)
            .env("KAPI_LOCAL_DIR", state.path())
            .env("KAPI_BIN", &bin)
            .env("KAPI_LB_PORT", lb.to_string())
            .env("KAPI_REPLICA_PORTS", &replica_ports)
            .env("KAPI_LB_STATS_PORT", stats.to_string())
            .env("NATS_PORT", nats.to_string());
        if on_etcd {
            cmd.env("KAPI_STORAGE", "etcd").env("KAPI_ETCD_PORTS", &etcd_ports);
        }
        if split {
            cmd.env("KAPI_MODE", "split").env("KAPI_CORE_PORTS", &core_ports).env("KAPI_EXTENSIONS_PORTS", &extensions_ports);
        }
        run_with_timeout(&mut cmd, Duration::from_secs(120)).expect("cluster.sh")
    };
    let started = run(&["start", "2"]);
    let mut processes = vec!["nats", "haproxy", "kapi-0", "kapi-1"];
    if on_etcd {
        processes.extend(["etcd-0", "etcd-1", "etcd-2"]);
    }
    if split {
        processes.extend(["core-0", "extensions-0", "haproxy-core", "haproxy-extensions"]);
    }
    let pids: Vec<String> =
        processes.iter().filter_map(|n| std::fs::read_to_string(state.path().join(format!("{n}.pid"))).ok()).map(|p| p.trim().to_owned()).collect();
    let cleanup = || {
        for pid in &pids {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    };
    if !started.status.success() {
        cleanup();
        let logs: String = ["kapi-0", "kapi-1", "nats", "haproxy", "core-0", "extensions-0"]
            .iter()
            .filter_map(|n| std::fs::read_to_string(state.path().join(format!("{n}.log"))).ok().map(|log| format!("\n===== {n}.log =====\n{log}")))
            .collect();
        panic!("start: {}{}{logs}", String::from_utf8_lossy(&started.stdout), String::from_utf8_lossy(&started.stderr));
    }
    assert_eq!(pids.len(), processes.len(), "a pid file per process");
    let kubeconfig = state.path().join("kubeconfig");
    let kubectl = |args: &[&str]| {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&kubeconfig).args(args);
        run_with_timeout(&mut cmd, Duration::from_secs(60)).expect("kubectl")
    };
    for i in 0..6 {
        let out = kubectl(&["create", "configmap", &format!("through-lb-{i}")]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let listed = kubectl(&["get", "configmaps", "-o", "name"]);
    let names = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(names.lines().filter(|l| l.contains("through-lb-")).count(), 6, "{names}");
    let status = run(&["status"]);
    let status = String::from_utf8_lossy(&status.stdout);
    for port in replica_ports.split(' ') {
        assert!(status.contains(&format!("127.0.0.1:{port}")), "{status}");
    }
    let stopped = run(&["stop"]);
    let leftovers: Vec<&String> = pids.iter().filter(|p| Command::new("kill").args(["-0", p]).status().is_ok_and(|s| s.success())).collect();
    cleanup();
    assert!(stopped.status.success(), "{}", String::from_utf8_lossy(&stopped.stderr));
    assert!(leftovers.is_empty(), "processes left running: {leftovers:?}");
    for i in 0..2 {
        let log = std::fs::read_to_string(state.path().join(format!("kapi-{i}.log"))).unwrap_or_default();
        assert!(log.contains("Serving securely on"), "replica {i}: {log}");
    }
    if split {
        assert!(status.contains("core-0: running") && status.contains("extensions-0: running"), "{status}");
        for tier in ["core-0", "extensions-0"] {
            let log = std::fs::read_to_string(state.path().join(format!("{tier}.log"))).unwrap_or_default();
            assert!(log.contains("Serving securely on"), "{tier}: {log}");
        }
    }
    if on_etcd {
        // The objects went to etcd, not to a SQLite file.
        assert!(!state.path().join("data/kapi.db").exists(), "no SQLite database on etcd");
        assert!(status.contains("etcd-2: running"), "{status}");
    }
}

/// Three replicas started at the same moment on an empty data dir: one set of certificates,
/// one bootstrap (namespaces, RBAC policy) however their reconciliations interleave, and a
/// restart changes nothing (no duplicated binding subjects).
#[test]
fn replicas_started_together_on_a_fresh_data_dir_share_one_bootstrap() {
    let mut replicas = Kapi::start_replicas(3, &[]).expect("three replicas start together");
    let binding = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:controller:attachdetach-controller";
    let subjects = |kapi: &Kapi| {
        let b = kapi.get_json(binding);
        (b["subjects"].as_array().map(Vec::len).unwrap_or(0), rv_of(&b))
    };
    let (count, rv) = subjects(&replicas[0]);
    assert_eq!(count, 1, "one subject, not one per replica");
    for r in &replicas {
        assert_eq!(r.get_json("/readyz").as_str(), Some("ok"));
        assert_eq!(subjects(r), (1, rv));
    }
    replicas[1].restart().expect("restart");
    assert_eq!(subjects(&replicas[1]), (1, rv), "a restart reconciles nothing that is already there");
}
