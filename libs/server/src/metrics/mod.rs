//! Prometheus metrics under kube-apiserver's names, labels and buckets, so that the dashboards,
//! alerts and recording rules written for kube-apiserver (kubernetes-mixin, the Prometheus
//! operator's rules) read kapi unchanged. kapi's own series (replication, NATS) are `kapi_`.
//!
//! - [`request`]: the series of each request (the hot path) and kube's label values;
//! - [`global`]: series observed where no server handle is at hand (admission, audit), as
//!   process-wide values like kube's legacy registry;
//! - [`scrape`]: values read when scraped (storage objects, watchers, watch caches, process,
//!   build info);
//! - `etcd`: kube's etcd client series, from the etcd backend;
//! - [`exposition`]: the text format, and `/metrics` and `/metrics/slis` answers.
//!
//! Help texts carry kube's stability prefix (`[STABLE]`, `[ALPHA]`) as kube's registry writes
//! them, so a dashboard's tooltip reads the same.

#[cfg(feature = "etcd")]
pub mod etcd;
pub mod exposition;
pub mod global;
pub mod request;
pub mod scrape;

use prometheus::core::Collector;
use prometheus::{Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

pub use exposition::respond;
pub use global::{
    admission_step, encryption_config_reload, audit_error, audit_event, flowcontrol_current_limit, flowcontrol_flow, flowcontrol_forget_level,
    flowcontrol_level_limits, flowcontrol_level_totals, flowcontrol_rejected, storage_list, AdmissionMetrics, RestClientMetrics,
};
pub use request::{RequestMetrics, WatchEvents};

/// kube's `component` label value for everything kapi serves.
pub const COMPONENT: &str = "apiserver";

/// The server's metrics registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// The per-request series (`apiserver_request_total` and its companions).
    pub request: RequestMetrics,
    /// `apiserver_current_inflight_requests{request_kind}`.
    pub inflight: IntGaugeVec,
    /// `authentication_attempts{result}`: success, failure (no credentials accepted), error
    /// (credentials rejected).
    pub authentication_attempts: IntCounterVec,
    /// `authenticated_user_requests{username}`, usernames compressed as kube does.
    pub authenticated_user_requests: IntCounterVec,
    /// `apiserver_authorization_decisions_total{decision}`: allowed or denied.
    pub authorization_decisions: IntCounterVec,
    scrape: scrape::ScrapeMetrics,
    replication: Replication,
}

/// Builds a metric definition that cannot fail (names and labels are constants).
pub(crate) fn opts(name: &str, stability: &str, help: &str) -> Opts {
    Opts::new(name, format!("[{stability}] {help}"))
}

pub(crate) fn register(registry: &Registry, c: impl Collector + 'static) {
    registry.register(Box::new(c)).expect("unique metric names");
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
    fn new(registry: &Registry) -> Self {
        let gauge = |name: &str, help: &str| IntGauge::new(name, help).expect("metric definition");
        let counter = |name: &str, help: &str| IntCounter::new(name, help).expect("metric definition");
        let r = Self {
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
        };
        register(registry, r.lag_revisions.clone());
        register(registry, r.lag_seconds.clone());
        register(registry, r.applied.clone());
        register(registry, r.nats_connected.clone());
        register(registry, r.nats_reconnects.clone());
        register(registry, r.repairs.clone());
        register(registry, r.hints_published.clone());
        register(registry, r.hints_received.clone());
        r
    }
}

/// Raises a counter to a total kept elsewhere (counters only go up).
fn raise_to(counter: &IntCounter, total: u64) {
    let now = counter.get();
    if total > now {
        counter.inc_by(total - now);
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let registry = Registry::new();
        let request = RequestMetrics::new(&registry);
        let inflight = IntGaugeVec::new(
            opts(
                "apiserver_current_inflight_requests",
                "STABLE",
                "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
            ),
            &["request_kind"],
        )
        .expect("metric definition");
        // kube names these two counters without `_total`; the exposition types them untyped
        // (see `exposition`), so the names stay kube's and `promtool check metrics` passes.
        let authentication_attempts =
            IntCounterVec::new(opts("authentication_attempts", "ALPHA", "Counter of authenticated attempts."), &["result"]).expect("metric definition");
        let authenticated_user_requests = IntCounterVec::new(
            opts("authenticated_user_requests", "ALPHA", "Counter of authenticated requests broken out by username."),
            &["username"],
        )
        .expect("metric definition");
        let authorization_decisions = IntCounterVec::new(
            opts(
                "apiserver_authorization_decisions_total",
                "ALPHA",
                "Total number of terminal decisions made by an authorizer split by authorizer type, name, and decision.",
            ),
            &["decision"],
        )
        .expect("metric definition");
        register(&registry, inflight.clone());
        register(&registry, authentication_attempts.clone());
        register(&registry, authenticated_user_requests.clone());
        register(&registry, authorization_decisions.clone());
        global::register_into(&registry);
        let scrape = scrape::ScrapeMetrics::new(&registry);
        let replication = Replication::new(&registry);
        Self {
            registry,
            request,
            inflight,
            authentication_attempts,
            authenticated_user_requests,
            authorization_decisions,
            scrape,
            replication,
        }
    }

    /// Counts one authenticated request under kube's compressed username: a few well-known
    /// identities by name, email-like names as `email_id`, everyone else as `other`, so the
    /// series stay few whoever calls.
    pub fn authenticated_user(&self, name: &str) {
        let label = match name {
            "admin" | "client" | "kube_proxy" | "kubelet" | "system:serviceaccount:kube-system:default" => name,
            n if n.contains('@') => "email_id",
            _ => "other",
        };
        self.authenticated_user_requests.with_label_values(&[label]).inc();
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

    /// The `apiserver_watch_events_*` series of one watched resource, resolved once per watch.
    pub fn watch_events(&self, spec: &kapi_registry::catalog::ResourceSpec) -> WatchEvents {
        self.request.watch_events(spec.group, spec.version, spec.resource)
    }

    /// The Prometheus text exposition of everything registered (scrape-time values as they
    /// were last refreshed).
    pub fn render(&self) -> Vec<u8> {
        exposition::encode(self.registry.gather())
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
