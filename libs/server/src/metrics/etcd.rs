//! kube's etcd client series (`etcd_request_duration_seconds`, `etcd_requests_total`,
//! `etcd_request_errors_total`), observed by the etcd backend for every request it makes.
//! Process-wide like kube's legacy registry: the store outlives any one server handle.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Registry};

use super::{opts, register};

struct Series {
    duration: HistogramVec,
    requests: IntCounterVec,
    errors: IntCounterVec,
}

const LABELS: &[&str] = &["operation", "group", "resource"];

static SERIES: LazyLock<Series> = LazyLock::new(|| Series {
    duration: HistogramVec::new(
        HistogramOpts::from(opts("etcd_request_duration_seconds", "ALPHA", "Etcd request latency in seconds for each operation and object type."))
            // kube's buckets, kept in step with apiserver_request_duration_seconds.
            .buckets(vec![
                0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
            ]),
        LABELS,
    )
    .expect("metric definition"),
    requests: IntCounterVec::new(opts("etcd_requests_total", "ALPHA", "Etcd request counts for each operation and object type."), LABELS)
        .expect("metric definition"),
    errors: IntCounterVec::new(opts("etcd_request_errors_total", "ALPHA", "Etcd failed request counts for each operation and object type."), LABELS)
        .expect("metric definition"),
});

pub(super) fn register_into(registry: &Registry) {
    register(registry, SERIES.duration.clone());
    register(registry, SERIES.requests.clone());
    register(registry, SERIES.errors.clone());
}

/// kube's group and resource of a storage key or prefix (`/registry/<group or core>/<resource>/...`);
/// empty for the store's bookkeeping.
fn group_resource(key: &str) -> (&str, &str) {
    let mut parts = key.strip_prefix("/registry/").unwrap_or("").split('/');
    let group = parts.next().unwrap_or("");
    let resource = parts.next().unwrap_or("");
    (if group == "core" { "" } else { group }, resource)
}

/// The backend's observer, feeding the process-wide series.
#[derive(Debug, Clone, Copy)]
pub struct Observer;

impl kapi_storage::etcd::EtcdObserver for Observer {
    fn observe(&self, operation: &'static str, key: &str, elapsed: Duration, answered: bool) {
        let (group, resource) = group_resource(key);
        let labels = [operation, group, resource];
        SERIES.duration.with_label_values(&labels).observe(elapsed.as_secs_f64());
        SERIES.requests.with_label_values(&labels).inc();
        if !answered {
            SERIES.errors.with_label_values(&labels).inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_kubes_group_and_resource() {
        assert_eq!(group_resource("/registry/core/pods/default/web"), ("", "pods"));
        assert_eq!(group_resource("/registry/apps/deployments/"), ("apps", "deployments"));
        assert_eq!(group_resource(""), ("", ""));
    }
}
