//! Two kapi replicas (one SQLite file, NATS fan-out) behind haproxy configured by
//! `deploy/haproxy/haproxy.cfg`, under a steady mixed load and 20 watches through the load
//! balancer: a SIGTERMed replica and a rolling restart of both cost the clients nothing — no
//! connection error, no 5xx, every watch resumes on the other replica from its last
//! resourceVersion without missing or repeating an event — and each stopped replica exits 0
//! within its shutdown delay plus the drain bound. The same holds for the tiers split
//! (issue 18): two kapi-aggregators behind haproxy in front of two kapi-core and two
//! kapi-extensions replicas, each tier behind its own haproxy, restarted one replica at a time.

use std::sync::RwLock;
use std::time::{Duration, Instant};

use kapi_e2e::changes::{assert_each_saw_the_log, configmap_log, rv_of, watch_until, WatchRun};
use kapi_e2e::load::{Load, LoadReport};
use kapi_e2e::{free_port, wait_for, Endpoint, Haproxy, Kapi, NatsServer, Request};
use serde_json::json;

const NS: &str = "behind-lb";
const SENTINEL: &str = "sentinel";
/// `--shutdown-delay-duration` of the replicas: long enough for haproxy (checking every 250 ms)
/// to take a replica out while it still serves.
const DELAY: Duration = Duration::from_secs(3);
/// What the drain after the delay may take here: in-flight requests are short, watches end
/// spread over the 2 s termination grace period.
const DRAIN_BOUND: Duration = Duration::from_secs(10);
/// Load: 20 clients x 15 requests/s offered. The test needs at least 200/s answered; each
/// client waits for its answer before the next request, so the head room keeps a busy
/// machine (answers taking up to 100 ms) above that.
const WORKERS: usize = 20;
const RATE_PER_WORKER: f64 = 15.0;
const WATCHERS: usize = 20;

struct Setup {
    _nats: NatsServer,
    /// The replicas behind the front haproxy (kapi, or kapi-aggregator when split).
    replicas: Vec<Kapi>,
    /// Split: the core and extensions replicas, and their tiers' haproxies.
    tiers: Vec<Kapi>,
    _tier_lbs: Vec<Haproxy>,
    haproxy: Haproxy,
    lb: Endpoint,
}

fn setup(split: bool) -> Setup {
    let nats = NatsServer::start().expect("nats-server");
    let url = nats.url();
    let ports: Vec<String> = (0..6).map(|_| free_port().expect("port").to_string()).collect();
    let args = |port: &str| {
        ["--secure-port", port, "--nats-url", url.as_str(), "--shutdown-delay-duration", "3s", "--shutdown-watch-termination-grace-period", "2s"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<Vec<String>>()
    };
    let (first, mut tiers, tier_lbs) = if split {
        let tier = |port: &str| [args(port), vec!["--endpoint-reconciler-type".into(), "none".into()]].concat();
        let core = Kapi::start_binary("kapi-core", &refs(&tier(&ports[2]))).expect("core replica 1");
        let tiers = vec![
            core.start_tier("kapi-core", &refs(&tier(&ports[3]))).expect("core replica 2"),
            core.start_tier("kapi-extensions", &refs(&tier(&ports[4]))).expect("extensions replica 1"),
            core.start_tier("kapi-extensions", &refs(&tier(&ports[5]))).expect("extensions replica 2"),
        ];
        let ca = core.pki_dir().join("ca.crt");
        let lbs = vec![
            Haproxy::start(&[core.port(), tiers[0].port()], &ca).expect("core haproxy"),
            Haproxy::start(&[tiers[1].port(), tiers[2].port()], &ca).expect("extensions haproxy"),
        ];
        (core, tiers, lbs)
    } else {
        (Kapi::start_with(&refs(&args(&ports[0]))).expect("first replica"), Vec::new(), Vec::new())
    };
    let front_args = |port: &str| {
        let mut a = args(port);
        if split {
            a.extend(["--core-url".into(), format!("https://127.0.0.1:{}", tier_lbs[0].port()), "--extensions-url".into(), format!("https://127.0.0.1:{}", tier_lbs[1].port())]);
        }
        a
    };
    let replicas = if split {
        let a = first.start_tier("kapi-aggregator", &refs(&front_args(&ports[0]))).expect("aggregator 1");
        let b = first.start_tier("kapi-aggregator", &refs(&front_args(&ports[1]))).expect("aggregator 2");
        tiers.insert(0, first);
        vec![a, b]
    } else {
        let second = first.start_replica(&refs(&args(&ports[1]))).expect("second replica");
        vec![first, second]
    };
    let pki = replicas[0].pki_dir();
    let scratch = replicas[0].data_dir();
    let haproxy = Haproxy::start(&replicas.iter().map(Kapi::port).collect::<Vec<_>>(), &pki.join("ca.crt")).expect("haproxy");
    let lb = Endpoint::new(format!("https://127.0.0.1:{}", haproxy.port()), pki, scratch);
    let ready = wait_for(Duration::from_secs(20), || (lb.try_request(&Request::get("/readyz")).ok()?.status == 200).then_some(()));
    assert!(ready.is_some(), "haproxy has no ready replica: {}", haproxy.log());
    Setup { _nats: nats, replicas, tiers, _tier_lbs: tier_lbs, haproxy, lb }
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// SIGTERM, then the exit code and how long the replica took.
fn stop(replica: &mut Kapi) -> (Option<i32>, Duration) {
    let started = Instant::now();
    let code = replica.terminate().expect("terminate");
    (code, started.elapsed())
}

/// Restarts a stopped replica on its port and waits until it is ready and haproxy (rise 2 x
/// 250 ms) sends it traffic again: `settle` covers haproxy's checks on a busy machine.
fn bring_back(replica: &mut Kapi, settle: Duration) {
    replica.restart().expect("restart");
    let ready = wait_for(Duration::from_secs(30), || (replica.try_request(&Request::get("/readyz")).ok()?.status == 200).then_some(()));
    assert!(ready.is_some(), "restarted replica never became ready:\n{}", replica.log());
    std::thread::sleep(settle);
}

/// Runs `scenario` under the load and the watches, then checks what the clients saw.
fn under_load(split: bool, scenario: impl FnOnce(&mut Setup)) {
    let mut setup = setup(split);
    let ns = setup.lb.try_request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})));
    let ns = ns.expect("create namespace");
    assert_eq!(ns.status, 201, "{}", ns.raw);
    let from = rv_of(&ns.body);
    let endpoints = RwLock::new(vec![setup.lb.clone()]);
    let addr = format!("127.0.0.1:{}", setup.haproxy.port());
    let (report, runs, sentinel): (LoadReport, Vec<WatchRun>, u64) = std::thread::scope(|s| {
        let watchers: Vec<_> = (0..WATCHERS).map(|_| s.spawn(|| watch_until(&endpoints, 0, NS, from, 600, SENTINEL))).collect();
        let load = Load::start(&addr, &setup.lb.pki, NS, WORKERS, RATE_PER_WORKER);
        std::thread::sleep(Duration::from_secs(3));
        scenario(&mut setup);
        std::thread::sleep(Duration::from_secs(2));
        let report = load.stop();
        let sentinel = setup
            .lb
            .try_request(&Request::new("POST", &format!("/api/v1/namespaces/{NS}/configmaps")).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SENTINEL}})))
            .expect("sentinel");
        assert_eq!(sentinel.status, 201, "{}", sentinel.raw);
        let runs = watchers.into_iter().map(|w| w.join().expect("watcher")).collect();
        (report, runs, rv_of(&sentinel.body))
    });
    eprintln!(
        "load: {} ok ({:.0}/s), {} throttled, {} reconnects; watch connections {:?}",
        report.ok,
        report.rate(),
        report.throttled,
        report.reconnects,
        runs.iter().map(|r| r.connections.len()).collect::<Vec<_>>()
    );
    assert!(report.connection_errors.is_empty(), "connection errors: {:?}\nhaproxy: {}", report.connection_errors, setup.haproxy.log());
    assert!(report.server_errors.is_empty(), "5xx answers: {:?}", report.server_errors);
    assert!(report.unexpected.is_empty(), "unexpected answers: {:?}", report.unexpected);
    assert_eq!(report.throttled_without_retry_after, 0, "429 without Retry-After");
    // Split, nine processes share the machine and every request crosses two servers: the
    // floor that says the load meant something is lower.
    let floor = if split { 100.0 } else { 200.0 };
    assert!(report.rate() >= floor, "the load was below {floor} requests/s: {:.0}/s", report.rate());
    let log = configmap_log(&setup.replicas[0].data_dir(), NS, from, sentinel);
    assert!(log.len() > 500, "the load wrote too little to mean anything: {} events", log.len());
    assert_each_saw_the_log(&runs, &log);
    assert!(runs.iter().any(|r| r.connections.len() > 1), "no watch had to move to the other replica");
}

#[test]
fn sigterm_of_one_replica_under_load_costs_clients_nothing() {
    under_load(false, |setup| {
        let (code, took) = stop(&mut setup.replicas[1]);
        assert_eq!(code, Some(0), "the stopped replica exits 0:\n{}", setup.replicas[1].log());
        assert!(took >= DELAY, "it stopped before its shutdown delay was over: {took:?}");
        assert!(took <= DELAY + DRAIN_BOUND, "it took {took:?}, beyond delay + drain bound");
    });
}

/// Stops each of `replicas` in turn (it must exit 0 within delay + drain) and brings it back.
fn restart_each(replicas: &mut [Kapi], what: &str, settle: Duration) {
    for (i, replica) in replicas.iter_mut().enumerate() {
        let (code, took) = stop(replica);
        assert_eq!(code, Some(0), "{what} {i} exits 0:\n{}", replica.log());
        assert!(took <= DELAY + DRAIN_BOUND, "{what} {i} took {took:?}");
        bring_back(replica, settle);
    }
}

#[test]
fn rolling_restart_of_both_replicas_under_load_costs_clients_nothing() {
    under_load(false, |setup| restart_each(&mut setup.replicas, "replica", Duration::from_secs(1)));
}

/// Split: every replica of every tier stopped and brought back in turn (the aggregators the
/// clients reach, then the core and extensions replicas behind them).
#[test]
fn rolling_restart_of_every_tier_split_under_load_costs_clients_nothing() {
    under_load(true, |setup| {
        restart_each(&mut setup.replicas, "aggregator", Duration::from_secs(3));
        restart_each(&mut setup.tiers, "tier replica", Duration::from_secs(3));
    });
}
