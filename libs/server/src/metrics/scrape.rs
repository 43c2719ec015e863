//! Values read when Prometheus scrapes rather than counted as they change: object and watcher
//! counts from the watch caches (what kube's storage and cacher report), the process's own
//! resources (the `process_*` series every Prometheus client exports, read from `/proc`), and
//! `kubernetes_build_info`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus::{Counter, IntGauge, IntGaugeVec, Registry};

use super::{opts, register};
use crate::state::ApiServer;

/// Whether `apiserver_storage_objects` and `apiserver_resource_objects` are reported: kube's
/// `--etcd-count-metric-poll-period=0` turns them off. (kapi reads the counts from the watch
/// caches at each scrape, so a non-zero period needs no polling of the store.)
static OBJECT_COUNTS: AtomicBool = AtomicBool::new(true);

/// Turns the object-count series on or off (`--etcd-count-metric-poll-period`).
pub fn report_object_counts(enabled: bool) {
    OBJECT_COUNTS.store(enabled, Ordering::Relaxed);
}

/// The gauges refreshed before each scrape.
#[derive(Clone)]
pub struct ScrapeMetrics {
    storage_objects: IntGaugeVec,
    resource_objects: IntGaugeVec,
    registered_watchers: IntGaugeVec,
    cache_revision: IntGaugeVec,
    process: Process,
}

#[derive(Clone)]
struct Process {
    cpu_seconds: Counter,
    resident: IntGauge,
    virtual_memory: IntGauge,
    start_time: IntGauge,
    open_fds: IntGauge,
    max_fds: IntGauge,
    threads: IntGauge,
}

fn gauge_vec(registry: &Registry, name: &str, stability: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(opts(name, stability, help), labels).expect("metric definition");
    register(registry, g.clone());
    g
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("metric definition");
    register(registry, g.clone());
    g
}

impl ScrapeMetrics {
    pub(super) fn new(registry: &Registry) -> Self {
        let build_info = gauge_vec(
            registry,
            "kubernetes_build_info",
            "ALPHA",
            "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
            &["build_date", "compiler", "git_commit", "git_tree_state", "git_version", "go_version", "major", "minor", "platform"],
        );
        let v = crate::handlers::system::version();
        let field = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        let values: Vec<String> =
            ["buildDate", "compiler", "gitCommit", "gitTreeState", "gitVersion", "goVersion", "major", "minor", "platform"].iter().map(|k| field(k)).collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        build_info.with_label_values(&values).set(1);
        let cpu_seconds = Counter::new("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.").expect("metric definition");
        register(registry, cpu_seconds.clone());
        ScrapeMetrics {
            storage_objects: gauge_vec(
                registry,
                "apiserver_storage_objects",
                "STABLE",
                "[DEPRECATED, consider using apiserver_resource_objects instead] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
                &["resource"],
            ),
            resource_objects: gauge_vec(
                registry,
                "apiserver_resource_objects",
                "ALPHA",
                "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
                &["group", "resource"],
            ),
            registered_watchers: gauge_vec(
                registry,
                "apiserver_registered_watchers",
                "ALPHA",
                "Number of currently registered watchers for a given resources",
                &["group", "version", "kind"],
            ),
            cache_revision: gauge_vec(
                registry,
                "apiserver_watch_cache_resource_version",
                "ALPHA",
                "Current resource version of watch cache broken by resource type.",
                &["group", "resource"],
            ),
            process: Process {
                cpu_seconds,
                resident: gauge(registry, "process_resident_memory_bytes", "Resident memory size in bytes."),
                virtual_memory: gauge(registry, "process_virtual_memory_bytes", "Virtual memory size in bytes."),
                start_time: gauge(registry, "process_start_time_seconds", "Start time of the process since unix epoch in seconds."),
                open_fds: gauge(registry, "process_open_fds", "Number of open file descriptors."),
                max_fds: gauge(registry, "process_max_fds", "Maximum number of open file descriptors."),
                threads: gauge(registry, "process_threads", "Number of OS threads in the process."),
            },
        }
    }

    /// Reads the caches and the process. Each stored resource counts once (its versions share
    /// one cache), under kube's `<resource>.<group>` name of the storage group.
    pub fn refresh(&self, srv: &ApiServer) {
        let caches = srv.rest.caches();
        let mut seen = HashSet::new();
        self.storage_objects.reset();
        self.resource_objects.reset();
        self.registered_watchers.reset();
        self.cache_revision.reset();
        for spec in srv.chain.stored_resources() {
            let prefix = spec.key_prefix();
            let Some(cache) = caches.cache(&prefix) else { continue };
            if !seen.insert(prefix) {
                continue;
            }
            let group = spec.storage_group;
            let name = if group.is_empty() { spec.resource.to_owned() } else { format!("{}.{group}", spec.resource) };
            let objects = i64::try_from(cache.len()).unwrap_or(i64::MAX);
            if OBJECT_COUNTS.load(Ordering::Relaxed) {
                self.storage_objects.with_label_values(&[&name]).set(objects);
                self.resource_objects.with_label_values(&[group, spec.resource]).set(objects);
            }
            self.registered_watchers
                .with_label_values(&[spec.group, spec.version, spec.kind])
                .set(i64::try_from(cache.watcher_count()).unwrap_or(i64::MAX));
            // kube truncates to the 15 least significant digits (a float64 holds them exactly).
            let revision = cache.revision() % 1_000_000_000_000_000;
            self.cache_revision.with_label_values(&[group, spec.resource]).set(i64::try_from(revision).unwrap_or(0));
        }
        self.process.refresh();
    }
}

/// Kernel clock ticks per second in `/proc` (USER_HZ, 100 on every Linux ABI).
const TICKS: f64 = 100.0;

impl Process {
    fn refresh(&self) {
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            // Fields after the command name, which is in parentheses and may hold spaces.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<&str> = rest.split_whitespace().collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            // proc(5): utime is field 14, stime 15, starttime 22, counted from 1 with the
            // state (field 3) at index 0 here.
            // A counter only goes up: raised to the kernel's total.
            let total = (num(11) + num(12)) as f64 / TICKS;
            let now = self.cpu_seconds.get();
            if total > now {
                self.cpu_seconds.inc_by(total - now);
            }
            let boot = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse::<u64>().ok())))
                .unwrap_or(0);
            self.start_time.set(i64::try_from(boot + num(19) / TICKS as u64).unwrap_or(0));
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            let kb = |key: &str| {
                status.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0)
            };
            self.resident.set(kb("VmRSS:") * 1024);
            self.virtual_memory.set(kb("VmSize:") * 1024);
            self.threads.set(kb("Threads:"));
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(i64::try_from(dir.count()).unwrap_or(0));
        }
        if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
            let soft = limits.lines().find_map(|l| l.strip_prefix("Max open files")).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok());
            self.max_fds.set(soft.unwrap_or(0));
        }
    }
}
