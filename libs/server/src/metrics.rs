//! Prometheus metrics under kube-apiserver's names and labels, so existing dashboards and
//! alerts work unchanged.

use prometheus::{Encoder, Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

/// kube-apiserver's request duration buckets.
const DURATION_BUCKETS: &[f64] =
    &[0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0];

/// The server's metrics registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// `apiserver_request_total`.
    pub requests: IntCounterVec,
    /// `apiserver_request_duration_seconds`.
    pub duration: HistogramVec,
    /// `apiserver_longrunning_requests`.
    pub long_running: IntGaugeVec,
    /// `apiserver_current_inflight_requests`.
    pub inflight: IntGaugeVec,
    /// `authentication_attempts{result}`: success, failure (no credentials accepted), error
    /// (credentials rejected).
    pub authentication_attempts: IntCounterVec,
    /// `apiserver_authorization_decisions_total{decision}`: allowed or denied.
    pub authorization_decisions: IntCounterVec,
    replication: Replication,
}

/// How this replica follows the shared store, refreshed at each scrape.
#[derive(Clone)]
struct Replication {
    lag_revisions: IntGauge,
    lag_seconds: Gauge,
    applied: IntGauge,
    nats_connected: IntGauge,
    nats_reconnects: IntCounter,
    repairs: IntCounter,
    hints_published: IntCounter,
    hints_received: IntCounter,
}

impl Replication {
    fn new() -> Self {
        let gauge = |name: &str, help: &str| IntGauge::new(name, help).expect("metric definition");
        let counter = |name: &str, help: &str| IntCounter::new(name, help).expect("metric definition");
        Self {
            lag_revisions: gauge(
                "kapi_watch_cache_follower_lag_revisions",
                "Revisions this replica's watch caches trail the newest commit it knows of (an event count on SQLite).",
            ),
            lag_seconds: Gauge::new(
                "kapi_watch_cache_follower_lag_seconds",
                "How long this replica's watch caches have trailed the newest commit it knows of (0 when caught up).",
            )
            .expect("metric definition"),
            applied: gauge("kapi_watch_cache_applied_revision", "Store revision up to which this replica's watch caches have applied the change log."),
            nats_connected: gauge("kapi_nats_connected", "1 while this replica is connected to NATS (0 without --nats-url or while disconnected)."),
            nats_reconnects: counter("kapi_nats_reconnects_total", "Connections to NATS re-established after a loss."),
            repairs: counter(
                "kapi_watch_cache_repairs_total",
                "Times commits reached the change log without a NATS hint announcing them, and were read from the log.",
            ),
            hints_published: counter("kapi_nats_hints_published_total", "Commit hints this replica published to NATS."),
            hints_received: counter("kapi_nats_hints_received_total", "Commit hints this replica received from NATS (its own included)."),
        }
    }

    fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.lag_revisions.clone()),
            Box::new(self.lag_seconds.clone()),
            Box::new(self.applied.clone()),
            Box::new(self.nats_connected.clone()),
            Box::new(self.nats_reconnects.clone()),
            Box::new(self.repairs.clone()),
            Box::new(self.hints_published.clone()),
            Box::new(self.hints_received.clone()),
        ]
    }
}

/// Raises a counter to a total kept elsewhere (counters only go up).
fn raise_to(counter: &IntCounter, total: u64) {
    let now = counter.get();
    if total > now {
        counter.inc_by(total - now);
    }
}

/// The labels of one request, as kube-apiserver's `MonitorRequest` fills them.
pub struct RequestLabels<'a> {
    /// Verb as kube reports it (WATCH, LIST, GET, POST, PUT, PATCH, DELETE, ...)
    pub verb: &'a str,
    /// `All` or empty.
    pub dry_run: &'a str,
    /// API group.
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Resource.
    pub resource: &'a str,
    /// Subresource.
    pub subresource: &'a str,
    /// resource, namespace or cluster.
    pub scope: &'a str,
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "apiserver_request_total",
                "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            ),
            &["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"],
        )
        .expect("metric definition");
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "apiserver_request_duration_seconds",
                "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
            &["verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"],
        )
        .expect("metric definition");
        let long_running = IntGaugeVec::new(
            Opts::new("apiserver_longrunning_requests", "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component."),
            &["verb", "group", "version", "resource", "subresource", "scope", "component"],
        )
        .expect("metric definition");
        let inflight = IntGaugeVec::new(
            Opts::new("apiserver_current_inflight_requests", "Maximal number of currently used inflight request limit of this apiserver per request kind in last second."),
            &["request_kind"],
        )
        .expect("metric definition");
        let authentication_attempts =
            IntCounterVec::new(Opts::new("authentication_attempts", "Counter of authenticated attempts."), &["result"]).expect("metric definition");
        let authorization_decisions = IntCounterVec::new(
            Opts::new("apiserver_authorization_decisions_total", "Total number of terminal decisions made by an authorizer split by authorizer type, name, and decision."),
            &["decision"],
        )
        .expect("metric definition");
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(duration.clone()),
            Box::new(long_running.clone()),
            Box::new(inflight.clone()),
            Box::new(authentication_attempts.clone()),
            Box::new(authorization_decisions.clone()),
        ] {
            registry.register(c).expect("unique metric names");
        }
        let replication = Replication::new();
        for c in replication.collectors() {
            registry.register(c).expect("unique metric names");
        }
        Self { registry, requests, duration, long_running, inflight, authentication_attempts, authorization_decisions, replication }
    }

    /// Copies the follower's lag and the NATS counters into the registry (before a scrape).
    pub fn set_replication(&self, lag: &kapi_watch::FollowerLag, nats: Option<&kapi_watch::FanoutStats>) {
        let r = &self.replication;
        r.lag_revisions.set(i64::try_from(lag.revisions).unwrap_or(i64::MAX));
        r.lag_seconds.set(lag.seconds);
        r.applied.set(i64::try_from(lag.applied).unwrap_or(i64::MAX));
        let nats = nats.copied().unwrap_or_default();
        r.nats_connected.set(i64::from(nats.connected));
        raise_to(&r.nats_reconnects, nats.reconnects);
        raise_to(&r.repairs, nats.repairs);
        raise_to(&r.hints_published, nats.published);
        raise_to(&r.hints_received, nats.received);
    }

    /// Records one finished request.
    pub fn observe(&self, l: &RequestLabels<'_>, code: u16, seconds: f64) {
        let code = code.to_string();
        self.requests
            .with_label_values(&[l.verb, l.dry_run, l.group, l.version, l.resource, l.subresource, l.scope, "apiserver", &code])
            .inc();
        self.duration
            .with_label_values(&[l.verb, l.dry_run, l.group, l.version, l.resource, l.subresource, l.scope, "apiserver"])
            .observe(seconds);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        buf
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// kube's metric verb: LIST and WATCH split from GET, the rest from the HTTP method.
pub fn metric_verb(method: &http::Method, verb: &str) -> String {
    match verb {
        "list" => "LIST".into(),
        "watch" => "WATCH".into(),
        "get" => "GET".into(),
        "deletecollection" => "DELETE".into(),
        _ => method.as_str().to_ascii_uppercase(),
    }
}
