//! kube's health check SLIs (`/metrics/slis`): the last result of each check per endpoint
//! (`kubernetes_healthcheck`, 1 or 0) and a count of results (`kubernetes_healthchecks_total`),
//! recorded whenever a probe runs the checks, as kube's healthz handlers record them.

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

use super::Endpoint;

/// The SLI registry, apart from `/metrics` as in kube.
pub struct Slis {
    registry: Registry,
    healthcheck: IntGaugeVec,
    total: IntCounterVec,
}

impl Slis {
    /// Registers both series.
    pub fn new() -> Self {
        let registry = Registry::new();
        let healthcheck = IntGaugeVec::new(
            Opts::new("kubernetes_healthcheck", "[BETA] This metric records the result of a single healthcheck."),
            &["name", "type"],
        )
        .expect("metric definition");
        let total = IntCounterVec::new(
            Opts::new("kubernetes_healthchecks_total", "[BETA] This metric records the results of all healthcheck."),
            &["name", "type", "status"],
        )
        .expect("metric definition");
        registry.register(Box::new(healthcheck.clone())).expect("unique metric names");
        registry.register(Box::new(total.clone())).expect("unique metric names");
        Slis { registry, healthcheck, total }
    }

    /// Records one check's result on one endpoint.
    pub fn observe(&self, name: &str, endpoint: Endpoint, ok: bool) {
        let kind = endpoint.as_str();
        self.healthcheck.with_label_values(&[name, kind]).set(i64::from(ok));
        self.total.with_label_values(&[name, kind, if ok { "success" } else { "error" }]).inc();
    }

    /// The text exposition.
    pub fn render(&self) -> Vec<u8> {
        crate::metrics::exposition::encode(self.registry.gather())
    }
}

impl Default for Slis {
    fn default() -> Self {
        Self::new()
    }
}
