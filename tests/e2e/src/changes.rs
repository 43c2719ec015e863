//! Watch streams checked against the store's change log: what a watcher saw, what the log
//! holds, and the exactly-once, in-order comparison of the two.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use kapi_storage::etcd::{EtcdConfig, EtcdStore};
use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
use kapi_storage::{DynStore, EventKind, StorageError};
use serde_json::Value;

use crate::Endpoint;

/// Bound of one watcher's whole run.
const WATCH_DEADLINE: Duration = Duration::from_secs(240);

/// One event as a watcher saw it or the log holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub kind: &'static str,
    pub name: String,
    pub rv: u64,
}

/// `metadata.resourceVersion` of an object as a number.
pub fn rv_of(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no resourceVersion in {obj}"))
}

/// The store's change log of the ConfigMaps in `namespace` after `after` through `until`
/// (inclusive), read with the Store API from a SQLite database shared with running replicas.
pub fn configmap_log(data_dir: &Path, namespace: &str, after: u64, until: u64) -> Vec<Seen> {
    resource_log(data_dir, &format!("/registry/core/configmaps/{namespace}/"), after, until)
}

/// The store's change log of the keys under `prefix` (`/registry/<group>/<resource>/<ns>/`)
/// after `after` through `until` (inclusive).
pub fn resource_log(data_dir: &Path, prefix: &str, after: u64, until: u64) -> Vec<Seen> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        // A reader: no compaction and no polling from the test process.
        let config = SqliteConfig { compaction_interval: Duration::ZERO, poll_interval: Duration::ZERO, ..SqliteConfig::default() };
        let store: DynStore = SqliteStore::open(&data_dir.join("kapi.db"), config).expect("open the shared database");
        read_log(&store, prefix, after, until).await
    })
}

/// [`configmap_log`] of a kapi cluster on etcd (`--etcd-prefix` kube's `/registry`).
pub fn etcd_configmap_log(endpoints: &[String], namespace: &str, after: u64, until: u64) -> Vec<Seen> {
    etcd_resource_log(endpoints, &format!("/registry/core/configmaps/{namespace}/"), after, until)
}

/// [`resource_log`] of a kapi cluster on etcd, read from etcd's history.
pub fn etcd_resource_log(endpoints: &[String], prefix: &str, after: u64, until: u64) -> Vec<Seen> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        // A reader: no compactor of its own.
        let config = EtcdConfig { endpoints: endpoints.to_vec(), compaction_interval: Duration::ZERO, ..EtcdConfig::default() };
        let store: DynStore = EtcdStore::open(config).await.expect("open the etcd store");
        read_log(&store, prefix, after, until).await
    })
}

async fn read_log(store: &DynStore, prefix: &str, after: u64, until: u64) -> Vec<Seen> {
    let mut out = Vec::new();
    let mut at = after;
    while at < until {
        let events = store.read_log(at, 1000).await.expect("read the change log");
        let Some(last) = events.last() else { break };
        at = last.revision;
        for e in events.into_iter().filter(|e| e.revision <= until && e.key.starts_with(prefix)) {
            let kind = match e.kind {
                EventKind::Added => "ADDED",
                EventKind::Modified => "MODIFIED",
                EventKind::Deleted => "DELETED",
            };
            out.push(Seen { kind, name: e.key[prefix.len()..].to_owned(), rv: e.revision });
        }
    }
    out
}

/// The store's history of the keys under a prefix, read while a run goes (compaction erases
/// it behind): `log[i]` was written with the stored object `values[i]` (for a deletion, the
/// object deleted) over the key's previous revision `prev[i]`.
#[derive(Debug, Default)]
pub struct Truth {
    pub log: Vec<Seen>,
    pub values: Vec<bytes::Bytes>,
    pub prev: Vec<u64>,
    /// (ms since the start, horizon) each time the store's compaction horizon was seen to move.
    pub compactions: Vec<(u64, u64)>,
    pub read_errors: usize,
    /// Why following stopped early (the log was compacted before it was read).
    pub fatal: Option<String>,
}

/// When [`follow_log`] stops, and what it publishes while it runs.
#[derive(Debug, Default)]
pub struct Follow {
    /// Set when the run is over: the follower stops once it has read up to `target`.
    pub stop: AtomicBool,
    /// Set on failure: the follower stops at once.
    pub abort: AtomicBool,
    /// The revision to read up to after `stop` (0: not known yet).
    pub target: AtomicU64,
    /// The store's compaction horizon, as last seen.
    pub horizon: AtomicU64,
}

/// Follows `store`'s change log after `from` for the keys under `prefix` (names relative to
/// it), until told to stop and the target is reached.
pub async fn follow_log(store: &DynStore, prefix: &str, from: u64, t0: Instant, follow: &Follow) -> Truth {
    let mut truth = Truth::default();
    let mut at = from;
    let mut probed = Instant::now();
    let since = |t0: Instant| u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
    loop {
        match store.read_log(at, 1000).await {
            Ok(events) if !events.is_empty() => {
                at = events.last().map_or(at, |e| e.revision);
                for e in events.into_iter().filter(|e| e.key.starts_with(prefix)) {
                    let kind = match e.kind {
                        EventKind::Added => "ADDED",
                        EventKind::Modified => "MODIFIED",
                        EventKind::Deleted => "DELETED",
                    };
                    truth.log.push(Seen { kind, name: e.key[prefix.len()..].to_owned(), rv: e.revision });
                    truth.values.push(e.value);
                    truth.prev.push(e.prev_revision);
                }
                continue;
            }
            Ok(_) => {}
            Err(e @ StorageError::Compacted { .. }) => {
                truth.fatal = Some(format!("the log was compacted before it was read: {e}"));
                return truth;
            }
            Err(_) => truth.read_errors += 1,
        }
        if probed.elapsed() > Duration::from_secs(1) {
            probed = Instant::now();
            if let Ok(h) = store.compacted_revision().await {
                if h > follow.horizon.fetch_max(h, Ordering::SeqCst) {
                    truth.compactions.push((since(t0), h));
                }
            }
        }
        let until = follow.target.load(Ordering::SeqCst);
        if follow.stop.load(Ordering::SeqCst) && until != 0 && at >= until || follow.abort.load(Ordering::SeqCst) {
            return truth;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What one watcher saw over all its connections.
#[derive(Debug, Default)]
pub struct WatchRun {
    pub events: Vec<Seen>,
    /// URL of each connection, in order.
    pub connections: Vec<String>,
    /// Anything a Kubernetes client would have to handle specially (ERROR events).
    pub errors: Vec<String>,
}

/// Watches the ConfigMaps of `namespace` from `from`, the way client-go's reflector resumes:
/// whenever a connection ends (the server's timeout, a replica going away), it reconnects with
/// the last resourceVersion it saw, to the next endpoint of `endpoints` (read at each
/// connection, so a test may replace one). Stops after the object named `sentinel`.
pub fn watch_until(endpoints: &RwLock<Vec<Endpoint>>, first: usize, namespace: &str, from: u64, timeout_seconds: u32, sentinel: &str) -> WatchRun {
    watch_collection_until(endpoints, first, &format!("/api/v1/namespaces/{namespace}/configmaps"), from, timeout_seconds, sentinel)
}

/// [`watch_until`] for any collection path (custom resources too).
pub fn watch_collection_until(
    endpoints: &RwLock<Vec<Endpoint>>,
    first: usize,
    collection: &str,
    from: u64,
    timeout_seconds: u32,
    sentinel: &str,
) -> WatchRun {
    let mut run = WatchRun::default();
    let mut last = from;
    let started = Instant::now();
    let mut turn = first;
    while started.elapsed() < WATCH_DEADLINE {
        let endpoint = {
            let all = endpoints.read().expect("endpoints lock");
            all[turn % all.len()].clone()
        };
        turn += 1;
        let url = format!("{}{collection}?watch=1&resourceVersion={last}&allowWatchBookmarks=true&timeoutSeconds={timeout_seconds}", endpoint.url);
        let mut child = Command::new("curl")
            .args(["-sSN", "--http1.1", "--max-time", "120", "--cacert"])
            .arg(endpoint.pki.join("ca.crt"))
            .arg("--cert")
            .arg(endpoint.pki.join("admin.crt"))
            .arg("--key")
            .arg(endpoint.pki.join("admin.key"))
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn curl");
        run.connections.push(endpoint.url.clone());
        let mut lines = 0;
        let mut done = false;
        if let Some(out) = child.stdout.take() {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                lines += 1;
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    run.errors.push(format!("not a watch event: {line}"));
                    continue;
                };
                let kind = match event["type"].as_str() {
                    Some("ADDED") => "ADDED",
                    Some("MODIFIED") => "MODIFIED",
                    Some("DELETED") => "DELETED",
                    Some("BOOKMARK") => {
                        last = rv_of(&event["object"]);
                        continue;
                    }
                    _ => {
                        run.errors.push(line.clone());
                        break;
                    }
                };
                let rv = rv_of(&event["object"]);
                let name = event["object"]["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                last = rv;
                let end = name == sentinel;
                run.events.push(Seen { kind, name, rv });
                if end {
                    done = true;
                    break;
                }
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        if done || !run.errors.is_empty() {
            return run;
        }
        if lines == 0 {
            // Refused, or a replica on its way out: try the next one after a moment.
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    run.errors.push(format!("no {sentinel} within {WATCH_DEADLINE:?} (last resourceVersion {last})"));
    run
}

/// The first differences between a watcher's events and the log, for a readable failure.
pub fn diff(seen: &[Seen], log: &[Seen]) -> String {
    let at = seen.iter().zip(log).position(|(a, b)| a != b).unwrap_or(seen.len().min(log.len()));
    format!(
        "watcher saw {} events, the log holds {}; first difference at #{at}: watcher {:?} vs log {:?}",
        seen.len(),
        log.len(),
        seen.get(at..(at + 3).min(seen.len())),
        log.get(at..(at + 3).min(log.len()))
    )
}

/// Every watcher saw exactly the log: no error, no gap, no repeat, revision order.
pub fn assert_each_saw_the_log(runs: &[WatchRun], log: &[Seen]) {
    for (i, run) in runs.iter().enumerate() {
        assert!(run.errors.is_empty(), "watcher {i}: {:?} (connections {:?})", run.errors, run.connections);
        assert!(run.events.windows(2).all(|w| w[0].rv < w[1].rv), "watcher {i}: events out of revision order or repeated");
        assert!(run.events == log, "watcher {i} (connections {}): {}", run.connections.len(), diff(&run.events, log));
    }
}
