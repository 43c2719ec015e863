//! A real Prometheus scrapes kapi over TLS with a client certificate, as a platform team's
//! would. Two replicas (one SQLite file, NATS fan-out): every target is up and the replication
//! metrics (follower lag, NATS connection, repairs) arrive beside kube-apiserver's request
//! metrics. One replica after a known workload: `promtool check metrics` passes on `/metrics`
//! and `/metrics/slis`, and the PromQL of kube's dashboards and of kubernetes-mixin's
//! recording rules answers what the workload did.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kapi_e2e::{free_port, run_with_timeout, wait_for, which, Kapi, NatsServer, Request};
use serde_json::{json, Value};

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

/// Starts Prometheus scraping `targets` every second as job `apiserver` (kubernetes-mixin's
/// selectors name that job), over TLS with the admin client certificate of `pki`.
fn start_prometheus(data: &Path, pki: &Path, targets: &[u16]) -> (Child, u16) {
    let prometheus_bin = which("prometheus").expect("prometheus (scripts/test.sh installs it)");
    let targets: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: apiserver\n    scheme: https\n    tls_config:\n      ca_file: {ca}\n      cert_file: {cert}\n      key_file: {key}\n      server_name: localhost\n    static_configs:\n      - targets: [{targets}]\n",
        ca = pki.join("ca.crt").display(),
        cert = pki.join("admin.crt").display(),
        key = pki.join("admin.key").display(),
        targets = targets.join(", ")
    );
    let config_path = data.join("prometheus.yml");
    std::fs::write(&config_path, config).expect("write prometheus.yml");
    let port = free_port().expect("port");
    let child = Command::new(prometheus_bin)
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!("--storage.tsdb.path={}", data.join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn prometheus");
    (child, port)
}

/// `promtool check metrics` on an exposition: its complaints, empty when it passes.
fn promtool_problems(text: &str) -> Option<String> {
    let mut child = Command::new(which("promtool").expect("promtool (Debian package prometheus)"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("feed promtool");
    let out = child.wait_with_output().expect("promtool");
    (!out.status.success()).then(|| format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The single value of an instant query, once Prometheus has one that `accept`s.
fn value_when(prometheus: u16, q: &str, accept: impl Fn(f64) -> bool) -> Result<f64, String> {
    let mut last = Vec::new();
    wait_for(Duration::from_secs(30), || {
        last = values(&query(prometheus, q));
        match last[..] {
            [v] if accept(v) => Some(v),
            _ => None,
        }
    })
    .ok_or_else(|| format!("{q}: {last:?}"))
}

/// kubernetes-mixin's `apiserver_request:availability30d{verb="all"}`, written out from its
/// recording rules (`kube-apiserver-availability.rules`) with the recorded series replaced by
/// their definitions and the 30-day window by `window`: one minus the share of requests that
/// were too slow (writes over 1 s, reads over 1, 5 or 30 s by scope) or failed with a 5xx.
fn mixin_availability(window: &str) -> String {
    let sli_count = |verbs: &str| format!("sum(increase(apiserver_request_sli_duration_seconds_count{{job=\"apiserver\",verb=~\"{verbs}\"}}[{window}]))");
    let sli_fast = |verbs: &str, scope: &str, le: &str| {
        format!("sum(increase(apiserver_request_sli_duration_seconds_bucket{{job=\"apiserver\",verb=~\"{verbs}\",{scope}le=\"{le}\"}}[{window}]))")
    };
    let (write, read) = ("POST|PUT|PATCH|DELETE", "LIST|GET");
    format!(
        "1 - (({write_count} - {write_fast}) + ({read_count} - (({read_resource} or vector(0)) + {read_namespace} + {read_cluster})) + (sum(increase(apiserver_request_total{{job=\"apiserver\",verb=~\"LIST|GET|POST|PUT|PATCH|DELETE\",code=~\"5..\"}}[{window}])) or vector(0))) / sum(increase(apiserver_request_total{{job=\"apiserver\",verb=~\"LIST|GET|POST|PUT|PATCH|DELETE\"}}[{window}]))",
        write_count = sli_count(write),
        write_fast = sli_fast(write, "", "1"),
        read_count = sli_count(read),
        read_resource = sli_fast(read, "scope=~\"resource|\",", "1"),
        read_namespace = sli_fast(read, "scope=\"namespace\",", "5"),
        read_cluster = sli_fast(read, "scope=\"cluster\",", "30"),
    )
}

#[test]
fn kube_dashboards_and_mixin_rules_read_kapi() {
    // A tiny read budget (max-in-flight's, APF off), so that a burst by a user outside
    // system:masters meets kube's 429.
    let kapi = Kapi::start_with(&["--max-requests-inflight", "1", "--enable-priority-and-fairness=false"]).expect("kapi");
    let data = tempfile::Builder::new().prefix("kapi-prom-").tempdir().expect("data dir");
    let (mut prometheus, port) = start_prometheus(data.path(), &kapi.pki_dir(), &[kapi.port()]);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dashboards(&kapi, port)));
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

fn dashboards(kapi: &Kapi, port: u16) {
    let up = wait_for(Duration::from_secs(60), || (values(&query(port, "up{job=\"apiserver\"}")) == [1.0]).then_some(()));
    assert!(up.is_some(), "Prometheus did not scrape kapi");
    // The server's own watchers (its controllers' informers), before the test's.
    let watcher_query = "apiserver_registered_watchers{job=\"apiserver\",group=\"\",version=\"v1\",kind=\"ConfigMap\"}";
    let before = value_when(port, watcher_query, |_| true).expect("registered watchers");

    // /metrics is a nonResourceURL, authorized as in kube: neither anonymous nor a user
    // without a role may read it.
    let anonymous = kapi.request(&Request::get("/metrics").without_client_cert());
    assert!(matches!(anonymous.status, 401 | 403), "anonymous /metrics: {}", anonymous.status);
    let bob = kapi.issue_client_cert("bob", &[]);
    assert_eq!(kapi.request(&Request::get("/metrics").as_user(&bob)).status, 403, "/metrics without a role");

    // The workload: 3 creates, a 409, 3 GETs, a 404, a LIST, a watch that ends and one that
    // stays open.
    let ns = "metrics-e2e";
    assert_eq!(kapi.request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"metadata": {"name": ns}}))).status, 201);
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    for i in 0..3 {
        let created = kapi.request(&Request::new("POST", &cms).json(&json!({"metadata": {"name": format!("cm-{i}")}, "data": {"k": "v"}})));
        assert_eq!(created.status, 201, "{}", created.raw);
    }
    assert_eq!(kapi.request(&Request::new("POST", &cms).json(&json!({"metadata": {"name": "cm-0"}}))).status, 409);
    for i in 0..3 {
        assert_eq!(kapi.request(&Request::get(&format!("{cms}/cm-{i}"))).status, 200);
    }
    assert_eq!(kapi.request(&Request::get(&format!("{cms}/missing"))).status, 404);
    assert_eq!(kapi.request(&Request::get(&cms)).status, 200);
    assert_eq!(kapi.request(&Request::get(&format!("{cms}?watch=1&timeoutSeconds=1"))).status, 200);
    let kubectl = which("kubectl").expect("kubectl");
    let mut watch = kapi
        .kubectl_command(&kubectl, &["get", "configmaps", "-n", ns, "--watch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get --watch");

    // A burst of concurrent LISTs by a user the in-flight budget applies to: some get 429.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "bob-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]});
    let bound = kapi.request(&Request::new("POST", &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings")).json(&binding));
    assert_eq!(bound.status, 201, "{}", bound.raw);
    let pods = format!("/api/v1/namespaces/{ns}/pods");
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let burst: Vec<_> = (0..40).map(|_| s.spawn(|| kapi.request(&Request::get(&pods).as_user(&bob)).status)).collect();
        burst.into_iter().map(|t| t.join().expect("request thread")).collect()
    });
    let rejected = statuses.iter().filter(|s| **s == 429).count() as f64;
    assert!(rejected >= 1.0, "no 429 in the burst: {statuses:?}");
    assert!(statuses.iter().all(|s| matches!(s, 200 | 429)), "{statuses:?}");
    let too_many = value_when(port, "sum(apiserver_request_total{job=\"apiserver\",resource=\"pods\",code=\"429\"})", |v| v >= rejected);

    let watchers = value_when(port, watcher_query, |v| v == before + 1.0);
    let longrunning = value_when(port, "sum(apiserver_longrunning_requests{job=\"apiserver\",verb=\"WATCH\",resource=\"configmaps\"})", |v| v >= 1.0);

    // promtool's lint on both endpoints, after the workload.
    for path in ["/metrics", "/metrics/slis"] {
        let answer = kapi.request(&Request::get(path).accept("text/plain"));
        assert_eq!(answer.status, 200, "{path}");
        assert!(answer.raw.contains("# TYPE"), "{path}: {}", answer.raw);
        if let Some(problems) = promtool_problems(&answer.raw) {
            panic!("promtool check metrics {path}:\n{problems}");
        }
    }
    // LISTs served: how many, and the objects they read and returned (3 ConfigMaps per LIST).
    let text = kapi.request(&Request::get("/metrics").accept("text/plain")).raw;
    let series = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{resource=\"configmaps\"}}")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(series("apiserver_storage_list_total") >= 2.0, "{text}");
    assert!(series("apiserver_storage_list_returned_objects_total") >= 6.0, "{text}");
    assert!(series("apiserver_storage_list_fetched_objects_total") >= series("apiserver_storage_list_returned_objects_total"));
    let slis = kapi.request(&Request::get("/metrics/slis").accept("text/plain")).raw;
    assert!(slis.contains("kubernetes_healthcheck{name=\"ping\",type=\"readyz\"} 1"), "{slis}");
    assert!(slis.contains("kubernetes_healthchecks_total{name=\"ping\",status=\"success\",type=\"readyz\"}"), "{slis}");

    // Request counts by verb, resource and code (kubectl's watch LISTs first; its WATCH is
    // still open, so not counted yet: kube records a watch when it ends).
    let count = |verb: &str, code: &str| {
        format!("sum(apiserver_request_total{{job=\"apiserver\",group=\"\",version=\"v1\",resource=\"configmaps\",verb=\"{verb}\",code=\"{code}\"}})")
    };
    let expected = [("POST", "201", 3.0), ("POST", "409", 1.0), ("GET", "200", 3.0), ("GET", "404", 1.0), ("LIST", "200", 2.0), ("WATCH", "200", 1.0)];
    for (verb, code, n) in expected {
        let q = count(verb, code);
        assert_eq!(value_when(port, &q, |v| v >= n), Ok(n), "{q}");
    }
    let stored = kapi.get_json("/api/v1/configmaps")["items"].as_array().map_or(0, Vec::len) as f64;
    let objects = value_when(port, "apiserver_storage_objects{job=\"apiserver\",resource=\"configmaps\"}", |v| v == stored);
    let quantile = value_when(port, "histogram_quantile(0.99, sum(rate(apiserver_request_duration_seconds_bucket{job=\"apiserver\"}[1m])) by (le))", f64::is_finite);
    // kubernetes-mixin's read latency rule (cluster_quantile:apiserver_request_sli_duration_seconds:histogram_quantile).
    let read_latency = value_when(
        port,
        "histogram_quantile(0.99, sum by (le, resource) (rate(apiserver_request_sli_duration_seconds_bucket{job=\"apiserver\",verb=~\"LIST|GET\",subresource!~\"proxy|attach|log|exec|portforward\",resource=\"configmaps\"}[5m]))) > 0",
        f64::is_finite,
    );
    let availability = value_when(port, &mixin_availability("5m"), |v| v.is_finite());
    let _ = watch.kill();
    let _ = watch.wait();

    assert_eq!(too_many, Ok(rejected), "apiserver_request_total counts the burst's 429s");
    assert!(watchers.is_ok(), "the open watch is not in {watcher_query}: {watchers:?} (before: {before})");
    assert!(longrunning.is_ok(), "open watch not in apiserver_longrunning_requests: {longrunning:?}");
    assert_eq!(objects, Ok(stored), "apiserver_storage_objects against a list of every ConfigMap");
    let quantile = quantile.expect("p99 of apiserver_request_duration_seconds");
    assert!(quantile > 0.0 && quantile <= 60.0, "p99 {quantile}");
    let read_latency = read_latency.expect("mixin read latency");
    assert!(read_latency > 0.0 && read_latency <= 1.0, "read p99 {read_latency}");
    let availability = availability.expect("mixin availability");
    assert!((0.9..=1.0).contains(&availability), "availability {availability}");
}
