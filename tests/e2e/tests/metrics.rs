//! A real Prometheus scrapes two kapi replicas (one SQLite file, NATS fan-out) over TLS with a
//! client certificate, as a platform team's would: every target is up and the replication
//! metrics (follower lag, NATS connection, repairs) arrive beside kube-apiserver's request
//! metrics.

use std::process::{Command, Stdio};
use std::time::Duration;

use kapi_e2e::{free_port, run_with_timeout, wait_for, which, Kapi, NatsServer, Request};
use serde_json::Value;

/// `GET <prometheus>/api/v1/query?query=<q>`: the result vector.
fn query(prometheus: u16, q: &str) -> Vec<Value> {
    let out = run_with_timeout(
        Command::new("curl").args(["-sS", "--get", "--data-urlencode", &format!("query={q}"), &format!("http://127.0.0.1:{prometheus}/api/v1/query")]),
        Duration::from_secs(20),
    )
    .expect("curl");
    let body: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    body["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn values(result: &[Value]) -> Vec<f64> {
    result.iter().filter_map(|r| r["value"][1].as_str().and_then(|v| v.parse().ok())).collect()
}

#[test]
fn prometheus_scrapes_every_replica_with_replication_metrics() {
    let prometheus_bin = which("prometheus").expect("prometheus (scripts/test.sh installs it)");
    let nats = NatsServer::start().expect("nats-server");
    let data = tempfile::Builder::new().prefix("kapi-prom-").tempdir().expect("data dir");
    let url = nats.url();
    let first = Kapi::start_with(&["--nats-url", &url]).expect("first replica");
    let second = first.start_replica(&["--nats-url", &url]).expect("second replica");
    let pki = first.pki_dir();
    let replicas = [first, second];
    let targets: Vec<String> = replicas.iter().map(|r| format!("'127.0.0.1:{}'", r.port())).collect();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: kapi\n    scheme: https\n    tls_config:\n      ca_file: {ca}\n      cert_file: {cert}\n      key_file: {key}\n      server_name: localhost\n    static_configs:\n      - targets: [{targets}]\n",
        ca = pki.join("ca.crt").display(),
        cert = pki.join("admin.crt").display(),
        key = pki.join("admin.key").display(),
        targets = targets.join(", ")
    );
    let config_path = data.path().join("prometheus.yml");
    std::fs::write(&config_path, config).expect("write prometheus.yml");
    let port = free_port().expect("port");
    let mut prometheus = Command::new(prometheus_bin)
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!("--storage.tsdb.path={}", data.path().join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn prometheus");

    // Some traffic for the request metrics.
    for r in &replicas {
        assert_eq!(r.request(&Request::get("/api/v1/namespaces")).status, 200);
    }
    let up = wait_for(Duration::from_secs(60), || {
        let ups = values(&query(port, "up{job=\"kapi\"}"));
        (ups.len() == 2 && ups.iter().all(|v| *v == 1.0)).then_some(())
    });
    let connected = wait_for(Duration::from_secs(30), || {
        let v = values(&query(port, "kapi_nats_connected"));
        (v.len() == 2 && v.iter().all(|v| *v == 1.0)).then_some(v)
    });
    let lag = values(&query(port, "kapi_watch_cache_follower_lag_revisions"));
    let applied = values(&query(port, "kapi_watch_cache_applied_revision"));
    let requests = values(&query(port, "sum(apiserver_request_total{verb=\"LIST\",resource=\"namespaces\"})"));
    let repairs = query(port, "kapi_watch_cache_repairs_total");
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    assert!(up.is_some(), "Prometheus did not scrape both replicas");
    assert!(connected.is_some(), "kapi_nats_connected is not 1 on both replicas");
    assert_eq!(lag.len(), 2, "follower lag from each replica");
    assert!(applied.iter().all(|v| *v > 0.0), "applied revisions: {applied:?}");
    assert_eq!(repairs.len(), 2, "repairs counter from each replica");
    assert!(requests.first().is_some_and(|v| *v >= 2.0), "request counter: {requests:?}");
}
