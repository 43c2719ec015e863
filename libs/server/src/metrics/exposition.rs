//! The Prometheus text format of `/metrics` and `/metrics/slis`.
//!
//! kube registers a few counters without the `_total` suffix (`authentication_attempts`,
//! `authenticated_user_requests`). Prometheus' lint (`promtool check metrics`) refuses a
//! counter so named, and renaming them would break the queries written for kube; they are
//! written as untyped instead: the same name and samples, and PromQL reads them the same.

use http::StatusCode;
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};

use crate::response::{self, Body};
use crate::state::ApiServer;

/// kube's counters whose names lack `_total`.
const COUNTERS_WITHOUT_TOTAL: &[&str] = &["authentication_attempts", "authenticated_user_requests"];

const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Text exposition of `families`, kube's `_total`-less counters as untyped.
pub fn encode(families: Vec<MetricFamily>) -> Vec<u8> {
    let (untyped, typed): (Vec<_>, Vec<_>) = families
        .into_iter()
        .partition(|f| f.get_field_type() == MetricType::COUNTER && COUNTERS_WITHOUT_TOTAL.contains(&f.name()));
    let mut buf = Vec::new();
    if let Err(e) = TextEncoder::new().encode(&typed, &mut buf) {
        tracing::error!("encoding metrics: {e}");
    }
    // The crate's encoder does not write untyped families: written here, in its format.
    for family in &untyped {
        write_untyped(&mut buf, family);
    }
    buf
}

fn write_untyped(out: &mut Vec<u8>, family: &MetricFamily) {
    use std::io::Write;
    let name = family.name();
    let help = family.help().replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} untyped");
    for m in family.get_metric() {
        let labels: Vec<String> = m
            .get_label()
            .iter()
            .map(|l| format!("{}=\"{}\"", l.name(), l.value().replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")))
            .collect();
        let labels = if labels.is_empty() { String::new() } else { format!("{{{}}}", labels.join(",")) };
        let _ = writeln!(out, "{name}{labels} {}", m.get_counter().get_value());
    }
}

/// `GET /metrics` (everything, scrape-time values refreshed first) and `/metrics/slis` (the
/// health checks' results, kube's SLI endpoint).
pub fn respond(srv: &ApiServer, path: &str) -> hyper::Response<Body> {
    let body = if path == "/metrics/slis" {
        srv.health.slis().render()
    } else {
        srv.metrics.set_replication(&srv.rest.caches().lag(), srv.fanout.as_ref().map(|f| f.stats()).as_ref());
        srv.metrics.scrape.refresh(srv);
        srv.metrics.render()
    };
    response::text(StatusCode::OK, body, CONTENT_TYPE)
}
