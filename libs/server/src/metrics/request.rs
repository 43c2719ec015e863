//! The series of each request, as kube's `MonitorRequest`, `RecordLongRunning`,
//! `RecordRequestTermination` and `RecordRequestAbort` fill them.
//!
//! Cheap per request: the label values are borrowed from the request ([`Labels`]); a cache
//! maps them to a [`Series`] that holds the resolved histograms and gauge (one hash and one
//! read lock, no allocation once a series exists) and the counters per status code it has
//! seen. Only served resources and subresources get a series (kube instruments its installed
//! routes only): requests for unknown ones are not counted, so a client cannot grow the
//! series without bound.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use super::{opts, register, COMPONENT};
use crate::request_info::RequestInfo;

/// kube's `apiserver_request_duration_seconds` buckets.
const DURATION_BUCKETS: &[f64] =
    &[0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0];
/// kube's `apiserver_request_sli_duration_seconds` buckets.
const SLI_BUCKETS: &[f64] = &[0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0];

/// The label values of one request, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Labels<'a> {
    /// kube's reported verb (GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE, CONNECT, other).
    pub verb: &'static str,
    /// `""`, `All` or `invalid`, as kube's `cleanDryRun`.
    pub dry_run: &'static str,
    /// API group.
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Resource.
    pub resource: &'a str,
    /// Subresource.
    pub subresource: &'a str,
    /// `resource`, `namespace` or `cluster`, as kube's `CleanScope`.
    pub scope: &'static str,
}

impl<'a> Labels<'a> {
    /// The labels of a resource request.
    pub fn of(method: &http::Method, query: Option<&str>, content_type: Option<&[u8]>, info: &'a RequestInfo) -> Self {
        let scope = scope(info);
        Labels {
            verb: verb(method, content_type, info, scope),
            dry_run: dry_run(query),
            group: &info.api_group,
            version: &info.api_version,
            resource: &info.resource,
            subresource: &info.subresource,
            scope,
        }
    }

    fn key(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }
}

/// kube's `CleanScope`: a named object or a create is `resource`.
pub fn scope(info: &RequestInfo) -> &'static str {
    if !info.name.is_empty() || info.verb == "create" {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else if info.is_resource_request {
        "cluster"
    } else {
        ""
    }
}

/// kube's reported verb (`CanonicalVerb` then `cleanVerb`): GET of a collection is LIST, a
/// watch is WATCH, a patch with the apply content type is APPLY, the streaming subresources
/// are CONNECT, unknown methods `other`.
pub fn verb(method: &http::Method, content_type: Option<&[u8]>, info: &RequestInfo, scope: &str) -> &'static str {
    if info.is_resource_request && matches!(info.subresource.as_str(), "log" | "exec" | "portforward" | "attach" | "proxy") {
        return "CONNECT";
    }
    match *method {
        http::Method::GET | http::Method::HEAD if info.verb == "watch" => "WATCH",
        http::Method::GET | http::Method::HEAD if scope != "resource" && !scope.is_empty() => "LIST",
        http::Method::GET | http::Method::HEAD => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH if content_type.is_some_and(|c| c.starts_with(b"application/apply-patch")) => "APPLY",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        _ => "other",
    }
}

/// kube's `cleanDryRun`: no `dryRun` is `""`, only `All` values are `All`, anything else is
/// `invalid` (the handler refuses it).
pub fn dry_run(query: Option<&str>) -> &'static str {
    let Some(q) = query.filter(|q| q.contains("dryRun")) else { return "" };
    let mut values = q.split('&').filter_map(|kv| kv.split_once('=').or(Some((kv, "")))).filter(|(k, _)| *k == "dryRun").peekable();
    if values.peek().is_none() {
        return "";
    }
    if values.all(|(_, v)| v == "All") {
        "All"
    } else {
        "invalid"
    }
}

/// A status code as a label value: common codes without allocating.
fn code_label(code: u16) -> std::borrow::Cow<'static, str> {
    const CODES: &[(u16, &str)] = &[
        (200, "200"),
        (201, "201"),
        (202, "202"),
        (204, "204"),
        (304, "304"),
        (400, "400"),
        (401, "401"),
        (403, "403"),
        (404, "404"),
        (405, "405"),
        (406, "406"),
        (409, "409"),
        (410, "410"),
        (413, "413"),
        (415, "415"),
        (422, "422"),
        (429, "429"),
        (500, "500"),
        (503, "503"),
        (504, "504"),
    ];
    match CODES.iter().find(|(c, _)| *c == code) {
        Some((_, s)) => (*s).into(),
        None => code.to_string().into(),
    }
}

/// The vectors behind every series.
#[derive(Clone)]
struct Vecs {
    total: IntCounterVec,
    duration: HistogramVec,
    sli: HistogramVec,
    sizes: HistogramVec,
    long_running: IntGaugeVec,
    terminations: IntCounterVec,
    aborts: IntCounterVec,
    watch_events: IntCounterVec,
    watch_event_sizes: HistogramVec,
}

/// The request series and their cache.
#[derive(Clone)]
pub struct RequestMetrics {
    vecs: Vecs,
    cache: Arc<RwLock<HashMap<u64, Arc<Series>>>>,
}

/// One label set's resolved metrics.
pub struct Series {
    verb: &'static str,
    dry_run: &'static str,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
    duration: Histogram,
    /// kube leaves dry runs out of the SLI.
    sli: Option<Histogram>,
    /// kube records response sizes of reads only.
    sizes: Option<Histogram>,
    long_running: OnceLock<IntGauge>,
    codes: RwLock<Vec<(u16, IntCounter)>>,
    vecs: Vecs,
}

impl Series {
    fn matches(&self, l: &Labels<'_>) -> bool {
        self.verb == l.verb
            && self.dry_run == l.dry_run
            && self.scope == l.scope
            && self.group == l.group
            && self.version == l.version
            && self.resource == l.resource
            && self.subresource == l.subresource
    }

    fn counter(&self, code: u16) -> IntCounter {
        if let Some((_, c)) = self.codes.read().unwrap_or_else(|p| p.into_inner()).iter().find(|(c, _)| *c == code) {
            return c.clone();
        }
        let label = code_label(code);
        let counter = self.vecs.total.with_label_values(&[
            self.verb,
            self.dry_run,
            &self.group,
            &self.version,
            &self.resource,
            &self.subresource,
            self.scope,
            COMPONENT,
            &label,
        ]);
        self.codes.write().unwrap_or_else(|p| p.into_inner()).push((code, counter.clone()));
        counter
    }

    /// `apiserver_longrunning_requests` of this label set (kube's gauge has no dry_run label).
    pub fn long_running(&self) -> &IntGauge {
        self.long_running.get_or_init(|| {
            self.vecs.long_running.with_label_values(&[
                self.verb,
                &self.group,
                &self.version,
                &self.resource,
                &self.subresource,
                self.scope,
                COMPONENT,
            ])
        })
    }

    /// Records one finished request: its count by code, its latency, its size for reads, and
    /// a termination when a filter refused it in self-defence (429 from the in-flight limits
    /// or priority and fairness, 504 from the timeout).
    pub fn observe(&self, code: u16, seconds: f64, size: Option<u64>) {
        self.counter(code).inc();
        self.duration.observe(seconds);
        if let Some(sli) = &self.sli {
            // kube subtracts webhook and priority-and-fairness waiting; kapi does not track
            // them per request yet, so its SLI is the whole latency.
            sli.observe(seconds);
        }
        if let (Some(sizes), Some(size)) = (&self.sizes, size) {
            sizes.observe(size as f64);
        }
        if code == 429 || code == 504 {
            let label = code_label(code);
            self.vecs
                .terminations
                .with_label_values(&[self.verb, &self.group, &self.version, &self.resource, &self.subresource, self.scope, COMPONENT, &label])
                .inc();
        }
    }

    /// Records a request whose handling ended without an answer (the client went away).
    pub fn aborted(&self) {
        self.vecs.aborts.with_label_values(&[self.verb, &self.group, &self.version, &self.resource, &self.subresource, self.scope]).inc();
    }
}

/// The watch event series of one resource, resolved once per watch.
#[derive(Clone)]
pub struct WatchEvents {
    events: IntCounter,
    sizes: Histogram,
}

impl WatchEvents {
    /// Counts one frame sent to a watcher.
    pub fn observe(&self, bytes: usize) {
        self.events.inc();
        self.sizes.observe(bytes as f64);
    }
}

fn exponential(start: f64, factor: f64, count: usize) -> Vec<f64> {
    prometheus::exponential_buckets(start, factor, count).expect("bucket definition")
}

impl RequestMetrics {
    /// Defines and registers the request series.
    pub fn new(registry: &Registry) -> Self {
        let labels = ["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"];
        let no_dry_run = ["verb", "group", "version", "resource", "subresource", "scope", "component"];
        let histogram = |name: &str, stability: &str, help: &str, buckets: Vec<f64>, labels: &[&str]| {
            let o = opts(name, stability, help);
            HistogramVec::new(HistogramOpts::from(o).buckets(buckets), labels).expect("metric definition")
        };
        let vecs = Vecs {
            total: IntCounterVec::new(
                opts(
                    "apiserver_request_total",
                    "STABLE",
                    "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
                ),
                &["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"],
            )
            .expect("metric definition"),
            duration: histogram(
                "apiserver_request_duration_seconds",
                "STABLE",
                "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
                DURATION_BUCKETS.to_vec(),
                &labels,
            ),
            sli: histogram(
                "apiserver_request_sli_duration_seconds",
                "ALPHA",
                "Response latency distribution (not counting webhook duration and priority & fairness queue wait times) in seconds for each verb, group, version, resource, subresource, scope and component.",
                SLI_BUCKETS.to_vec(),
                &no_dry_run,
            ),
            sizes: histogram(
                "apiserver_response_sizes",
                "STABLE",
                "Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.",
                exponential(1000.0, 10.0, 7),
                &no_dry_run,
            ),
            long_running: IntGaugeVec::new(
                opts(
                    "apiserver_longrunning_requests",
                    "STABLE",
                    "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
                ),
                &no_dry_run,
            )
            .expect("metric definition"),
            terminations: IntCounterVec::new(
                opts("apiserver_request_terminations_total", "ALPHA", "Number of requests which apiserver terminated in self-defense."),
                &["verb", "group", "version", "resource", "subresource", "scope", "component", "code"],
            )
            .expect("metric definition"),
            aborts: IntCounterVec::new(
                opts(
                    "apiserver_request_aborts_total",
                    "ALPHA",
                    "Number of requests which apiserver aborted possibly due to a timeout, for each group, version, verb, resource, subresource and scope",
                ),
                &["verb", "group", "version", "resource", "subresource", "scope"],
            )
            .expect("metric definition"),
            watch_events: IntCounterVec::new(
                opts("apiserver_watch_events_total", "BETA", "Number of events sent in watch clients"),
                &["group", "version", "resource"],
            )
            .expect("metric definition"),
            watch_event_sizes: histogram(
                "apiserver_watch_events_sizes",
                "BETA",
                "Watch event size distribution in bytes",
                exponential(1024.0, 2.0, 8),
                &["group", "version", "resource"],
            ),
        };
        register(registry, vecs.total.clone());
        register(registry, vecs.duration.clone());
        register(registry, vecs.sli.clone());
        register(registry, vecs.sizes.clone());
        register(registry, vecs.long_running.clone());
        register(registry, vecs.terminations.clone());
        register(registry, vecs.aborts.clone());
        register(registry, vecs.watch_events.clone());
        register(registry, vecs.watch_event_sizes.clone());
        RequestMetrics { vecs, cache: Arc::default() }
    }

    /// The series of `labels`, from the cache; `served` is asked on a miss only, and a label
    /// set it refuses gets no series.
    pub fn series(&self, labels: &Labels<'_>, served: impl FnOnce() -> bool) -> Option<Arc<Series>> {
        let key = labels.key();
        if let Some(s) = self.cache.read().unwrap_or_else(|p| p.into_inner()).get(&key) {
            if s.matches(labels) {
                return Some(s.clone());
            }
            // A hash collision: correct but uncached.
            return served().then(|| Arc::new(self.build(labels)));
        }
        if !served() {
            return None;
        }
        let series = Arc::new(self.build(labels));
        self.cache.write().unwrap_or_else(|p| p.into_inner()).entry(key).or_insert_with(|| series.clone());
        Some(series)
    }

    fn build(&self, l: &Labels<'_>) -> Series {
        let v = &self.vecs;
        let no_dry_run = [l.verb, l.group, l.version, l.resource, l.subresource, l.scope, COMPONENT];
        Series {
            verb: l.verb,
            dry_run: l.dry_run,
            group: l.group.to_owned(),
            version: l.version.to_owned(),
            resource: l.resource.to_owned(),
            subresource: l.subresource.to_owned(),
            scope: l.scope,
            duration: v.duration.with_label_values(&[l.verb, l.dry_run, l.group, l.version, l.resource, l.subresource, l.scope, COMPONENT]),
            sli: l.dry_run.is_empty().then(|| v.sli.with_label_values(&no_dry_run)),
            sizes: matches!(l.verb, "GET" | "LIST").then(|| v.sizes.with_label_values(&no_dry_run)),
            long_running: OnceLock::new(),
            codes: RwLock::default(),
            vecs: v.clone(),
        }
    }

    /// The watch event series of a resource.
    pub fn watch_events(&self, group: &str, version: &str, resource: &str) -> WatchEvents {
        WatchEvents {
            events: self.vecs.watch_events.with_label_values(&[group, version, resource]),
            sizes: self.vecs.watch_event_sizes.with_label_values(&[group, version, resource]),
        }
    }
}

/// Counts a request as aborted unless it finished: dropped with the request's future when
/// the client goes away before the answer.
pub struct AbortGuard {
    series: Option<Arc<Series>>,
    long_running: bool,
}

impl AbortGuard {
    /// Armed for `series`; a long-running request also leaves the gauge when aborted.
    pub fn new(series: Arc<Series>, long_running: bool) -> Self {
        AbortGuard { series: Some(series), long_running }
    }

    /// The request finished: nothing to count.
    pub fn disarm(mut self) -> Arc<Series> {
        self.series.take().expect("armed until disarmed")
    }
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if let Some(s) = &self.series {
            s.aborted();
            if self.long_running {
                s.long_running().dec();
            }
        }
    }
}

/// Held by a long-running answer's body until it is sent or dropped: kube counts a watch in
/// `apiserver_longrunning_requests` while it streams, and records it when it ends.
pub struct LongRunning {
    /// The request's series.
    pub series: Arc<Series>,
    /// When the request arrived.
    pub started: Instant,
    /// The answer's status.
    pub code: u16,
}

impl Drop for LongRunning {
    fn drop(&mut self) {
        self.series.long_running().dec();
        self.series.observe(self.code, self.started.elapsed().as_secs_f64(), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, path: &str, query: Option<&str>) -> (http::Method, RequestInfo) {
        let m: http::Method = method.parse().expect("method");
        let i = RequestInfo::parse(&m, path, query);
        (m, i)
    }

    #[test]
    fn verbs_and_scopes_are_kubes() {
        let cases = [
            ("GET", "/api/v1/namespaces/a/configmaps", None, "LIST", "namespace"),
            ("GET", "/api/v1/configmaps", None, "LIST", "cluster"),
            ("GET", "/api/v1/namespaces/a/configmaps/x", None, "GET", "resource"),
            ("GET", "/api/v1/namespaces/a/configmaps", Some("watch=true"), "WATCH", "namespace"),
            ("POST", "/api/v1/namespaces/a/configmaps", None, "POST", "resource"),
            ("DELETE", "/api/v1/namespaces/a/configmaps", None, "DELETE", "namespace"),
            ("GET", "/api/v1/namespaces/a/pods/p/log", None, "CONNECT", "resource"),
        ];
        for (method, path, query, want_verb, want_scope) in cases {
            let (m, i) = info(method, path, query);
            let l = Labels::of(&m, query, None, &i);
            assert_eq!((l.verb, l.scope), (want_verb, want_scope), "{method} {path}");
        }
        let (m, i) = info("PATCH", "/api/v1/namespaces/a/configmaps/x", None);
        assert_eq!(Labels::of(&m, None, Some(b"application/apply-patch+yaml"), &i).verb, "APPLY");
    }

    #[test]
    fn dry_run_values_are_kubes() {
        assert_eq!(dry_run(None), "");
        assert_eq!(dry_run(Some("fieldManager=x")), "");
        assert_eq!(dry_run(Some("dryRun=All")), "All");
        assert_eq!(dry_run(Some("dryRun=All&dryRun=All")), "All");
        assert_eq!(dry_run(Some("dryRun=Some")), "invalid");
    }

    #[test]
    fn series_are_cached_and_unserved_ones_not_made() {
        let registry = Registry::new();
        let m = RequestMetrics::new(&registry);
        let (method, i) = info("GET", "/api/v1/namespaces/a/configmaps/x", None);
        let l = Labels::of(&method, None, None, &i);
        assert!(m.series(&l, || false).is_none());
        let a = m.series(&l, || true).expect("served");
        let b = m.series(&l, || panic!("asked again")).expect("cached");
        assert!(Arc::ptr_eq(&a, &b));
        a.observe(404, 0.01, Some(120));
        a.observe(404, 0.01, Some(120));
        a.observe(200, 0.01, Some(120));
        let counted = m.vecs.total.with_label_values(&["GET", "", "", "v1", "configmaps", "", "resource", "apiserver", "404"]).get();
        assert_eq!(counted, 2);
    }
}
