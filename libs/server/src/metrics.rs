//! Prometheus metrics under kube-apiserver's names and labels, so existing dashboards and
//! alerts work unchanged.

use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};

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
        Self { registry, requests, duration, long_running, inflight, authentication_attempts, authorization_decisions }
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
