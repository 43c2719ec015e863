//! The soak under faults (issue 20): nats-server (JetStream), 3 kapi replicas on one SQLite
//! file with `--nats-url` and fixed ports, haproxy in front; clients write ConfigMaps of a small
//! set of names (create, PUT with `metadata.resourceVersion`, JSON patch testing it, delete
//! with `preconditions.resourceVersion`) and read them (GET, consistent LIST), through haproxy
//! and straight to the replicas; watchers on every replica resume from their last
//! resourceVersion after each cut (410 and relist when compaction passed it). Every few seconds
//! a fault: SIGKILL and restart of a replica, SIGSTOP/SIGCONT of nats-server, SIGKILL and
//! restart of nats-server, or every client connection dropped (their curl SIGKILLed
//! mid-request or mid-stream).
//!
//! The truth is the store's change log, read as the run goes. At the end: every acknowledged
//! write is in it; no write was applied twice; each name's history is linearizable (the
//! [`crate::linearizability`] checker, with unknown outcomes resolved from the log as etcd's
//! robustness tests resolve them: a write whose unique value is in the log happened, with that
//! revision and no known return; one that is not never happened); every watch stream holds
//! the log exactly once, in order; every consistent LIST is the state the log replays to at its
//! resourceVersion. Bounded: the run's length is given, every wait has a deadline, processes
//! are started on loopback with free ports and stopped by PID.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::changes::{follow_log, rv_of, Follow, Truth};
use crate::linearizability::{check, Input, Operation, Output, Verdict};
use crate::reflector::{judge, listed, state_at, Reflector, WatchRun};
use crate::{free_port, Connections, Endpoint, Haproxy, HttpResponse, Kapi, NatsServer, Request};

const NS: &str = "soak";
const SENTINEL: &str = "sentinel";

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// How long clients write and faults are injected.
    pub duration: Duration,
    /// Mean time between faults (each gap drawn from 0.5x to 1.5x of it).
    pub fault_interval: Duration,
    /// Concurrent clients (each one request at a time).
    pub clients: usize,
    /// Names the clients share (fewer: more contention per name).
    pub keys: usize,
    /// Watchers on each replica.
    pub watchers_per_replica: usize,
    /// Seed of the clients' and the injector's choices.
    pub seed: u64,
    /// Search steps the linearizability checker may take per name.
    pub check_budget: usize,
    /// `--storage-compaction-window` of the replicas.
    pub compaction_window: &'static str,
}

impl Default for SoakConfig {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(60),
            fault_interval: Duration::from_secs(4),
            clients: 6,
            keys: 16,
            watchers_per_replica: 2,
            seed: 20,
            check_budget: 50_000_000,
            compaction_window: "30s",
        }
    }
}

/// A small deterministic generator (xorshift64*): runs are reproducible from their seed, up to
/// timing.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// A duration from 0.5x to 1.5x of `d`.
    fn around(&mut self, d: Duration) -> Duration {
        d.mul_f64(0.5 + self.below(1000) as f64 / 1000.0)
    }
}

/// The kinds of requests, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Create,
    Update,
    Patch,
    Delete,
    Get,
    List,
}

/// One request as the client saw it.
#[derive(Debug, Clone)]
struct Record {
    client: usize,
    kind: Kind,
    /// The name (empty for a LIST).
    key: String,
    /// The value written (create, update, patch).
    value: String,
    /// The precondition (update, patch, delete).
    expected: u64,
    /// Microseconds since the start.
    call: u64,
    ret: u64,
    status: u16,
    /// Whether curl could not even connect (nothing was sent).
    unsent: bool,
    body: Value,
    raw: String,
}

/// Counts of one kind of request by how it ended.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub ok: usize,
    /// 404, 409, 422: the precondition or existence said no.
    pub refused: usize,
    /// No answer or 5xx: the outcome is unknown.
    pub unknown: usize,
    /// Never sent (connection refused) or 429.
    pub not_sent: usize,
    /// Anything else (a bug, or a harness problem).
    pub unexpected: usize,
}

/// What the soak did and found.
#[derive(Debug, Default)]
pub struct SoakReport {
    pub seconds: f64,
    pub ops: BTreeMap<Kind, Counts>,
    pub faults: BTreeMap<&'static str, usize>,
    /// Client connections cut by the "drop connections" faults.
    pub connections_cut: usize,
    /// Names whose history was checked, and operations in those histories.
    pub histories: usize,
    pub history_ops: usize,
    /// Unknown outcomes the log resolved: (applied, never applied).
    pub unknown_resolved: (usize, usize),
    pub linearizability_violations: Vec<String>,
    pub inconclusive: Vec<String>,
    pub longest_check: Duration,
    /// Writes whose value the log holds more than once.
    pub duplicated_writes: Vec<String>,
    pub acked_writes: usize,
    pub acked_lost: Vec<String>,
    pub watchers: usize,
    pub watch_events: usize,
    pub watch_connections: usize,
    pub watch_relists: usize,
    pub watch_violations: Vec<String>,
    /// Consistent LISTs checked against the log, and those that differ.
    pub lists_checked: usize,
    pub list_violations: Vec<String>,
    pub unexpected: Vec<String>,
    pub log_events: usize,
    pub compactions: usize,
    pub harness_errors: Vec<String>,
}

impl SoakReport {
    /// Everything that must be zero.
    pub fn violations(&self) -> usize {
        self.linearizability_violations.len()
            + self.duplicated_writes.len()
            + self.acked_lost.len()
            + self.watch_violations.len()
            + self.list_violations.len()
            + self.unexpected.len()
            + self.harness_errors.len()
    }
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: usize = self.ops.values().map(|c| c.ok + c.refused + c.unknown + c.not_sent + c.unexpected).sum();
        writeln!(f, "soak report ({:.0} s of load and faults)", self.seconds)?;
        writeln!(f, "  operations done: {total}")?;
        for (kind, c) in &self.ops {
            writeln!(f, "    {kind:?}: ok {}, refused (404/409/422) {}, unknown outcome {}, not sent {}, unexpected {}", c.ok, c.refused, c.unknown, c.not_sent, c.unexpected)?;
        }
        let faults: usize = self.faults.values().sum();
        writeln!(f, "  faults injected: {faults} {:?} (client connections cut: {})", self.faults, self.connections_cut)?;
        writeln!(
            f,
            "  histories checked: {} names, {} operations (unknown outcomes resolved from the log: {} applied, {} never applied); longest check {:?}; inconclusive {}",
            self.histories, self.history_ops, self.unknown_resolved.0, self.unknown_resolved.1, self.longest_check, self.inconclusive.len()
        )?;
        writeln!(f, "  linearizability violations: {}", self.linearizability_violations.len())?;
        writeln!(f, "  writes applied twice: {}", self.duplicated_writes.len())?;
        writeln!(
            f,
            "  watchers {}: events {}, connections {}, 410 relists {}; watch violations: {}",
            self.watchers,
            self.watch_events,
            self.watch_connections,
            self.watch_relists,
            self.watch_violations.len()
        )?;
        writeln!(f, "  consistent lists checked against the log: {}, differing: {}", self.lists_checked, self.list_violations.len())?;
        writeln!(f, "  acknowledged writes: {}, lost: {}", self.acked_writes, self.acked_lost.len())?;
        writeln!(f, "  unexpected answers: {}; harness errors: {}", self.unexpected.len(), self.harness_errors.len())?;
        write!(f, "  log events {}, compactions seen {}", self.log_events, self.compactions)?;
        for (what, list) in [
            ("linearizability", &self.linearizability_violations),
            ("inconclusive", &self.inconclusive),
            ("applied twice", &self.duplicated_writes),
            ("lost", &self.acked_lost),
            ("watch", &self.watch_violations),
            ("list", &self.list_violations),
            ("unexpected", &self.unexpected),
            ("harness", &self.harness_errors),
        ] {
            for line in list.iter().take(10) {
                write!(f, "\n  {what}: {line}")?;
            }
        }
        Ok(())
    }
}

fn collection() -> String {
    format!("/api/v1/namespaces/{NS}/configmaps")
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}})
}

fn value_of(obj: &Value) -> String {
    obj["data"]["v"].as_str().unwrap_or_default().to_owned()
}

fn micros(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Sets its flags when dropped, also when a thread panics (a scope waits for its threads).
struct StopOnDrop<'a>(Vec<&'a AtomicBool>);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        for flag in &self.0 {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

/// One client: one request at a time on random names and endpoints.
struct Client<'a> {
    id: usize,
    rng: Rng,
    endpoints: &'a [Endpoint],
    connections: &'a Connections,
    t0: Instant,
    keys: usize,
    /// What this client last saw of each name: Some(rv) exists, None absent or unknown.
    known: HashMap<usize, Option<u64>>,
    records: Vec<Record>,
    written: usize,
}

impl Client<'_> {
    fn send(&mut self, kind: Kind, key: &str, value: &str, expected: u64, req: &Request) -> Record {
        // haproxy (endpoints[0]) half the time, each replica a third of the other half.
        let replicas = self.endpoints.len() as u64 - 1;
        let pick = self.rng.below(2 * replicas);
        let endpoint = &self.endpoints[usize::try_from(pick.saturating_sub(replicas - 1)).unwrap_or(0)];
        let call = micros(self.t0);
        let r = endpoint
            .try_request_cuttable(req, self.connections)
            .unwrap_or_else(|e| HttpResponse { status: 0, body: Value::Null, raw: format!("harness: {e}") });
        let ret = micros(self.t0);
        let unsent = r.status == 0 && (r.raw.contains("curl: (7)") || r.raw.starts_with("harness:"));
        let record = Record {
            client: self.id,
            kind,
            key: key.to_owned(),
            value: value.to_owned(),
            expected,
            call,
            ret,
            status: r.status,
            unsent,
            body: if (200..300).contains(&r.status) { r.body } else { Value::Null },
            raw: if (200..300).contains(&r.status) { String::new() } else { r.raw.chars().take(200).collect() },
        };
        self.records.push(record.clone());
        if r.status == 0 || r.status >= 429 {
            std::thread::sleep(Duration::from_millis(50));
        }
        record
    }

    fn get(&mut self, k: usize) {
        let key = format!("k{k:02}");
        let r = self.send(Kind::Get, &key, "", 0, &Request::get(&format!("{}/{key}", collection())));
        match r.status {
            200 => {
                self.known.insert(k, Some(rv_of(&r.body)));
            }
            404 => {
                self.known.insert(k, None);
            }
            _ => {}
        }
    }

    fn step(&mut self) {
        let k = usize::try_from(self.rng.below(self.keys as u64)).unwrap_or(0);
        let key = format!("k{k:02}");
        let item = format!("{}/{key}", collection());
        let roll = self.rng.below(100);
        if roll < 8 {
            self.send(Kind::List, "", "", 0, &Request::get(&collection()));
            return;
        }
        // Reads: a GET (also before a write, half the time, so preconditions are often fresh).
        if roll < 30 || !self.known.contains_key(&k) || self.rng.below(2) == 0 {
            self.get(k);
            if roll < 30 {
                return;
            }
        }
        self.written += 1;
        let value = format!("c{}-{}", self.id, self.written);
        let known = self.known.get(&k).copied().flatten();
        let r = match known {
            None => self.send(Kind::Create, &key, &value, 0, &Request::new("POST", &collection()).json(&configmap(&key, &value))),
            Some(rv) => match self.rng.below(10) {
                0..=3 => {
                    let mut obj = configmap(&key, &value);
                    obj["metadata"]["resourceVersion"] = json!(rv.to_string());
                    self.send(Kind::Update, &key, &value, rv, &Request::new("PUT", &item).json(&obj))
                }
                4..=6 => {
                    let patch = json!([
                        {"op": "test", "path": "/metadata/resourceVersion", "value": rv.to_string()},
                        {"op": "replace", "path": "/data/v", "value": value},
                    ]);
                    self.send(Kind::Patch, &key, &value, rv, &Request::new("PATCH", &item).raw("application/json-patch+json", patch.to_string()))
                }
                _ => {
                    let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": rv.to_string()}});
                    self.send(Kind::Delete, &key, "", rv, &Request::new("DELETE", &item).json(&options))
                }
            },
        };
        match (r.kind, r.status) {
            (Kind::Create | Kind::Update | Kind::Patch, 200 | 201) => {
                self.known.insert(k, Some(rv_of(&r.body)));
            }
            (Kind::Delete, 200 | 202) => {
                self.known.insert(k, None);
            }
            _ => {
                self.known.remove(&k);
            }
        }
    }
}

/// The faults, in the order the injector cycles through them (shuffled per round).
const FAULTS: [&str; 4] = ["kill and restart a replica", "pause nats-server", "kill and restart nats-server", "drop client connections"];

/// Runs the soak; panics only when the cluster cannot be started.
pub fn run(config: &SoakConfig) -> SoakReport {
    let mut nats = NatsServer::start().expect("nats-server");
    let url = nats.url();
    let ports: Vec<String> = (0..3).map(|_| free_port().expect("port").to_string()).collect();
    let args = |port: &str| -> Vec<String> {
        ["--secure-port", port, "--nats-url", &url, "--storage-compaction-window", config.compaction_window].iter().map(|s| (*s).to_owned()).collect()
    };
    let first_args = args(&ports[0]);
    let first = Kapi::start_with(&first_args.iter().map(String::as_str).collect::<Vec<_>>()).expect("first replica");
    let mut replicas = vec![first];
    for port in &ports[1..] {
        let a = args(port);
        let replica = replicas[0].start_replica(&a.iter().map(String::as_str).collect::<Vec<_>>()).expect("replica");
        replicas.push(replica);
    }
    let pki = replicas[0].pki_dir();
    let data_dir = replicas[0].data_dir();
    let haproxy = Haproxy::start(&replicas.iter().map(Kapi::port).collect::<Vec<_>>(), &pki.join("ca.crt")).expect("haproxy");
    let lb = Endpoint::new(format!("https://127.0.0.1:{}", haproxy.port()), pki, data_dir.clone());
    let ns = crate::wait_for(Duration::from_secs(30), || {
        let r = lb.try_request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})));
        r.ok().filter(|r| r.status == 201)
    });
    assert!(ns.is_some(), "no namespace through haproxy: {}", haproxy.log());
    let (from, initial) = listed(&lb.try_request(&Request::get(&collection())).expect("list").body);
    // Clients use haproxy half the time, a replica straight otherwise.
    let replica_endpoints: Vec<Endpoint> = replicas.iter().map(Kapi::endpoint).collect();
    let mut endpoints = vec![lb.clone()];
    endpoints.extend(replica_endpoints.iter().cloned());

    let t0 = Instant::now();
    let connections = Connections::default();
    let follow = Follow::default();
    let stop_clients = AtomicBool::new(false);
    let faults_done = AtomicUsize::new(0);
    let mut report = SoakReport::default();
    let mut rng = Rng::new(config.seed);
    let reflector = Reflector { collection: collection(), sentinel: SENTINEL.to_owned(), deadline: t0 + config.duration + Duration::from_secs(180), timeout_seconds: 20 };

    let (clients, runs, truth, sentinel, final_list) = std::thread::scope(|s| {
        let (follow, connections, stop_clients, reflector, endpoints) = (&follow, &connections, &stop_clients, &reflector, &endpoints);
        let _guard = StopOnDrop(vec![stop_clients, &follow.stop, &follow.abort]);
        let db = data_dir.join("kapi.db");
        let follower = s.spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async {
                // A reader: no compaction and no polling from this process.
                let config = kapi_storage::sqlite::SqliteConfig { compaction_interval: Duration::ZERO, poll_interval: Duration::ZERO, ..Default::default() };
                let store: kapi_storage::DynStore = kapi_storage::sqlite::SqliteStore::open(&db, config).expect("open the shared database");
                follow_log(&store, &format!("/registry/core/configmaps/{NS}/"), from, t0, follow).await
            })
        });
        let watchers: Vec<_> = (0..3 * config.watchers_per_replica)
            .map(|i| {
                let endpoint = replica_endpoints[i % 3].clone();
                s.spawn(move || {
                    // The first watcher of each replica starts at once; the others once the
                    // store has compacted past their start (410, relist, watch on), as a client
                    // that was away for long.
                    let late = i >= 3;
                    while late && follow.horizon.load(Ordering::SeqCst) <= from && !stop_clients.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    let label = format!("replica {} watcher {}{}", i % 3, i / 3, if late { " (late)" } else { "" });
                    reflector.watch(&endpoint, label, from, &follow.abort, Some(connections))
                })
            })
            .collect();
        let clients: Vec<_> = (0..config.clients)
            .map(|id| {
                let rng = Rng::new(config.seed.wrapping_add(1 + id as u64));
                s.spawn(move || {
                    let mut client = Client { id, rng, endpoints, connections, t0, keys: config.keys, known: HashMap::new(), records: Vec::new(), written: 0 };
                    while !stop_clients.load(Ordering::SeqCst) {
                        client.step();
                    }
                    client.records
                })
            })
            .collect();

        // The fault injector.
        let end = t0 + config.duration;
        let mut order: Vec<usize> = Vec::new();
        loop {
            let gap = rng.around(config.fault_interval);
            if Instant::now() + gap >= end {
                std::thread::sleep(end.saturating_duration_since(Instant::now()));
                break;
            }
            std::thread::sleep(gap);
            if order.is_empty() {
                order = (0..FAULTS.len()).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, usize::try_from(rng.below(i as u64 + 1)).unwrap_or(0));
                }
            }
            let fault = order.pop().unwrap_or(0);
            *report.faults.entry(FAULTS[fault]).or_default() += 1;
            faults_done.fetch_add(1, Ordering::SeqCst);
            let pause = Duration::from_millis(500 + rng.below(2500));
            match fault {
                0 => {
                    let i = usize::try_from(rng.below(3)).unwrap_or(0);
                    replicas[i].kill9();
                    std::thread::sleep(pause);
                    if let Err(e) = replicas[i].restart() {
                        report.harness_errors.push(format!("replica {i} did not restart: {e}"));
                        break;
                    }
                }
                1 => {
                    if let Err(e) = nats.signal("STOP") {
                        report.harness_errors.push(format!("SIGSTOP nats-server: {e}"));
                    }
                    std::thread::sleep(pause * 2);
                    if let Err(e) = nats.signal("CONT") {
                        report.harness_errors.push(format!("SIGCONT nats-server: {e}"));
                    }
                }
                2 => {
                    nats.kill();
                    std::thread::sleep(pause);
                    if let Err(e) = nats.restart() {
                        report.harness_errors.push(format!("nats-server did not restart: {e}"));
                        break;
                    }
                }
                _ => report.connections_cut += connections.cut(),
            }
        }
        stop_clients.store(true, Ordering::SeqCst);
        let clients: Vec<Vec<Record>> = clients.into_iter().map(|c| c.join().expect("client")).collect();
        // The sentinel ends every watcher.
        let sentinel = crate::wait_for(Duration::from_secs(60), || {
            let r = lb.try_request(&Request::new("POST", &collection()).json(&configmap(SENTINEL, "end"))).ok()?;
            (r.status == 201).then(|| rv_of(&r.body))
        });
        let Some(sentinel) = sentinel else {
            follow.abort.store(true, Ordering::SeqCst);
            panic!("no sentinel write within 60 s: {}", haproxy.log());
        };
        let runs: Vec<WatchRun> = watchers.into_iter().map(|w| w.join().expect("watcher")).collect();
        let last = crate::wait_for(Duration::from_secs(60), || lb.try_request(&Request::get(&collection())).ok().filter(|r| r.status == 200)).expect("final list");
        follow.target.store(listed(&last.body).0.max(sentinel), Ordering::SeqCst);
        follow.stop.store(true, Ordering::SeqCst);
        let truth = follower.join().expect("log follower");
        (clients, runs, truth, sentinel, last.body)
    });
    report.seconds = config.duration.as_secs_f64();
    judge_run(config, &mut report, &clients, &runs, &truth, &initial, sentinel, &final_list);
    drop(haproxy);
    drop(replicas);
    drop(nats);
    report
}

/// Checks the recorded histories, watch streams and lists against the log.
#[allow(clippy::too_many_arguments)]
fn judge_run(
    config: &SoakConfig,
    report: &mut SoakReport,
    clients: &[Vec<Record>],
    runs: &[WatchRun],
    truth: &Truth,
    initial: &BTreeMap<String, u64>,
    sentinel: u64,
    final_list: &Value,
) {
    if let Some(fatal) = &truth.fatal {
        report.harness_errors.push(fatal.clone());
    }
    report.log_events = truth.log.len();
    report.compactions = truth.compactions.len();
    let log = &truth.log;
    // The log's writes by (name, value), and its deletions by (name, precondition).
    let mut by_value: HashMap<(&str, String), Vec<usize>> = HashMap::new();
    let mut deletions: HashMap<(&str, u64), usize> = HashMap::new();
    for (i, e) in log.iter().enumerate() {
        if e.kind == "DELETED" {
            deletions.insert((e.name.as_str(), truth.prev[i]), i);
        } else {
            let obj: Value = serde_json::from_slice(&truth.values[i]).unwrap_or(Value::Null);
            by_value.entry((e.name.as_str(), value_of(&obj))).or_default().push(i);
        }
    }
    for ((name, value), at) in &by_value {
        if at.len() > 1 && !value.is_empty() {
            report.duplicated_writes.push(format!("{name} = {value} at revisions {:?}", at.iter().map(|i| log[*i].rv).collect::<Vec<_>>()));
        }
    }

    // Per-name histories.
    let mut histories: BTreeMap<String, Vec<Operation>> = BTreeMap::new();
    for r in clients.iter().flatten() {
        let counts = report.ops.entry(r.kind).or_default();
        let unknown = r.status >= 500 || (r.status == 0 && !r.unsent);
        let acked = (200..300).contains(&r.status);
        if r.unsent || r.status == 429 {
            counts.not_sent += 1;
            continue;
        }
        if unknown {
            counts.unknown += 1;
        } else if acked {
            counts.ok += 1;
        } else if matches!(r.status, 404 | 409 | 422) && r.kind != Kind::List && (r.status != 422 || r.kind == Kind::Patch) {
            counts.refused += 1;
        } else {
            counts.unexpected += 1;
            report.unexpected.push(format!("client {} {:?} {}: {} {}", r.client, r.kind, r.key, r.status, r.raw));
            continue;
        }
        let ret = (!unknown).then_some(r.ret);
        let op = |input: Input, output: Output| Operation { client: r.client, call: r.call, ret, input, output };
        if r.kind == Kind::List {
            if unknown {
                continue;
            }
            let (rv, items) = listed(&r.body);
            report.lists_checked += 1;
            let expected = state_at(initial, log, rv);
            let items_here: BTreeMap<String, u64> = items.iter().filter(|(k, _)| k.as_str() != SENTINEL).map(|(k, v)| (k.clone(), *v)).collect();
            if expected != items_here {
                report.list_violations.push(format!("client {}: LIST at {rv} has {} objects, the log's state {}", r.client, items_here.len(), expected.len()));
            }
            let objects: HashMap<&str, &Value> = r.body["items"].as_array().into_iter().flatten().map(|o| (o["metadata"]["name"].as_str().unwrap_or_default(), o)).collect();
            for k in 0..config.keys {
                let key = format!("k{k:02}");
                let output = match objects.get(key.as_str()) {
                    Some(o) => Output::Found { value: value_of(o), rv: rv_of(o) },
                    None => Output::NotFound,
                };
                histories.entry(key).or_default().push(op(Input::Read, output));
            }
            continue;
        }
        let input = match r.kind {
            Kind::Create => Input::Create { value: r.value.clone() },
            Kind::Update => Input::Update { rv: r.expected, value: r.value.clone() },
            Kind::Patch => Input::Patch { rv: r.expected, value: r.value.clone() },
            Kind::Delete => Input::Delete { rv: r.expected },
            Kind::Get | Kind::List => Input::Read,
        };
        let output = if unknown {
            if r.kind == Kind::Get {
                continue;
            }
            // Resolved from the log, as etcd's robustness tests do. A written value is unique,
            // so its event names the one operation that wrote it; a deletion does not (several
            // clients may send a delete with the same precondition, and at most one wins): one
            // the log cannot explain never happened, one it can stays unknown for the checker
            // to place or leave out.
            let applied = match r.kind {
                Kind::Delete => deletions.get(&(r.key.as_str(), r.expected)).map(|_| Output::Unknown),
                _ => by_value.get(&(r.key.as_str(), r.value.clone())).and_then(|at| at.first()).map(|i| Output::Written { rv: log[*i].rv }),
            };
            match applied {
                Some(output) => {
                    report.unknown_resolved.0 += 1;
                    output
                }
                None => {
                    report.unknown_resolved.1 += 1;
                    continue;
                }
            }
        } else {
            match (r.kind, r.status) {
                (Kind::Get, 200) => Output::Found { value: value_of(&r.body), rv: rv_of(&r.body) },
                (Kind::Create | Kind::Update | Kind::Patch, 200 | 201) => Output::Written { rv: rv_of(&r.body) },
                (Kind::Delete, 200 | 202) => Output::Deleted,
                (_, 404) => Output::NotFound,
                (Kind::Create, 409) => Output::Exists,
                _ => Output::Conflict,
            }
        };
        // Acknowledged writes must be in the log as acknowledged.
        if acked && r.kind != Kind::Get {
            report.acked_writes += 1;
            let found = match &output {
                Output::Deleted => deletions.contains_key(&(r.key.as_str(), r.expected)),
                Output::Written { rv } => by_value.get(&(r.key.as_str(), r.value.clone())).is_some_and(|at| at.iter().any(|i| log[*i].rv == *rv)),
                _ => true,
            };
            if !found {
                report.acked_lost.push(format!("client {} {:?} {} = {:?} -> {output:?}", r.client, r.kind, r.key, r.value));
            }
        }
        histories.entry(r.key.clone()).or_default().push(op(input, output));
    }
    report.histories = histories.len();
    report.history_ops = histories.values().map(Vec::len).sum();
    for (key, ops) in &histories {
        let started = Instant::now();
        let verdict = check(ops, config.check_budget);
        report.longest_check = report.longest_check.max(started.elapsed());
        match verdict {
            Verdict::Linearizable => {}
            Verdict::Violation(why) => report.linearizability_violations.push(format!("{key}: {why}")),
            Verdict::Inconclusive { steps } => report.inconclusive.push(format!("{key}: {} operations, {steps} steps", ops.len())),
        }
    }

    // Watchers.
    report.watchers = runs.len();
    for run in runs {
        let verdict = judge(run, log, initial, sentinel);
        report.watch_events += verdict.seen;
        report.watch_connections += run.connections;
        report.watch_relists += run.relists;
        for e in &run.errors {
            report.watch_violations.push(format!("{}: {e}", run.label));
        }
        report.watch_violations.extend(verdict.details.iter().cloned());
        if verdict.repeated() > 0 {
            report.watch_violations.push(format!("{}: {} events repeated or out of order", run.label, verdict.repeated()));
        }
    }
    // The final state.
    let (rv, items) = listed(final_list);
    if state_at(initial, log, rv) != items {
        report.list_violations.push(format!("the final LIST at {rv} is not the state the log replays to"));
    }
}
