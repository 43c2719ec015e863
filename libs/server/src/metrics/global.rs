//! Series observed where no server handle is at hand (the admission of a write, the audit
//! writer): process-wide, as kube's legacy registry, and registered into every server's
//! registry (tests that run several servers in one process share them).

use std::sync::LazyLock;
use std::time::Instant;

use prometheus::{HistogramOpts, HistogramVec, IntCounter, Registry};

use super::{opts, register};

struct Global {
    audit_events: IntCounter,
    admission_step: HistogramVec,
}

static GLOBAL: LazyLock<Global> = LazyLock::new(|| Global {
    audit_events: IntCounter::with_opts(opts("apiserver_audit_event_total", "ALPHA", "Counter of audit events generated and sent to the audit backend."))
        .expect("metric definition"),
    admission_step: HistogramVec::new(
        HistogramOpts::from(opts(
            "apiserver_admission_step_admission_duration_seconds",
            "STABLE",
            "Admission sub-step latency histogram in seconds, broken out for each operation and API resource and step type (validate or admit).",
        ))
        .buckets(vec![0.005, 0.025, 0.1, 0.5, 1.0, 2.5]),
        &["type", "operation", "rejected"],
    )
    .expect("metric definition"),
});

pub(super) fn register_into(registry: &Registry) {
    register(registry, GLOBAL.audit_events.clone());
    register(registry, GLOBAL.admission_step.clone());
}

/// Counts one audit event handed to the audit backend.
pub fn audit_event() {
    GLOBAL.audit_events.inc();
}

/// Records one admission phase: `step` is kube's `admit` (mutating) or `validate`.
pub fn admission_step(step: &'static str, operation: &'static str, rejected: bool, started: Instant) {
    GLOBAL
        .admission_step
        .with_label_values(&[step, operation, if rejected { "true" } else { "false" }])
        .observe(started.elapsed().as_secs_f64());
}
