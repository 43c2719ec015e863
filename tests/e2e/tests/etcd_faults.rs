//! kapi on a 3-member etcd cluster under member failures (issue 24, done-when 2), loopback only
//! and bounded in time: 3 replicas without NATS (each follows etcd's watch itself, as
//! kube-apiserver does) behind haproxy, compacting every 20 s; writers through haproxy create,
//! update (PUT with `metadata.resourceVersion`, JSON patch with a `test` op on it) and delete
//! (`preconditions.resourceVersion`) ConfigMaps; two watchers per replica, on the replica's own
//! URL. Meanwhile the etcd leader is SIGKILLed and restarted, a follower SIGSTOPped for 10 s and
//! another member restarted.
//!
//! The truth is etcd's history, read while the run goes (compaction erases it behind): every
//! acknowledged write is in it, the final state is what it replays to, and each watcher saw it
//! exactly once in order, except across a 410 (the late watchers start from a revision etcd
//! has compacted away) where the relist must equal the state the log replays to at the relist's
//! revision. Writes come back within a bound after each fault; the report line gives the
//! numbers (docs/perf.md, "etcd under faults"); `ETCD_FAULTS_DUMP=1` also prints every attempt.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kapi_e2e::changes::{follow_log, rv_of, Follow, Truth};
use kapi_e2e::reflector::{judge, listed, state_at, Reflector, Verdict, WatchRun};
use kapi_e2e::{Endpoint, Haproxy, Kapi, Request};
use kapi_storage::etcd::testing::EtcdCluster;
use kapi_storage::etcd::{EtcdConfig, EtcdStore};
use kapi_storage::DynStore;
use serde_json::{json, Value};

use writers::{unknown, write_until, Attempt, Op, Writer};

#[path = "etcd_faults/writers.rs"]
mod writers;

const NS: &str = "faults";
const SENTINEL: &str = "sentinel";
/// Events per resource in each replica's watch cache: small, so that a watch from before a
/// compaction is answered 410 and not served from memory.
const WATCH_CACHE: &str = "500";
/// Longest a writer may go without a successful write, whatever the fault.
const MAX_UNAVAILABLE: Duration = Duration::from_secs(30);
/// How long the steady phase after the faults may go on waiting for a compaction.
const MAX_COMPACTION_WAIT: Duration = Duration::from_secs(45);
/// Bound on every watcher, from the start of the run.
const WATCH_DEADLINE: Duration = Duration::from_secs(200);

fn collection() -> String {
    format!("/api/v1/namespaces/{NS}/configmaps")
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}})
}

/// Milliseconds since the start of the run.
fn ms(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Follows the store's change log from `from` through its own etcd client (see
/// [`follow_log`]).
fn follow_etcd_log(endpoints: &[String], from: u64, t0: Instant, follow: &Follow) -> Truth {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        // A reader: no compactor of its own.
        let config = EtcdConfig { endpoints: endpoints.to_vec(), compaction_interval: Duration::ZERO, ..EtcdConfig::default() };
        let store: DynStore = EtcdStore::open(config).await.expect("open the etcd store");
        follow_log(&store, &format!("/registry/core/configmaps/{NS}/"), from, t0, follow).await
    })
}

/// Sets its flags when dropped, also when the test panics (a scope waits for its threads).
struct StopOnDrop<'a>([&'a AtomicBool; 3]);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        for flag in self.0 {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Availability: the longest stretch without a successful write, and recovery after each fault.

/// The longest stretch of [from, to] in which no write succeeded: (length, start).
fn longest_gap(acked_ends: &[u64], from: u64, to: u64) -> (u64, u64) {
    let mut points: Vec<u64> = acked_ends.iter().copied().filter(|t| (from..=to).contains(t)).collect();
    points.insert(0, from);
    points.push(to);
    points.windows(2).map(|w| (w[1] - w[0], w[0])).max().unwrap_or((0, from))
}

#[test]
fn kapi_on_etcd_loses_no_acknowledged_write_and_no_watch_event_when_members_fail() {
    let mut etcd = EtcdCluster::start(3).expect("a 3-member etcd cluster");
    let endpoints = etcd.endpoints();
    let servers = endpoints.join(",");
    let args = ["--storage-backend", "etcd3", "--etcd-servers", &servers, "--etcd-compaction-interval", "20s", "--watch-cache-size", WATCH_CACHE];
    let first = Kapi::start_with(&args).expect("first replica");
    let mut replicas = vec![first];
    for _ in 1..3 {
        let replica = replicas[0].start_replica(&args).expect("replica");
        replicas.push(replica);
    }
    let pki = replicas[0].pki_dir();
    let haproxy = Haproxy::start(&replicas.iter().map(Kapi::port).collect::<Vec<_>>(), &pki.join("ca.crt")).expect("haproxy");
    let lb = Endpoint::new(format!("https://127.0.0.1:{}", haproxy.port()), pki, replicas[0].data_dir());
    let ns = kapi_e2e::wait_for(Duration::from_secs(20), || {
        let r = lb.try_request(
            &Request::new("POST", "/api/v1/namespaces").json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})),
        );
        r.ok().filter(|r| r.status == 201)
    });
    assert!(ns.is_some(), "no namespace through haproxy: {}", haproxy.log());
    let (from, initial) = listed(&lb.try_request(&Request::get(&collection())).expect("list").body);
    let replica_endpoints: Vec<Endpoint> = replicas.iter().map(Kapi::endpoint).collect();

    let t0 = Instant::now();
    let deadline = t0 + WATCH_DEADLINE;
    let stop_writers = AtomicBool::new(false);
    let follow = Follow::default();
    let mut faults: Vec<(String, u64)> = Vec::new();
    let reflector = Reflector { collection: collection(), sentinel: SENTINEL.to_owned(), deadline, timeout_seconds: 15 };
    let (writers, runs, truth, sentinel, window, late_start) = std::thread::scope(|s| {
        let (stop_writers, follow) = (&stop_writers, &follow);
        let (abort, horizon) = (&follow.abort, &follow.horizon);
        let (lb, etcd_endpoints) = (&lb, &endpoints);
        // Whatever fails below, every thread ends: writers and the log follower at once,
        // watchers at their next reconnection.
        let _guard = StopOnDrop([stop_writers, &follow.stop, abort]);
        let follower = s.spawn(move || follow_etcd_log(etcd_endpoints, from, t0, follow));
        let reflector = &reflector;
        // One watcher per replica from before the first write, and one per replica from the
        // same revision once etcd has compacted past it (410, relist, watch on).
        let watchers: Vec<_> = (0..6)
            .map(|i| {
                let endpoint = replica_endpoints[i % 3].clone();
                s.spawn(move || {
                    if i >= 3 {
                        while horizon.load(Ordering::SeqCst) <= from && !stop_writers.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(200));
                        }
                    }
                    let started = ms(t0);
                    let label = format!("replica {} {}", i % 3, if i < 3 { "early" } else { "late" });
                    (started, reflector.watch(&endpoint, label, from, abort, None))
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let writers: Vec<_> = (0..3).map(|w| s.spawn(move || write_until(lb, w, t0, stop_writers))).collect();
        let writes_from = ms(t0);

        std::thread::sleep(Duration::from_secs(10));
        let leader = etcd.wait_leader().expect("a leader");
        faults.push((format!("SIGKILL leader m{leader}"), ms(t0)));
        etcd.kill(leader);
        std::thread::sleep(Duration::from_secs(10));
        faults.push((format!("restart m{leader}"), ms(t0)));
        etcd.restart(leader).expect("restart");
        etcd.wait_healthy(leader).expect("rejoined");
        std::thread::sleep(Duration::from_secs(5));
        let now_leader = etcd.wait_leader().expect("a leader");
        let paused = (0..3).filter(|&i| i != now_leader).max_by_key(|&i| i != leader).expect("a follower");
        faults.push((format!("SIGSTOP follower m{paused}"), ms(t0)));
        etcd.pause(paused).expect("SIGSTOP");
        std::thread::sleep(Duration::from_secs(10));
        faults.push((format!("SIGCONT m{paused}"), ms(t0)));
        etcd.resume(paused).expect("SIGCONT");
        etcd.wait_healthy(paused).expect("healthy after SIGCONT");
        std::thread::sleep(Duration::from_secs(3));
        let other = (0..3).find(|&i| i != leader && i != paused).expect("a third member");
        let role = match etcd.leader() {
            Some(l) if l == other => "leader",
            Some(_) => "follower",
            None => "member",
        };
        faults.push((format!("restart {role} m{other}"), ms(t0)));
        etcd.restart(other).expect("restart");
        etcd.wait_healthy(other).expect("rejoined");
        std::thread::sleep(Duration::from_secs(10));
        // One replica compacts per interval, and a round that fails (as during the faults)
        // waits for the next: carry on writing until etcd has compacted past `from`, so that
        // the late watchers' 410 is a real one.
        let compacted = kapi_e2e::wait_for(MAX_COMPACTION_WAIT, || (horizon.load(Ordering::SeqCst) > from).then_some(()));
        assert!(compacted.is_some(), "etcd did not compact past {from} within {MAX_COMPACTION_WAIT:?} more");
        std::thread::sleep(Duration::from_secs(3));

        stop_writers.store(true, Ordering::SeqCst);
        let writers: Vec<Writer> = writers.into_iter().map(|w| w.join().expect("writer")).collect();
        let writes_to = ms(t0);
        let sentinel = kapi_e2e::wait_for(Duration::from_secs(30), || {
            let r = lb.try_request(&Request::new("POST", &collection()).json(&configmap(SENTINEL, "end"))).ok()?;
            (r.status == 201).then(|| rv_of(&r.body))
        })
        .expect("the sentinel write");
        let runs: Vec<(u64, WatchRun)> = watchers.into_iter().map(|w| w.join().expect("watcher")).collect();
        let late_start = runs.iter().skip(3).map(|(t, _)| *t).min().unwrap_or(0);
        let runs: Vec<WatchRun> = runs.into_iter().map(|(_, r)| r).collect();
        let last = lb.try_request(&Request::get(&collection())).expect("final list");
        assert_eq!(last.status, 200, "{}", last.raw);
        follow.target.store(listed(&last.body).0.max(sentinel), Ordering::SeqCst);
        follow.stop.store(true, Ordering::SeqCst);
        let truth = follower.join().expect("log follower");
        // Every member applied everything: a member whose revision stays behind has diverged
        // (etcd 3.5.0-3.5.2 could lose applied writes on a member killed under load: etcd#13766).
        let revisions = kapi_e2e::wait_for(Duration::from_secs(10), || {
            let all: Vec<Option<u64>> = (0..etcd.size()).map(|i| etcd.revision(i)).collect();
            all.windows(2).all(|w| w[0] == w[1] && w[0].is_some()).then_some(all.clone())
        })
        .ok_or_else(|| (0..etcd.size()).map(|i| etcd.revision(i)).collect::<Vec<_>>());
        (writers, runs, truth, (sentinel, last.body, revisions), (writes_from, writes_to), late_start)
    });
    let (sentinel, final_list, revisions) = sentinel;
    let log = &truth.log;

    // Acknowledged writes: each is in etcd's history, as acknowledged; nothing else of the
    // writers' is, beyond what unknown outcomes explain.
    let attempts: Vec<&Attempt> = writers.iter().flat_map(|w| &w.attempts).collect();
    let acked: Vec<&&Attempt> = attempts.iter().filter(|a| a.acked()).collect();
    let in_log: BTreeSet<(u64, &str, &str)> = log.iter().map(|e| (e.rv, e.kind, e.name.as_str())).collect();
    let deleted: BTreeMap<&str, u64> = log.iter().filter(|e| e.kind == "DELETED").map(|e| (e.name.as_str(), e.rv)).collect();
    let lost: Vec<String> = acked
        .iter()
        .filter(|a| match (a.op, a.rv) {
            (_, None) => true,
            // Names are never reused: one deletion, after the precondition's revision.
            (Op::Delete, Some(pre)) => deleted.get(a.name.as_str()).is_none_or(|rv| *rv <= pre),
            (Op::Create, Some(rv)) => !in_log.contains(&(rv, "ADDED", a.name.as_str())),
            (_, Some(rv)) => !in_log.contains(&(rv, "MODIFIED", a.name.as_str())),
        })
        .map(|a| format!("{:?} {} rv {:?} at {} ms", a.op, a.name, a.rv, a.end))
        .collect();
    let unknowns = attempts.iter().filter(|a| a.op != Op::Get && unknown(a.status)).count();
    let writer_events = log.iter().filter(|e| e.name.starts_with('w')).count();
    let unacked_in_log = writer_events.saturating_sub(acked.len());
    let mut failed: BTreeMap<u16, usize> = BTreeMap::new();
    let mut samples: BTreeMap<u16, &str> = BTreeMap::new();
    for a in attempts.iter().filter(|a| a.op != Op::Get && !a.acked()) {
        *failed.entry(a.status).or_default() += 1;
        samples.entry(a.status).or_insert(&a.raw);
    }
    let mut by_op: BTreeMap<Op, usize> = BTreeMap::new();
    for a in &acked {
        *by_op.entry(a.op).or_default() += 1;
    }
    let surprises: Vec<&String> = writers.iter().flat_map(|w| &w.surprises).collect();

    // The final state is what the log replays to.
    let (final_rv, final_items) = listed(&final_list);
    let replayed = state_at(&initial, log, final_rv);

    // Availability.
    let mut ends: Vec<u64> = acked.iter().map(|a| a.end).collect();
    ends.sort_unstable();
    let (gap, gap_at) = longest_gap(&ends, window.0, window.1);
    let gap_after = faults.iter().rev().find(|(_, t)| *t <= gap_at).map_or("steady state", |(f, _)| f.as_str());
    let recovery: Vec<(String, Option<u64>, u64)> = faults
        .iter()
        .enumerate()
        .map(|(i, (name, t))| {
            let first = acked.iter().filter(|a| a.start >= *t).map(|a| a.end).min().map(|end| end - t);
            let next = faults.get(i + 1).map_or(window.1, |(_, n)| *n);
            (name.clone(), first, longest_gap(&ends, *t, next).0)
        })
        .collect();

    // Watchers.
    let verdicts: Vec<Verdict> = runs.iter().map(|r| judge(r, log, &initial, sentinel)).collect();
    let missed: usize = verdicts.iter().map(|v| v.missed + v.unexpected + v.bad_relists).sum();
    let duplicated: usize = verdicts.iter().map(|v| v.duplicated + v.out_of_order).sum();
    let relists: usize = runs.iter().map(|r| r.relists).sum();

    eprintln!(
        "etcd faults report: acknowledged writes {} ({}), unknown outcomes {unknowns}, unacknowledged writes found in the log {unacked_in_log}, \
         failed attempts by status {failed:?}, acknowledged writes lost {}; longest write unavailability {gap} ms (from t={gap_at} ms, after {gap_after}); \
         recovery (first successful write started after the fault, longest gap until the next fault): {}; \
         watchers {}: events seen {}, missed {missed}, duplicated {duplicated}, 410 relists {relists} (late watchers started at t={late_start} ms), \
         connections {}, other watch errors {}; compactions {:?}, log events {}, log read errors {}, run {} ms",
        acked.len(),
        by_op.iter().map(|(op, n)| format!("{op:?} {n}")).collect::<Vec<_>>().join(", "),
        lost.len(),
        recovery
            .iter()
            .map(|(f, first, gap)| format!("{f} at t={} ms -> {} ms (gap {gap} ms)", faults.iter().find(|x| &x.0 == f).map_or(0, |x| x.1), first.map_or("never".into(), |v| v.to_string())))
            .collect::<Vec<_>>()
            .join("; "),
        runs.len(),
        verdicts.iter().map(|v| v.seen).sum::<usize>(),
        runs.iter().map(|r| r.connections).sum::<usize>(),
        runs.iter().map(|r| r.errors.len()).sum::<usize>(),
        truth.compactions,
        log.len(),
        truth.read_errors,
        ms(t0),
    );

    eprintln!("a failure of each status: {samples:?}; etcd members' revisions at the end: {revisions:?}");
    if std::env::var_os("ETCD_FAULTS_DUMP").is_some() {
        let mut all: Vec<&&Attempt> = attempts.iter().collect();
        all.sort_by_key(|a| a.start);
        for a in all {
            eprintln!("DUMP {:>6} {:>6} {:>6} {:?} {} {} {:?} {}", a.start, a.end, a.end - a.start, a.op, a.name, a.status, a.rv, a.raw);
        }
        for (f, t) in &faults {
            eprintln!("DUMP fault {t} {f}");
        }
    }
    assert!(truth.fatal.is_none(), "{:?}", truth.fatal);
    assert!(revisions.is_ok(), "etcd members disagree on the revision at the end (a member diverged): {revisions:?}");
    assert!(lost.is_empty(), "acknowledged writes missing from etcd's history: {lost:?}");
    assert!(unacked_in_log <= unknowns, "{unacked_in_log} writes in the log were never acknowledged, only {unknowns} outcomes unknown");
    assert!(surprises.is_empty(), "precondition failures no unknown outcome explains: {surprises:?}");
    assert_eq!(final_items, replayed, "the final list (rv {final_rv}) is not the state etcd's history replays to");
    assert!(acked.len() > 500, "too little load to mean anything: {} acknowledged writes", acked.len());
    for (run, verdict) in runs.iter().zip(&verdicts) {
        assert!(run.errors.is_empty(), "{}: {:?}", run.label, run.errors);
        assert!(verdict.details.is_empty() && verdict.duplicated + verdict.out_of_order == 0, "{}: {verdict:?}", run.label);
    }
    assert!(!truth.compactions.is_empty(), "etcd was never compacted during the run");
    assert!(runs[3..].iter().all(|r| r.relists >= 1), "the late watchers were not answered 410 after compaction");
    assert!(gap < u64::try_from(MAX_UNAVAILABLE.as_millis()).unwrap_or(u64::MAX), "writes were unavailable for {gap} ms (after {gap_after})");
    for (fault, first, _) in &recovery {
        assert!(first.is_some_and(|t| t < 30_000), "no successful write within 30 s of {fault}");
    }
    drop(haproxy);
    drop(replicas);
}
