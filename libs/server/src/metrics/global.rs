//! Series observed where no server handle is at hand (the admission of a write, the audit
//! writer): process-wide, as kube's legacy registry, and registered into every server's
//! registry (tests that run several servers in one process share them).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};
use std::time::{Duration, Instant};

use prometheus::core::Collector;
use prometheus::{HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use super::{opts, register};

struct Global {
    encryption_reloads: IntCounterVec,
    storage_list_total: IntCounterVec,
    storage_list_fetched: IntCounterVec,
    storage_list_evaluated: IntCounterVec,
    storage_list_returned: IntCounterVec,
    flowcontrol_dispatched: IntCounterVec,
    flowcontrol_rejected: IntCounterVec,
    flowcontrol_wait: HistogramVec,
    flowcontrol_inqueue_requests: IntGaugeVec,
    flowcontrol_inqueue_seats: IntGaugeVec,
    flowcontrol_executing_requests: IntGaugeVec,
    flowcontrol_executing_seats: IntGaugeVec,
    flowcontrol_nominal_limit: IntGaugeVec,
    flowcontrol_lower_limit: IntGaugeVec,
    flowcontrol_upper_limit: IntGaugeVec,
    flowcontrol_current_limit: IntGaugeVec,
    rest_client_requests: IntCounterVec,
    rest_client_duration: HistogramVec,
    audit_events: IntCounter,
    audit_errors: IntCounterVec,
    admission_step: HistogramVec,
    admission_controller: HistogramVec,
    admission_webhook: HistogramVec,
    admission_webhook_rejections: IntCounterVec,
    aggregator_unavailable: IntGaugeVec,
    aggregator_unavailable_total: IntCounterVec,
}

static GLOBAL: LazyLock<Global> = LazyLock::new(|| Global {
    encryption_reloads: IntCounterVec::new(
        opts("apiserver_encryption_config_controller_automatic_reloads_total", "ALPHA", "Total number of reload successes and failures of encryption configuration split by apiserver identity."),
        &["status"],
    )
    .expect("metric definition"),
    storage_list_total: IntCounterVec::new(opts("apiserver_storage_list_total", "ALPHA", "Number of LIST requests served from storage"), &["resource"])
        .expect("metric definition"),
    storage_list_fetched: IntCounterVec::new(
        opts("apiserver_storage_list_fetched_objects_total", "ALPHA", "Number of objects read from storage in the course of serving a LIST request"),
        &["resource"],
    )
    .expect("metric definition"),
    storage_list_evaluated: IntCounterVec::new(
        opts("apiserver_storage_list_evaluated_objects_total", "ALPHA", "Number of objects tested in the course of serving a LIST request from storage"),
        &["resource"],
    )
    .expect("metric definition"),
    storage_list_returned: IntCounterVec::new(
        opts("apiserver_storage_list_returned_objects_total", "ALPHA", "Number of objects returned for a LIST request from storage"),
        &["resource"],
    )
    .expect("metric definition"),
    flowcontrol_dispatched: IntCounterVec::new(
        opts("apiserver_flowcontrol_dispatched_requests_total", "BETA", "Number of requests executed by API Priority and Fairness subsystem"),
        &["flow_schema", "priority_level"],
    )
    .expect("metric definition"),
    flowcontrol_rejected: IntCounterVec::new(
        opts("apiserver_flowcontrol_rejected_requests_total", "BETA", "Number of requests rejected by API Priority and Fairness subsystem"),
        &["flow_schema", "priority_level", "reason"],
    )
    .expect("metric definition"),
    flowcontrol_wait: HistogramVec::new(
        HistogramOpts::from(opts(
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "BETA",
            "Length of time a request spent waiting in its queue",
        ))
        .buckets(vec![0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0]),
        &["flow_schema", "priority_level", "execute"],
    )
    .expect("metric definition"),
    flowcontrol_inqueue_requests: IntGaugeVec::new(
        opts("apiserver_flowcontrol_current_inqueue_requests", "BETA", "Number of requests currently pending in queues of the API Priority and Fairness subsystem"),
        &["priority_level", "flow_schema"],
    )
    .expect("metric definition"),
    flowcontrol_inqueue_seats: IntGaugeVec::new(
        opts("apiserver_flowcontrol_current_inqueue_seats", "ALPHA", "Number of seats currently pending in queues of the API Priority and Fairness subsystem"),
        &["priority_level", "flow_schema"],
    )
    .expect("metric definition"),
    flowcontrol_executing_requests: IntGaugeVec::new(
        opts(
            "apiserver_flowcontrol_current_executing_requests",
            "BETA",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
        ),
        &["priority_level", "flow_schema"],
    )
    .expect("metric definition"),
    flowcontrol_executing_seats: IntGaugeVec::new(
        opts(
            "apiserver_flowcontrol_current_executing_seats",
            "BETA",
            "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
        ),
        &["priority_level", "flow_schema"],
    )
    .expect("metric definition"),
    flowcontrol_nominal_limit: IntGaugeVec::new(
        opts("apiserver_flowcontrol_nominal_limit_seats", "BETA", "Nominal number of execution seats configured for each priority level"),
        &["priority_level"],
    )
    .expect("metric definition"),
    flowcontrol_lower_limit: IntGaugeVec::new(
        opts("apiserver_flowcontrol_lower_limit_seats", "ALPHA", "Configured lower bound on number of execution seats available to each priority level"),
        &["priority_level"],
    )
    .expect("metric definition"),
    flowcontrol_upper_limit: IntGaugeVec::new(
        opts("apiserver_flowcontrol_upper_limit_seats", "ALPHA", "Configured upper bound on number of execution seats available to each priority level"),
        &["priority_level"],
    )
    .expect("metric definition"),
    flowcontrol_current_limit: IntGaugeVec::new(
        opts("apiserver_flowcontrol_current_limit_seats", "ALPHA", "current derived number of execution seats available to each priority level"),
        &["priority_level"],
    )
    .expect("metric definition"),
    rest_client_requests: IntCounterVec::new(
        opts("rest_client_requests_total", "ALPHA", "Number of HTTP requests, partitioned by status code, method, and host."),
        &["code", "host", "method"],
    )
    .expect("metric definition"),
    rest_client_duration: HistogramVec::new(
        HistogramOpts::from(opts("rest_client_request_duration_seconds", "ALPHA", "Request latency in seconds. Broken down by verb, and host."))
            .buckets(vec![0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0]),
        &["host", "verb"],
    )
    .expect("metric definition"),
    audit_events: IntCounter::with_opts(opts("apiserver_audit_event_total", "ALPHA", "Counter of audit events generated and sent to the audit backend."))
        .expect("metric definition"),
    audit_errors: IntCounterVec::new(
        opts("apiserver_audit_error_total", "ALPHA", "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error."),
        &["plugin"],
    )
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
    admission_controller: HistogramVec::new(
        HistogramOpts::from(opts(
            "apiserver_admission_controller_admission_duration_seconds",
            "STABLE",
            "Admission controller latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
        ))
        .buckets(vec![0.005, 0.025, 0.1, 0.5, 1.0, 2.5]),
        &["name", "type", "operation", "rejected"],
    )
    .expect("metric definition"),
    admission_webhook: HistogramVec::new(
        HistogramOpts::from(opts(
            "apiserver_admission_webhook_admission_duration_seconds",
            "STABLE",
            "Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
        ))
        .buckets(vec![0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0]),
        &["name", "type", "operation", "rejected"],
    )
    .expect("metric definition"),
    admission_webhook_rejections: IntCounterVec::new(
        opts(
            "apiserver_admission_webhook_rejection_count",
            "ALPHA",
            "Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
        ),
        &["name", "type", "operation", "error_type", "rejection_code"],
    )
    .expect("metric definition"),
    aggregator_unavailable: IntGaugeVec::new(
        opts("aggregator_unavailable_apiservice", "ALPHA", "Gauge of APIServices which are marked as unavailable broken down by APIService name."),
        &["name"],
    )
    .expect("metric definition"),
    aggregator_unavailable_total: IntCounterVec::new(
        opts("aggregator_unavailable_apiservice_total", "ALPHA", "Counter of APIServices which are marked as unavailable broken down by APIService name and reason."),
        &["name", "reason"],
    )
    .expect("metric definition"),
});

pub(super) fn register_into(registry: &Registry) {
    #[cfg(feature = "etcd")]
    super::etcd::register_into(registry);
    register(registry, GLOBAL.encryption_reloads.clone());
    register(registry, GLOBAL.storage_list_total.clone());
    register(registry, GLOBAL.storage_list_fetched.clone());
    register(registry, GLOBAL.storage_list_evaluated.clone());
    register(registry, GLOBAL.storage_list_returned.clone());
    register(registry, GLOBAL.flowcontrol_dispatched.clone());
    register(registry, GLOBAL.flowcontrol_rejected.clone());
    register(registry, GLOBAL.flowcontrol_wait.clone());
    register(registry, GLOBAL.flowcontrol_inqueue_requests.clone());
    register(registry, GLOBAL.flowcontrol_inqueue_seats.clone());
    register(registry, GLOBAL.flowcontrol_executing_requests.clone());
    register(registry, GLOBAL.flowcontrol_executing_seats.clone());
    register(registry, GLOBAL.flowcontrol_nominal_limit.clone());
    register(registry, GLOBAL.flowcontrol_lower_limit.clone());
    register(registry, GLOBAL.flowcontrol_upper_limit.clone());
    register(registry, GLOBAL.flowcontrol_current_limit.clone());
    register(registry, GLOBAL.rest_client_requests.clone());
    register(registry, GLOBAL.rest_client_duration.clone());
    register(registry, GLOBAL.audit_events.clone());
    register(registry, GLOBAL.audit_errors.clone());
    register(registry, GLOBAL.admission_step.clone());
    register(registry, GLOBAL.admission_controller.clone());
    register(registry, GLOBAL.admission_webhook.clone());
    register(registry, GLOBAL.admission_webhook_rejections.clone());
    register(registry, GLOBAL.aggregator_unavailable.clone());
    register(registry, GLOBAL.aggregator_unavailable_total.clone());
}

/// kube-aggregator's availability series for one APIService after a check: the gauge follows
/// its state; the counter counts its turns from available to unavailable, by reason.
pub fn apiservice_availability(name: &str, available: bool, became_unavailable: Option<&str>) {
    GLOBAL.aggregator_unavailable.with_label_values(&[name]).set(i64::from(!available));
    if let Some(reason) = became_unavailable {
        GLOBAL.aggregator_unavailable_total.with_label_values(&[name, reason]).inc();
    }
}

/// An APIService is gone: its gauge goes with it (kube's `ForgetAPIService`).
pub fn forget_apiservice(name: &str) {
    let _ = GLOBAL.aggregator_unavailable.remove_label_values(&[name]);
}

/// Admission's observations, into the process-wide series.
pub struct AdmissionMetrics;

fn flag(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

impl kapi_admission::AdmissionObserver for AdmissionMetrics {
    fn plugin(&self, name: &str, step: &'static str, operation: kapi_admission::Operation, rejected: bool, elapsed: std::time::Duration) {
        GLOBAL.admission_controller.with_label_values(&[name, step, operation.as_str(), flag(rejected)]).observe(elapsed.as_secs_f64());
    }

    fn webhook(
        &self,
        name: &str,
        kind: &'static str,
        operation: kapi_admission::Operation,
        rejection: Option<(kapi_admission::WebhookRejection, u16)>,
        elapsed: std::time::Duration,
    ) {
        GLOBAL.admission_webhook.with_label_values(&[name, kind, operation.as_str(), flag(rejection.is_some())]).observe(elapsed.as_secs_f64());
        if let Some((why, code)) = rejection {
            let code = code.min(600).to_string();
            GLOBAL.admission_webhook_rejections.with_label_values(&[name, kind, operation.as_str(), why.as_str(), &code]).inc();
        }
    }
}

/// Counts one audit event handed to the audit backend.
pub fn audit_event() {
    GLOBAL.audit_events.inc();
}

/// One automatic reload of the encryption configuration, done or refused.
pub fn encryption_config_reload(success: bool) {
    GLOBAL.encryption_reloads.with_label_values(&[if success { "success" } else { "failure" }]).inc();
}

/// One LIST served from the store or its watch cache (kube's `apiserver_storage_list_*`, by
/// `group.resource`, the resource alone for the core group).
pub fn storage_list(resource: &str, examined: u64, returned: u64) {
    GLOBAL.storage_list_total.with_label_values(&[resource]).inc();
    GLOBAL.storage_list_fetched.with_label_values(&[resource]).inc_by(examined);
    GLOBAL.storage_list_evaluated.with_label_values(&[resource]).inc_by(examined);
    GLOBAL.storage_list_returned.with_label_values(&[resource]).inc_by(returned);
}

/// API Priority and Fairness: a request rejected for `reason` (kube's `queue-full`,
/// `concurrency-limit`, `time-out`) after waiting `waited`.
pub fn flowcontrol_rejected(schema: &str, level: &str, reason: &str, waited: std::time::Duration) {
    GLOBAL.flowcontrol_rejected.with_label_values(&[schema, level, reason]).inc();
    GLOBAL.flowcontrol_wait.with_label_values(&[schema, level, "false"]).observe(waited.as_secs_f64());
}

/// The four request gauges of one flow schema in one priority level, resolved once and shared
/// by every request of the pair: the hot path then only adds and subtracts.
#[derive(Debug)]
pub struct FlowGauges {
    inqueue_requests: IntGauge,
    inqueue_seats: IntGauge,
    executing_requests: IntGauge,
    executing_seats: IntGauge,
    /// The flow's dispatched counter and its executed-wait histogram, looked up once here
    /// rather than by label values on every request.
    dispatched: prometheus::IntCounter,
    waited: prometheus::Histogram,
}

/// A level's flows' gauges, by schema.
type LevelFlows = HashMap<String, Arc<FlowGauges>>;

/// The pairs seen so far, by level then schema (lookups borrow the request's names).
static FLOW_GAUGES: LazyLock<RwLock<HashMap<String, LevelFlows>>> = LazyLock::new(Default::default);

/// API Priority and Fairness: the request gauges of `schema` in `level`.
pub fn flowcontrol_flow(level: &str, schema: &str) -> Arc<FlowGauges> {
    if let Some(found) = FLOW_GAUGES.read().unwrap_or_else(|e| e.into_inner()).get(level).and_then(|s| s.get(schema)) {
        return found.clone();
    }
    let mut all = FLOW_GAUGES.write().unwrap_or_else(|e| e.into_inner());
    let labels = [level, schema];
    all.entry(level.to_owned())
        .or_default()
        .entry(schema.to_owned())
        .or_insert_with(|| {
            Arc::new(FlowGauges {
                inqueue_requests: GLOBAL.flowcontrol_inqueue_requests.with_label_values(&labels),
                inqueue_seats: GLOBAL.flowcontrol_inqueue_seats.with_label_values(&labels),
                executing_requests: GLOBAL.flowcontrol_executing_requests.with_label_values(&labels),
                executing_seats: GLOBAL.flowcontrol_executing_seats.with_label_values(&labels),
                dispatched: GLOBAL.flowcontrol_dispatched.with_label_values(&[schema, level]),
                waited: GLOBAL.flowcontrol_wait.with_label_values(&[schema, level, "true"]),
            })
        })
        .clone()
}

impl FlowGauges {
    /// A request of the flow is dispatched after waiting `waited` (kube's dispatched counter
    /// and its wait histogram, `execute="true"`).
    pub fn dispatched(&self, waited: std::time::Duration) {
        self.dispatched.inc();
        self.waited.observe(waited.as_secs_f64());
    }

    /// A request of `seats` waits in a queue until the guard drops.
    pub fn in_queue(self: &Arc<Self>, seats: u32) -> InQueue {
        self.inqueue_requests.inc();
        self.inqueue_seats.add(i64::from(seats));
        InQueue { gauges: self.clone(), seats }
    }

    /// A request runs on `seats` until the guard drops; the seats stay counted `linger` longer
    /// (kube's final phase of a write, whose seats are released after its additional latency).
    pub fn executing(self: &Arc<Self>, seats: u32, linger: Duration) -> Executing {
        self.executing_requests.inc();
        self.executing_seats.add(i64::from(seats));
        Executing { gauges: self.clone(), seats, linger }
    }
}

/// A request counted in its queue.
#[derive(Debug)]
pub struct InQueue {
    gauges: Arc<FlowGauges>,
    seats: u32,
}

impl Drop for InQueue {
    fn drop(&mut self) {
        self.gauges.inqueue_requests.dec();
        self.gauges.inqueue_seats.sub(i64::from(self.seats));
    }
}

/// A request counted as executing.
#[derive(Debug)]
pub struct Executing {
    gauges: Arc<FlowGauges>,
    seats: u32,
    linger: Duration,
}

impl Drop for Executing {
    fn drop(&mut self) {
        self.gauges.executing_requests.dec();
        let seats = i64::from(self.seats);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !self.linger.is_zero() => {
                let (gauges, linger) = (self.gauges.clone(), self.linger);
                runtime.spawn(async move {
                    tokio::time::sleep(linger).await;
                    gauges.executing_seats.sub(seats);
                });
            }
            _ => self.gauges.executing_seats.sub(seats),
        }
    }
}

/// API Priority and Fairness: a level's configured bounds (kube's nominal, lower and upper
/// limit seats).
pub fn flowcontrol_level_limits(level: &str, nominal: u32, lower: u32, upper: u32) {
    GLOBAL.flowcontrol_nominal_limit.with_label_values(&[level]).set(i64::from(nominal));
    GLOBAL.flowcontrol_lower_limit.with_label_values(&[level]).set(i64::from(lower));
    GLOBAL.flowcontrol_upper_limit.with_label_values(&[level]).set(i64::from(upper));
}

/// API Priority and Fairness: the seats a level may use now (its nominal limit moved by
/// borrowing).
pub fn flowcontrol_current_limit(level: &str, seats: u32) {
    GLOBAL.flowcontrol_current_limit.with_label_values(&[level]).set(i64::from(seats));
}

/// API Priority and Fairness: a level left the configuration; its limit series go with it
/// (its request gauges stay: requests it still holds finish and bring them back to 0).
pub fn flowcontrol_forget_level(level: &str) {
    for vec in [&GLOBAL.flowcontrol_nominal_limit, &GLOBAL.flowcontrol_lower_limit, &GLOBAL.flowcontrol_upper_limit, &GLOBAL.flowcontrol_current_limit] {
        let _ = vec.remove_label_values(&[level]);
    }
}

/// API Priority and Fairness: (requests executing now, requests dispatched so far) of `level`
/// summed over its flow schemas, as the process-wide series have them (for the debug dump of
/// exempt levels, which keep no per-request state).
pub fn flowcontrol_level_totals(level: &str) -> (i64, u64) {
    let of_level = |m: &prometheus::proto::Metric| m.get_label().iter().any(|l| l.name() == "priority_level" && l.value() == level);
    let executing = GLOBAL.flowcontrol_executing_requests.collect().iter().flat_map(|f| f.get_metric()).filter(|m| of_level(m)).map(|m| m.get_gauge().get_value() as i64).sum();
    let dispatched = GLOBAL.flowcontrol_dispatched.collect().iter().flat_map(|f| f.get_metric()).filter(|m| of_level(m)).map(|m| m.get_counter().get_value() as u64).sum();
    (executing, dispatched)
}

/// client-go's request metrics for the webhooks kapi calls (admission, conversion,
/// authentication, authorization, audit).
pub struct RestClientMetrics;

impl kapi_webhook::CallObserver for RestClientMetrics {
    fn observe(&self, host: &str, method: &str, code: &str, elapsed: std::time::Duration) {
        GLOBAL.rest_client_requests.with_label_values(&[code, host, method]).inc();
        GLOBAL.rest_client_duration.with_label_values(&[host, method]).observe(elapsed.as_secs_f64());
    }
}

/// Counts one audit event a backend (`log`, `webhook`) failed to deliver.
pub fn audit_error(plugin: &'static str) {
    GLOBAL.audit_errors.with_label_values(&[plugin]).inc();
}

/// Records one admission phase: `step` is kube's `admit` (mutating) or `validate`.
pub fn admission_step(step: &'static str, operation: &'static str, rejected: bool, started: Instant) {
    GLOBAL
        .admission_step
        .with_label_values(&[step, operation, if rejected { "true" } else { "false" }])
        .observe(started.elapsed().as_secs_f64());
}
